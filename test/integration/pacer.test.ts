/**
 * The pacer with real processes: two burn engines at 2:1 (cooperative and through the process
 * gate), an idle engine never suspended, the watchdog after SIGKILL, and `gpu-share run` passing
 * signals and exit codes through. Ratios are loose (clearly paced: 1.5–2.7) to stay stable on a noisy machine; the
 * benchmark holds the tight figures.
 */
import { type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BURN_ENGINE, CLI, childrenOf, exitOf, procState, readBurnOutput, spawnNode, tokensBetween, until , PACED_2_1_HIGH, PACED_2_1_LOW } from '../fixtures/procs.js';
import { removeSegment, testKey } from '../fixtures/segments.js';

const children: ChildProcess[] = [];
const keys: string[] = [];
let dir = '';
let iterations = 0;

function start(args: string[], pin = true): ChildProcess {
  const child = spawnNode(args, pin);
  children.push(child);
  return child;
}

function key(prefix: string): string {
  const k = testKey(prefix);
  keys.push(k);
  return k;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-pacer-'));
  const calibration = start([BURN_ENGINE, '--calibrate', '--token-ms', '5']);
  let out = '';
  calibration.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await exitOf(calibration);
  iterations = (JSON.parse(out) as { iterations: number }).iterations;
});

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      // The supervisor's command too: resumed (it may be stopped) and killed, so none outlives the test.
      if (child.pid !== undefined) {
        for (const pid of childrenOf(child.pid)) {
          try {
            process.kill(pid, 'SIGCONT');
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      }
      child.kill('SIGKILL');
      await exitOf(child);
    }
  }
  for (const k of keys.splice(0)) removeSegment(k);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const commandLineOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};

/** tok/s of each engine over the seconds [from, to) after the later engine's first token. */
function rates(outputs: ReturnType<typeof readBurnOutput>[], fromS: number, toS: number): number[] {
  const t0 = Math.max(...outputs.map((o) => o.tokens[0] ?? Infinity));
  return outputs.map((o) => tokensBetween(o, t0 + fromS * 1e6, t0 + toS * 1e6).length / (toS - fromS));
}

describe('pacer with real processes', () => {
  it('two cooperative burn engines at 2:1 share one core 2:1 (clearly paced: 1.5–2.7)', async () => {
    const k = key('coop');
    const outs = [join(dir, 'coop-a.json'), join(dir, 'coop-b.json')];
    const engines = [
      start([BURN_ENGINE, '--mode', 'coop', '--gpu-key', k, '--weight', '2', '--iterations', String(iterations), '--duration-s', '5', '--out', outs[0] ?? '']),
      start([BURN_ENGINE, '--mode', 'coop', '--gpu-key', k, '--weight', '1', '--iterations', String(iterations), '--duration-s', '5', '--out', outs[1] ?? '']),
    ];
    for (const engine of engines) expect((await exitOf(engine)).code).toBe(0);
    const [a, b] = rates(outs.map(readBurnOutput), 1, 4);
    expect(b).toBeGreaterThan(0);
    expect((a ?? 0) / (b ?? 1)).toBeGreaterThan(PACED_2_1_LOW);
    expect((a ?? 0) / (b ?? 1)).toBeLessThan(PACED_2_1_HIGH);
  });

  it('two unaware engines under `gpu-share run` at 2:1 share one core 2:1 (clearly paced: 1.5–2.7)', async () => {
    const k = key('gate');
    const outs = [join(dir, 'gate-a.json'), join(dir, 'gate-b.json')];
    const engines = [2, 1].map((weight, i) =>
      start([CLI, 'run', '--gpu-key', k, '--weight', String(weight), '--', process.execPath, BURN_ENGINE, '--mode', 'unaware', '--iterations', String(iterations), '--duration-s', '6', '--out', outs[i] ?? '']),
    );
    for (const engine of engines) expect((await exitOf(engine)).code).toBe(0);
    // The first 1.5 s: CPU-time activity has to show before pacing starts.
    const [a, b] = rates(outs.map(readBurnOutput), 1.5, 5);
    expect(b).toBeGreaterThan(0);
    expect((a ?? 0) / (b ?? 1)).toBeGreaterThan(PACED_2_1_LOW);
    expect((a ?? 0) / (b ?? 1)).toBeLessThan(PACED_2_1_HIGH);
  });

  it('never suspends an idle engine', async () => {
    const k = key('idle');
    start([BURN_ENGINE, '--mode', 'coop', '--gpu-key', k, '--weight', '1', '--iterations', String(iterations), '--duration-s', '30']);
    const supervisor = start([CLI, 'run', '--gpu-key', k, '--weight', '5', '--', 'sleep', '30']);
    const sleeper = await until(() => childrenOf(supervisor.pid ?? 0).find((pid) => commandLineOf(pid).startsWith('sleep')), 5_000, 'the sleep process');
    const states = new Set<string | null>();
    const deadline = Date.now() + 2_500;
    while (Date.now() < deadline) {
      states.add(procState(sleeper));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(states.has('T')).toBe(false);
  });

  it('the watchdog resumes a suspended engine within 1 s of its supervisor being SIGKILLed, and ends it', async () => {
    const k = key('watchdog');
    // A heavy cooperative peer (weight 9) keeps the paced engine outside its window 90% of the time.
    start([BURN_ENGINE, '--mode', 'coop', '--gpu-key', k, '--weight', '9', '--iterations', String(iterations), '--duration-s', '30']);
    const supervisor = start([CLI, 'run', '--gpu-key', k, '--weight', '1', '--', process.execPath, BURN_ENGINE, '--mode', 'unaware', '--iterations', String(iterations), '--duration-s', '30']);
    // Its children: the watchdog and the engine (each names `run`'s command line until it execs).
    const engine = await until(() => childrenOf(supervisor.pid ?? 0).find((pid) => commandLineOf(pid).startsWith(`${process.execPath}\0${BURN_ENGINE}`)), 5_000, 'the paced engine');
    await until(() => procState(engine) === 'T', 10_000, 'the engine to be suspended', 1);
    supervisor.kill('SIGKILL');
    const killedAt = Date.now();
    await until(() => procState(engine) !== 'T', 1_000, 'the engine to run again', 5);
    expect(Date.now() - killedAt).toBeLessThan(1_000);
    // Then it is ended (SIGTERM; SIGKILL after the grace): a command nobody paces any more does
    // not run on.
    await until(() => procState(engine) === null || procState(engine) === 'Z', 5_000, 'the engine to exit', 20);
  });

  it('`gpu-share run` forwards SIGTERM and exits with the command’s exit code', async () => {
    const k = key('signals');
    const supervisor = start([CLI, 'run', '--gpu-key', k, '--', 'sh', '-c', 'trap "exit 7" TERM; while :; do sleep 0.05; done'], false);
    let stderr = '';
    supervisor.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await until(() => stderr.includes('joined'), 5_000, 'the boot line');
    supervisor.kill('SIGTERM');
    expect(await exitOf(supervisor)).toEqual({ code: 7, signal: null });
    const plain = start([CLI, 'run', '--gpu-key', k, '--', 'sh', '-c', 'exit 3'], false);
    expect((await exitOf(plain)).code).toBe(3);
    const missing = start([CLI, 'run', '--gpu-key', k, '--', 'no-such-command-here'], false);
    expect((await exitOf(missing)).code).toBe(127);
  });
});
