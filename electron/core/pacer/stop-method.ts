/**
 * How the process gate stops an engine outside its window. `sigstop` (the default) stops its whole
 * tree by signal: its CPU threads stop at once, but kernels it already queued on the GPU run on
 * into the next peer's window. `cuda-lock` (`gpu-share run --stop-method cuda-lock`, NVIDIA driver
 * ≥ 550) locks the tree's root with cuCheckpointProcessLock instead, which blocks its further CUDA
 * calls and returns once its submitted work is done, and unlocks it at its next window; a lock that
 * fails (no CUDA in that process, an old driver, the timeout) falls back to SIGSTOP for that stop,
 * said once. Not covered: a supervisor killed outright leaves a locked engine locked (the
 * watchdog resumes stopped trees with SIGCONT; it does not unlock).
 */
import type { CudaCheckpoint } from '../../../native/cuda-checkpoint.js';
import type { ProcessControl } from '../../../native/process-control.js';

export const STOP_METHODS = ['sigstop', 'cuda-lock'] as const;
export type StopMethod = (typeof STOP_METHODS)[number];
/** A lock waits at most this long for the engine's submitted work (then the engine is left
 *  running and SIGSTOP stops it). */
export const CUDA_LOCK_TIMEOUT_MS = 100;

export interface StopFigures {
  locks: number;
  lockFailures: number;
  /** µs of the last FIGURES_KEPT successful locks (the drain) and unlocks. */
  lockUs: number[];
  unlockUs: number[];
}

/** How many lock and unlock durations are kept (a paced engine is locked several times a second
 *  for as long as it runs). */
const FIGURES_KEPT = 1024;

const keep = (list: number[], us: number): void => {
  list.push(us);
  if (list.length > FIGURES_KEPT) list.shift();
};

/** suspend/resume through the CUDA lock, SIGSTOP/SIGCONT (`base`) where the lock fails. */
export function cudaLockControl(base: Pick<ProcessControl, 'suspend' | 'resume'>, cuda: CudaCheckpoint, say: (line: string) => void, timeoutMs = CUDA_LOCK_TIMEOUT_MS): Pick<ProcessControl, 'suspend' | 'resume'> & { figures: StopFigures } {
  const locked = new Set<number>();
  const figures: StopFigures = { locks: 0, lockFailures: 0, lockUs: [], unlockUs: [] };
  let warned = false;
  return {
    figures,
    suspend(pid) {
      const result = cuda.lock(pid, timeoutMs);
      if (result.code === 0) {
        locked.add(pid);
        figures.locks += 1;
        keep(figures.lockUs, result.us);
        return true;
      }
      figures.lockFailures += 1;
      if (!warned) {
        warned = true;
        say(`gpu-share: cuCheckpointProcessLock(${pid}) failed (CUDA error ${result.code}); stopping by SIGSTOP where the lock fails`);
      }
      return base.suspend(pid);
    },
    resume(pid) {
      if (!locked.has(pid)) return base.resume(pid);
      locked.delete(pid);
      const result = cuda.unlock(pid);
      keep(figures.unlockUs, result.us);
      if (result.code !== 0) say(`gpu-share: cuCheckpointProcessUnlock(${pid}) failed (CUDA error ${result.code})`);
      // A SIGCONT too, harmless when nothing is stopped: whatever stopped it, it runs now.
      base.resume(pid);
      return true;
    },
  };
}
