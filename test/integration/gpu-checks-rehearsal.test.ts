/**
 * A rehearsal of the checks that need a real NVIDIA GPU (test/fixtures/gpu-checks.ts and
 * scripts/gpu-check.sh), on a CPU machine: the same compiled checks, started as on the GPU machine,
 * find a fake GPU where they would find the real one — libnvidia-ml.so.1 and libcuda.so.1 on
 * LD_LIBRARY_PATH, nvidia-smi on PATH (fake-nvml/build.ts buildFakeGpu), one state file behind all
 * three. The memory holder is the real gpu_hold.c, taking memory through the CUDA driver stand-in;
 * the "CUDA llama-server" is the stand-in llama-server taking its model's size the same way. So
 * every check runs its own code end to end (launch, run, plan, the NVML binding, nvidia-smi
 * parsing), and on the GPU only the hardware is new. Nothing here is selected on a real GPU: the
 * fakes exist only in this test's folder and only its child processes are pointed at them.
 * Broken on purpose (allocations NVML never sees, nvidia-smi disagreeing on used memory), the
 * checks must fail.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFakeGpu, fakeUuid, writeFakeNvml } from '../fixtures/fake-nvml/build.js';
import type { GpuCheck } from '../fixtures/gpu-checks.js';
import { FAKE_LLAMA_SERVER, ROOT } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';

const MiB = 1024 * 1024;
const CHECKS = join(ROOT, 'dist', 'test', 'fixtures', 'gpu-checks.js');
const NAMES = {
  key: 'device key is the UUID nvidia-smi prints',
  memory: 'total and used memory within 1 % of nvidia-smi',
  external: 'a CUDA llama-server started outside GPU Share is unmanaged external',
  launchedServer: 'a CUDA llama-server started by `gpu-share launch` is managed',
  launchedHolder: 'a CUDA process started by `gpu-share launch` (a command engine taking 4 GiB) is managed',
  capacity: 'plan: REJECT_CAPACITY while a foreign process holds all but 2 GiB, ADMIT once it lets go',
};

/** The fake GPU's key, its own per run: the checks' engines join this device's registry. */
const KEY = fakeUuid(0x4200_0000 + process.pid);
let dir = '';
let server = '';
let env: NodeJS.ProcessEnv = {};
/** The same GPU with 20 GB in use before anything runs, for nvidia-smi to disagree about. */
let busyState = '';

beforeAll(() => {
  if (process.platform !== 'linux') return;
  dir = mkdtempSync(join(tmpdir(), 'gpushare-gpu-rehearsal-'));
  const gpu = buildFakeGpu(join(dir, 'gpu'));
  const state = join(dir, 'state.json');
  // An H200 as nvidia-smi showed it: 143771 MiB, 645 MB used by the driver with nothing running.
  writeFakeNvml(state, {
    cudaDir: join(dir, 'held'),
    devices: [{ uuid: KEY, name: 'NVIDIA H200 (fake)', total: 143771 * MiB, used: 645_000_000, util: 0, temp: 31, powerMw: 76_000, processes: [] }],
  });
  busyState = join(dir, 'busy.json');
  writeFakeNvml(busyState, {
    cudaDir: join(dir, 'held'),
    devices: [{ uuid: KEY, name: 'NVIDIA H200 (fake)', total: 143771 * MiB, used: 20_000_000_000, processes: [] }],
  });
  server = join(dir, 'llama-server');
  writeFileSync(server, `#!/bin/sh\nexec '${process.execPath}' '${FAKE_LLAMA_SERVER}' --hold-model-on-gpu --load-ms 300 "$@"\n`);
  chmodSync(server, 0o755);
  const emptyCache = join(dir, 'cache');
  mkdirSync(emptyCache);
  const inherited = { ...process.env };
  for (const name of ['GPU_SHARE_NVML_LIB', 'GPU_SHARE_SIM', 'LLAMA_SERVER', 'CUDA_VISIBLE_DEVICES', 'FAKE_CUDA_DISCARD']) delete inherited[name];
  env = {
    ...inherited,
    PATH: `${gpu.binDir}:${process.env['PATH'] ?? ''}`,
    LD_LIBRARY_PATH: gpu.libDir,
    FAKE_NVML_JSON: state,
    // nvidia-smi leaves out what the driver reserves (645 MB of used memory on the H200: 0.43 % of it).
    FAKE_NVIDIA_SMI_RESERVED_MIB: '615',
    // No CUDA llama-server build is found: the checks take the holder, the benchmark stops at once.
    GPU_SHARE_CACHE: emptyCache,
  };
});

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
  removeSegment(KEY);
});

interface Run {
  status: number | null;
  output: string;
  checks: GpuCheck[];
}

function runChecks(args: string[], out: string, extraEnv: NodeJS.ProcessEnv = {}): Run {
  const result = spawnSync(process.execPath, [CHECKS, ...args, '--out', out], { env: { ...env, ...extraEnv }, encoding: 'utf8', timeout: 280_000 });
  const output = `${result.stdout}${result.stderr}`;
  let checks: GpuCheck[] = [];
  try {
    checks = (JSON.parse(readFileSync(join(out, 'nvml-checks.json'), 'utf8')) as { checks: GpuCheck[] }).checks;
  } catch {
    // no file: the assertions below say so, with the output
  }
  return { status: result.status, output, checks };
}

