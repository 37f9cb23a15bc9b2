/**
 * A rehearsal of `scripts/gpu-check.sh trace` and `scripts/gpu-check.sh estimates` on the fake GPU
 * (as gpu-checks-rehearsal.test.ts does for `check`): nvidia-smi, libnvidia-ml and libcuda are the
 * stand-ins, and the "CUDA llama-server" is the stand-in server, which takes its model's size of
 * device memory through the fake CUDA driver and streams a token every 2 ms of its own timer (a
 * SIGSTOP stops it as it stops a real one). So the script, the benchmark's GPU path under real
 * `gpu-share run` gates with the trace on, the analyser, the planner's estimate and the NVML
 * sampling all run end to end; on the GPU only the hardware is new.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFakeGpu, fakeUuid, writeFakeNvml } from '../fixtures/fake-nvml/build.js';
import { FAKE_LLAMA_SERVER, ROOT } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import type { EstimateCase } from '../fixtures/gpu-estimates.js';
import type { PacingTrace, TraceFindings } from '../bench/pacing-trace.js';

const MiB = 1024 * 1024;
const KEY = fakeUuid(0x4300_0000 + process.pid);
let dir = '';
let env: NodeJS.ProcessEnv = {};

beforeAll(() => {
  if (process.platform !== 'linux') return;
  dir = mkdtempSync(join(tmpdir(), 'gpushare-gpu-trace-rehearsal-'));
  const gpu = buildFakeGpu(join(dir, 'gpu'));
  const state = join(dir, 'state.json');
  writeFakeNvml(state, {
    cudaDir: join(dir, 'held'),
    devices: [{ uuid: KEY, name: 'NVIDIA H200 (fake)', total: 143771 * MiB, used: 645_000_000, util: 37, temp: 31, powerMw: 76_000, processes: [] }],
  });
  const server = join(dir, 'llama-server');
  writeFileSync(server, `#!/bin/sh\nexec '${process.execPath}' '${FAKE_LLAMA_SERVER}' --hold-model-on-gpu --load-ms 200 --token-ms 2 "$@"\n`);
  chmodSync(server, 0o755);
  const emptyCache = join(dir, 'cache');
  mkdirSync(emptyCache);
  const inherited = { ...process.env };
  for (const name of ['GPU_SHARE_NVML_LIB', 'GPU_SHARE_SIM', 'CUDA_VISIBLE_DEVICES', 'FAKE_CUDA_DISCARD', 'GPU_SHARE_PACER_TRACE']) delete inherited[name];
  env = { ...inherited, PATH: `${gpu.binDir}:${process.env['PATH'] ?? ''}`, LD_LIBRARY_PATH: gpu.libDir, FAKE_NVML_JSON: state, GPU_SHARE_CACHE: emptyCache, LLAMA_SERVER: server };
});

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
  removeSegment(KEY);
});

describe.skipIf(process.platform !== 'linux')('gpu-check.sh trace and estimates, rehearsed on a fake GPU', () => {
  it('trace: one gate run at 2:1 writes the trace and its analysis', () => {
    const out = join(dir, 'out-trace');
    // One mode and 1 s measured: the script's own run is gate and naive over 10 s.
    const result = spawnSync('bash', [join(ROOT, 'scripts', 'gpu-check.sh'), 'trace', out], { env: { ...env, BENCH_ARGS: '--modes gate --measure-s 1' }, encoding: 'utf8', timeout: 120_000 });
    const output = `${result.stdout}${result.stderr}`;
    const log = existsSync(join(out, 'trace.log')) ? readFileSync(join(out, 'trace.log'), 'utf8') : '';
    expect(readFileSync(join(out, 'summary.txt'), 'utf8'), `${output}\n${log}`).toMatch(/^gpu-check: bench:pacing --gpu --trace: exit 0 /m);
    const file = JSON.parse(readFileSync(join(out, 'trace-gpu.json'), 'utf8')) as { traces: PacingTrace[]; findings: TraceFindings[] };
    expect(file.traces.map((t) => [t.scenario, t.mode, t.run])).toEqual([['2:1', 'gate', 1]]);
    const [trace] = file.traces;
    expect(trace?.engines).toHaveLength(2);
    for (const engine of trace?.engines ?? []) {
      expect(engine.tokens.length, log).toBeGreaterThan(20);
      const kinds = new Set(engine.gate.map((e) => e.k));
      for (const kind of ['decide', 'stop', 'cont', 'sample', 'poll', 'answer']) expect(kinds, `engine ${engine.slot}: ${[...kinds].join(',')}`).toContain(kind);
    }
    expect((trace?.toUs ?? 0) - (trace?.fromUs ?? 0)).toBeLessThanOrEqual(10e6);
    // NVML's device samples through the binding (the fake reads 37 %); per process: not bound.
    expect(Array.isArray(trace?.nvml.device) && trace.nvml.device.length > 0 && trace.nvml.device.every(([, pct]) => pct === 37)).toBe(true);
    expect(trace?.nvml.processes).toMatch(/^not available: /);
    expect(file.findings[0]?.engines.map((e) => e.windows)).toEqual([8, 8]);
    expect(log).toMatch(/^ {4}engine 1: \d+ lost and \d+ silent window\(s\) of 8; longest gap/m);
  }, 150_000);

  it('estimates: the planner\'s estimate against NVML\'s peak, three models at two contexts, as a table', () => {
    const out = join(dir, 'out-estimates');
    const result = spawnSync('bash', [join(ROOT, 'scripts', 'gpu-check.sh'), 'estimates', out], { env, encoding: 'utf8', timeout: 120_000 });
    const output = `${result.stdout}${result.stderr}`;
    const log = existsSync(join(out, 'estimates.log')) ? readFileSync(join(out, 'estimates.log'), 'utf8') : '';
    expect(readFileSync(join(out, 'summary.txt'), 'utf8'), `${output}\n${log}`).toMatch(/^gpu-check: planner estimates against NVML: exit 0 /m);
    const { cases } = JSON.parse(readFileSync(join(out, 'estimates.json'), 'utf8')) as { cases: EstimateCase[] };
    expect(cases.map((c) => [c.model, c.ctx])).toEqual([['E2048/L8 q8_0', 2048], ['E2048/L8 q8_0', 8192], ['E4096/L6 f16', 2048], ['E4096/L6 f16', 8192], ['E3072/L4 f32', 2048], ['E3072/L4 f32', 8192]]);
    for (const c of cases) {
      // The stand-in takes its file's size: that is the peak NVML must have seen.
      expect(c.measuredPeakBytes, log).toBe(c.fileBytes);
      expect(c.estimateBytes, log).toBeGreaterThan(c.fileBytes * 0.9);
      expect(c.errorPct).toBeCloseTo((((c.estimateBytes ?? 0) - c.fileBytes) / c.fileBytes) * 100, 0);
    }
    // A longer context costs more in the estimate (the KV cache).
    expect((cases[1]?.estimateBytes ?? 0) - (cases[0]?.estimateBytes ?? 0)).toBeGreaterThan(0);
    const table = readFileSync(join(out, 'estimates.txt'), 'utf8');
    expect(table.split('\n')[0]).toMatch(/^model\s+file MB\s+ctx\s+estimate MB \(basis\)\s+NVML peak MB\s+error %/);
    expect(table.trim().split('\n')).toHaveLength(8);
  }, 150_000);
});
