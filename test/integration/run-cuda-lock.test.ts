/**
 * `gpu-share run --stop-method cuda-lock` on the CUDA driver stand-in (fake-nvml/build.ts
 * buildFakeGpu: libcuda.so.1 with cuCheckpointProcessLock/Unlock, which record each call and block
 * nothing): two engines at 2:1 are locked outside their windows and unlocked at their starts, each
 * lock with its timeout; where the driver refuses the lock, or there is no driver, SIGSTOP stops them
 * and one line says so. On a GPU the same path runs against the real driver (pacer/NOTES.md).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFakeGpu, fakeUuid, writeFakeNvml } from '../fixtures/fake-nvml/build.js';
import { CLI } from '../fixtures/procs.js';
import { removeSegment, testKey } from '../fixtures/segments.js';

const MiB = 1024 * 1024;
let dir = '';
let env: NodeJS.ProcessEnv = {};
const keys: string[] = [];

beforeAll(() => {
  if (process.platform !== 'linux') return;
  dir = mkdtempSync(join(tmpdir(), 'gpushare-cuda-lock-'));
  const gpu = buildFakeGpu(join(dir, 'gpu'));
  const state = join(dir, 'state.json');
  writeFakeNvml(state, { cudaDir: join(dir, 'held'), devices: [{ uuid: fakeUuid(0x4400_0000 + process.pid), name: 'NVIDIA H200 (fake)', total: 143771 * MiB, used: 0, processes: [] }] });
  const inherited = { ...process.env };
  for (const name of ['GPU_SHARE_NVML_LIB', 'CUDA_VISIBLE_DEVICES', 'FAKE_CUDA_CHECKPOINT', 'FAKE_CUDA_CHECKPOINT_LOG', 'GPU_SHARE_PACER_TRACE']) delete inherited[name];
  env = { ...inherited, LD_LIBRARY_PATH: gpu.libDir, FAKE_NVML_JSON: state };
});

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
  for (const key of keys) removeSegment(key);
});

/** Two busy commands at 2:1 under `run --stop-method cuda-lock`, ~2.5 s: each run's stderr. */
async function pair(extraEnv: NodeJS.ProcessEnv): Promise<string[]> {
  const key = testKey('cudalock');
  keys.push(key);
  const busy = 'const end = Date.now() + 2500; while (Date.now() < end);';
  const runs = [2, 1].map((weight) => spawn(process.execPath, [CLI, 'run', '--gpu-key', key, '--weight', String(weight), '--stop-method', 'cuda-lock', '--', process.execPath, '-e', busy], { env: { ...env, ...extraEnv }, stdio: ['ignore', 'ignore', 'pipe'] }));
  return Promise.all(
    runs.map(
      (child) =>
        new Promise<string>((done) => {
          let stderr = '';
          child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
          child.once('exit', (code) => done(`${stderr}exit ${code}`));
        }),
    ),
  );
}

describe.skipIf(process.platform !== 'linux')('gpu-share run --stop-method cuda-lock', () => {
  it('locks each engine outside its window and unlocks it at its start', async () => {
    const log = join(dir, 'checkpoint.log');
    const outputs = await pair({ FAKE_CUDA_CHECKPOINT_LOG: log });
    for (const output of outputs) expect(output).toMatch(/exit 0$/);
    expect(outputs.join('')).not.toContain('SIGSTOP');
    const lines = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
    const pids = new Set(lines.map((l) => l.split(' ')[1]));
    expect(pids.size, lines.join('\n')).toBe(2);
    for (const pid of pids) {
      const own = lines.filter((l) => l.split(' ')[1] === pid);
      expect(own.filter((l) => l === `lock ${pid} 100`).length, own.join('\n')).toBeGreaterThanOrEqual(2);
      // Locks and unlocks alternate, a lock first.
      own.forEach((l, i) => expect(l.startsWith(i % 2 === 0 ? 'lock ' : 'unlock ')).toBe(true));
    }
  }, 30_000);

  it('stops by SIGSTOP, with one line, where the driver refuses the lock or there is none', async () => {
    const refused = await pair({ FAKE_CUDA_CHECKPOINT: 'unsupported' });
    expect(refused.join('\n')).toMatch(/gpu-share: cuCheckpointProcessLock\(\d+\) failed \(CUDA error 801\); stopping by SIGSTOP where the lock fails/);
    for (const output of refused) expect(output.match(/cuCheckpointProcessLock/g)?.length ?? 0).toBeLessThanOrEqual(1);
    const none = await pair({ LD_LIBRARY_PATH: join(dir, 'nowhere') });
    for (const output of none) {
      // No driver here; where the machine has a real one, it refuses to lock a process without CUDA.
      expect(output).toMatch(/gpu-share: (--stop-method cuda-lock: (libcuda\.so\.1 could not be loaded|cuInit failed|libcuda\.so\.1 has no).*; stopping by SIGSTOP|cuCheckpointProcessLock\(\d+\) failed)/);
      expect(output).toMatch(/exit 0$/);
    }
  }, 60_000);
});