const verdicts = (checks: readonly GpuCheck[]): Record<string, boolean | null> => Object.fromEntries(checks.map((c) => [c.name, c.ok]));

describe.skipIf(process.platform !== 'linux')('the GPU checks, rehearsed on a fake GPU', () => {
  it('the fake GPU is what the checks see: nvidia-smi lists it, a holder takes memory and lets it go', () => {
    const list = spawnSync('nvidia-smi', ['-L'], { env, encoding: 'utf8' });
    expect(list.stdout).toMatch(/^GPU 0: NVIDIA H200 \(fake\) \(UUID: GPU-/);
    const used = (): number => Number(spawnSync('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits'], { env, encoding: 'utf8' }).stdout.trim());
    expect(used()).toBe(0);
    const holder = join(dir, 'gpu_hold');
    copyFileSync(join(ROOT, 'test', 'fixtures', 'gpu-hold', 'gpu_hold.c'), join(dir, 'gpu_hold.c'));
    expect(spawnSync(process.env['CC'] ?? 'cc', ['-O2', '-o', holder, join(dir, 'gpu_hold.c'), '-ldl']).status).toBe(0);
    // Holds all but 140000 MiB until its stdin closes (here: at once, after it printed what it holds).
    const held = spawnSync(holder, ['140000'], { env, encoding: 'utf8', input: '', timeout: 10_000 });
    expect(held.status, held.stderr).toBe(0);
    const figures = JSON.parse(held.stdout) as { held: number; free: number; total: number };
    expect(figures.total).toBe(143771 * MiB);
    expect(figures.free).toBe(140000 * MiB);
    expect(figures.held + figures.free + 645_000_000).toBe(figures.total);
    expect(used()).toBe(0);
  });

  it('every check passes, the CUDA llama-server ones with the stand-in server', () => {
    const run = runChecks(['--server', server], join(dir, 'out-server'));
    expect(run.status, run.output).toBe(0);
    expect(verdicts(run.checks), run.output).toEqual({ [NAMES.key]: true, [NAMES.memory]: true, [NAMES.external]: true, [NAMES.launchedServer]: true, [NAMES.capacity]: true });
  }, 300_000);

  it('scripts/gpu-check.sh check runs the same checks (no llama-server build: the holder as the launched engine)', () => {
    const out = join(dir, 'out-script');
    const result = spawnSync('bash', [join(ROOT, 'scripts', 'gpu-check.sh'), 'check', out], { env, encoding: 'utf8', timeout: 300_000 });
    const output = `${result.stdout}${result.stderr}`;
    const summary = readFileSync(join(out, 'summary.txt'), 'utf8');
    expect(summary, output).toMatch(/^gpu-check: NVML checks: exit 0 after \d+ s/m);
    const checks = (JSON.parse(readFileSync(join(out, 'nvml-checks.json'), 'utf8')) as { checks: GpuCheck[] }).checks;
    expect(verdicts(checks), output).toEqual({ [NAMES.key]: true, [NAMES.memory]: true, [NAMES.external]: null, [NAMES.launchedHolder]: true, [NAMES.capacity]: true });
    // The benchmark finds no CUDA llama-server build and says so (exit 2): the script's exit is 1.
    expect(summary).toMatch(/^gpu-check: bench:pacing --gpu: exit 2 /m);
    expect(readFileSync(join(out, 'bench-gpu.log'), 'utf8')).toContain('bench:pacing --gpu: no CUDA llama-server');
    expect(result.status).toBe(1);
  }, 300_000);

  it('scripts/gpu-check.sh check stops with one line when the copy it runs from lacks the runtime dependencies', () => {
    const bare = join(dir, 'bare');
    mkdirSync(join(bare, 'scripts'), { recursive: true });
    mkdirSync(join(bare, 'dist', 'test', 'bench'), { recursive: true });
    copyFileSync(join(ROOT, 'scripts', 'gpu-check.sh'), join(bare, 'scripts', 'gpu-check.sh'));
    copyFileSync(join(ROOT, 'package.json'), join(bare, 'package.json'));
    writeFileSync(join(bare, 'dist', 'test', 'bench', 'pacing-bench.js'), '');
    const result = spawnSync('bash', [join(bare, 'scripts', 'gpu-check.sh'), 'check', join(dir, 'out-bare')], { env, encoding: 'utf8', timeout: 30_000 });
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    // Every runtime dependency that does not resolve from the copy is named (which ones resolve
    // from folders above it depends on the machine).
    expect(result.stderr).toMatch(/^gpu-check: the project's dependencies are not installed: .*\bcommander\b.*\bkoffi\b.*\bnode-llama-cpp\b/);
  });

  it('the checks fail when NVML never sees the memory and when nvidia-smi disagrees on used memory', () => {
    const run = runChecks(['--server', server], join(dir, 'out-broken'), { FAKE_NVML_JSON: busyState, FAKE_CUDA_DISCARD: '1', FAKE_NVIDIA_SMI_RESERVED_MIB: String(Math.round(143771 * 0.02)) });
    expect(run.status, run.output).toBe(1);
    expect(verdicts(run.checks), run.output).toEqual({ [NAMES.key]: true, [NAMES.memory]: false, [NAMES.external]: false, [NAMES.launchedServer]: false, [NAMES.capacity]: false });
  }, 300_000);
});
