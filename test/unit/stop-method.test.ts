import { describe, expect, it } from 'vitest';
import type { CheckpointCall, CudaCheckpoint } from '../../native/cuda-checkpoint.js';
import { cudaLockControl } from '../../electron/core/pacer/stop-method.js';

function recorder(lockCodes: number[]): { cuda: CudaCheckpoint; calls: string[]; base: { suspend(pid: number): boolean; resume(pid: number): boolean } } {
  const calls: string[] = [];
  const answer = (code: number, us: number): CheckpointCall => ({ code, us });
  return {
    calls,
    cuda: {
      lock: (pid, timeoutMs) => (calls.push(`lock ${pid} ${timeoutMs}`), answer(lockCodes.shift() ?? 0, 1_500)),
      unlock: (pid) => (calls.push(`unlock ${pid}`), answer(0, 300)),
    },
    base: { suspend: (pid) => (calls.push(`SIGSTOP ${pid}`), true), resume: (pid) => (calls.push(`SIGCONT ${pid}`), true) },
  };
}

describe('the CUDA lock as the gate\'s stop', () => {
  it('locks instead of SIGSTOP and unlocks at the next window, timing both', () => {
    const { cuda, calls, base } = recorder([0]);
    const lines: string[] = [];
    const control = cudaLockControl(base, cuda, (l) => lines.push(l), 100);
    expect(control.suspend(7)).toBe(true);
    expect(control.resume(7)).toBe(true);
    expect(calls).toEqual(['lock 7 100', 'unlock 7', 'SIGCONT 7']);
    expect(control.figures).toEqual({ locks: 1, lockFailures: 0, lockUs: [1_500], unlockUs: [300] });
    expect(lines).toEqual([]);
  });

  it('falls back to SIGSTOP/SIGCONT where the lock fails, and says so once', () => {
    const { cuda, calls, base } = recorder([801, 801, 0]);
    const lines: string[] = [];
    const control = cudaLockControl(base, cuda, (l) => lines.push(l), 100);
    control.suspend(7);
    control.resume(7);
    control.suspend(7);
    control.resume(7);
    control.suspend(7);
    control.resume(7);
    expect(calls).toEqual(['lock 7 100', 'SIGSTOP 7', 'SIGCONT 7', 'lock 7 100', 'SIGSTOP 7', 'SIGCONT 7', 'lock 7 100', 'unlock 7', 'SIGCONT 7']);
    expect(lines).toEqual(['gpu-share: cuCheckpointProcessLock(7) failed (CUDA error 801); stopping by SIGSTOP where the lock fails']);
    expect(control.figures.lockFailures).toBe(2);
  });
});
