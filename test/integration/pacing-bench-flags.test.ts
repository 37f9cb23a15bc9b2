/**
 * bench:pacing's engine choice for the real-engine benchmark: what each engine runs, which modes it
 * takes, and a bad flag refused with one line naming it (exit 2) before anything starts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { backendOf, benchName, defaultLlamaModes, engineArgv, LLAMA_MODES, RESUME_MODES, stopPeerWeight } from '../bench/pacing-llama.js';
import { BUILTIN_HOST, ROOT } from '../fixtures/procs.js';

const BENCH = join(ROOT, 'dist', 'test', 'bench', 'pacing-bench.js');
const args = { model: '/m.gguf', port: 8123, ctx: 1024, threads: 1, gpuLayers: 0 };

describe('the real-engine benchmark’s engines', () => {
  it('runs the built-in engine with the llama-server’s model, context, threads and offload, joining the registry only in coop', () => {
    expect(engineArgv('llama-server', '/bin/llama-server', args, null)).toEqual(['/bin/llama-server', '-m', '/m.gguf', '--host', '127.0.0.1', '--port', '8123', '-c', '1024', '-np', '1', '-t', '1', '-tb', '1', '-ngl', '0', '--metrics', '--no-warmup']);
    expect(engineArgv('builtin', '', args, null)).toEqual([process.execPath, '--max-semi-space-size=1', BUILTIN_HOST, '--model', '/m.gguf', '--ctx', '1024', '--gpu-layers', '0', '--threads', '1', '--port', '8123']);
    expect(engineArgv('builtin', '', { ...args, gpuLayers: 999, threads: 4 }, { gpuKey: 'k', weight: 2, name: 'e0' }).slice(3)).toEqual(['--model', '/m.gguf', '--ctx', '1024', '--gpu-layers', 'max', '--threads', '4', '--port', '8123', '--gpu-key', 'k', '--weight', '2', '--name', 'e0']);
  });

  it('offers coop to the built-in engine only, and on the GPU runs what fits the check part', () => {
    expect(LLAMA_MODES['llama-server']).not.toContain('coop');
    expect(LLAMA_MODES.builtin).toContain('coop');
    expect(defaultLlamaModes('gpu', 'llama-server')).toEqual(['free', 'gate']);
    expect(defaultLlamaModes('gpu', 'builtin')).toEqual(['free', 'gate', 'coop']);
    expect(defaultLlamaModes('cpu', 'builtin')).toEqual(LLAMA_MODES.builtin);
    // The resume-cost probe: the built-in engine's own gate first, and SIGSTOP as for any engine.
    expect(RESUME_MODES.builtin).toEqual(['coop', 'naive']);
    expect(RESUME_MODES['llama-server']).toEqual(['naive']);
    expect([40, 120, 360].map(stopPeerWeight)).toEqual([1, 3, 9]);
    expect([benchName('gpu', 'llama-server'), benchName('cpu', 'llama-server'), benchName('gpu', 'builtin'), benchName('cpu', 'builtin')]).toEqual(['gpu', 'llama-server', 'gpu-builtin', 'builtin-cpu']);
  });

  it('reads the backend from the built-in engine’s "model loaded" line only', () => {
    expect(backendOf('model loaded: m (4 layers, ctx 1024, 1 threads, gpu cuda, chat template General) in 0.31 s')).toBe('cuda');
    expect(backendOf('model loaded: m (4 layers, ctx 1024, 1 threads, gpu none, chat template General) in 0.31 s')).toBe('none');
    expect(backendOf('listening on 127.0.0.1:8123, gpu cuda, later')).toBeNull();
  });
});

describe.skipIf(process.platform !== 'linux')('bench:pacing refuses a bad engine flag with one line', () => {
  const cases: [string[], string][] = [
    [['--engine', 'builtin'], '--engine: goes with --llama-server or --gpu'],
    [['--llama-server', '--engine', 'vllm'], '--engine: unknown engine vllm (engines: llama-server, builtin)'],
    [['--llama-server', '--engine', 'builtin', '--modes', 'coop,warp'], '--modes: mode warp is not one the builtin engine runs (free, naive, gate, coop)'],
    [['--llama-server', '--engine', 'builtin', '--resume-cost', '--modes', 'gate'], '--modes: mode gate is not one the builtin engine runs in --resume-cost (coop, naive)'],
    [['--setups', 'builtin'], '--setups: goes with --serve'],
    [['--serve', '--engine', 'builtin'], "--serve: runs on its own (with --setups, --measure-s, --blocks, --warm-s, --repeat, --trace, --json), not with the pinned benchmarks' flags"],
    [['--blocks', '2'], '--blocks: goes with --serve (its blocks of both engines at once)'],
    [['--serve', '--blocks', '0'], '--blocks: must be a whole number of blocks from 1 to 20 (got 0)'],
    [['--serve', '--blocks', '20', '--measure-s', '10'], '--blocks: 20 blocks of --measure-s 10 last 0.5 s each; a block needs at least 1 s (a few requests)'],
    [['--serve', '--blocks', '2.5'], '--blocks: must be a whole number of blocks from 1 to 20 (got 2.5)'],
    [['--trace', 'steps'], '--trace: goes with --llama-server, --gpu or --serve'],
    [['--llama-server', '--warm-s', 'soon'], '--warm-s: must be a number of seconds from 0 to 600 (got soon)'],
    [['--serve', '--warm-s=-1'], '--warm-s: must be a number of seconds from 0 to 600 (got -1)'],
    [['--quick', '--warm-s', '5'], '--warm-s: goes with --serve, --llama-server or --gpu (the real engines it warms)'],
    [['--serve', '--setups', 'builtin,warp'], '--setups: unknown setup warp (setups: builtin, builtin-1, llama-server)'],
  ];
  for (const [flags, message] of cases) {
    it(flags.join(' '), () => {
      const result = spawnSync(process.execPath, [BENCH, ...flags], { encoding: 'utf8', timeout: 60_000 });
      expect(result.status).toBe(2);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toContain(message);
    });
  }
});

describe.skipIf(process.platform !== 'linux')('bench:pacing --serve --trace', () => {
  it('refuses a folder that already holds a trace (a host never writes over one) before anything starts', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpushare-serve-trace-'));
    try {
      writeFileSync(join(dir, 'builtin-run1.4242'), '');
      const result = spawnSync(process.execPath, [BENCH, '--serve', '--setups', 'builtin', '--trace', dir], { encoding: 'utf8', timeout: 60_000 });
      expect(result.status).toBe(2);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toContain(`--trace: ${dir} already holds a trace (builtin-run1.4242); name an empty folder`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(process.platform !== 'linux')('bench:pacing’s flags', () => {
  it('names a flag it does not know and shows the usage, without a stack trace (exit 2)', () => {
    const result = spawnSync(process.execPath, [BENCH, '--llama-server', '--repeats', '3'], { encoding: 'utf8', timeout: 60_000 });
    expect(result.status).toBe(2);
    expect(result.stderr.split('\n')[0]).toMatch(/^bench:pacing: Unknown option '--repeats'/);
    expect(result.stderr).toContain('usage: npm run bench:pacing');
    expect(result.stderr).not.toContain('    at ');
  });

  it('prints its usage on --help (stdout, exit 0) and starts nothing', () => {
    const result = spawnSync(process.execPath, [BENCH, '--help'], { encoding: 'utf8', timeout: 60_000 });
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^usage: npm run bench:pacing -- \[flags\]/);
    expect(result.stdout).toContain('--llama-server | --gpu');
    expect(result.stderr).toBe('');
  });
});
