/**
 * The CUDA driver's process lock (driver ≥ 550, what NVIDIA's cuda-checkpoint tool uses):
 * cuCheckpointProcessLock(pid, {timeoutMs}) blocks every further CUDA API call of another process
 * and returns once the work it already submitted has completed (or, at the timeout, leaves it
 * running); cuCheckpointProcessUnlock(pid) lets it go on. As a pacer's stop, it drains what a
 * SIGSTOP leaves queued on the device. Linux only (libcuda.so.1); a driver without the symbols, or
 * no driver, is reported with why, never guessed around.
 */
import koffi from 'koffi';

export interface CheckpointCall {
  /** CUresult: 0 is success. */
  code: number;
  /** How long the call took, µs (lock waits for submitted work). */
  us: number;
}

export interface CudaCheckpoint {
  lock(pid: number, timeoutMs: number): CheckpointCall;
  unlock(pid: number): CheckpointCall;
}

/** Loads libcuda.so.1 (the dynamic loader's search: LD_LIBRARY_PATH, then the system's), calls
 *  cuInit(0) (no context, no device memory) and binds the two calls; `{ why }` when it cannot. */
export function loadCudaCheckpoint(library = 'libcuda.so.1'): CudaCheckpoint | { why: string } {
  if (process.platform !== 'linux') return { why: `the CUDA process lock is Linux-only (this is ${process.platform})` };
  let lib: ReturnType<typeof koffi.load>;
  try {
    lib = koffi.load(library);
  } catch (error) {
    return { why: `${library} could not be loaded (${error instanceof Error ? error.message : String(error)})` };
  }
  const symbol = <T>(declaration: string): T | null => {
    try {
      return lib.func(declaration) as unknown as T;
    } catch {
      return null;
    }
  };
  const cuInit = symbol<(flags: number) => number>('int cuInit(unsigned int flags)');
  // The argument structs are 64 bytes each (timeoutMs, reserved0, reserved1[7]; reserved[8]),
  // zeroed but for the timeout.
  const lockFn = symbol<(pid: number, args: Uint8Array) => number>('int cuCheckpointProcessLock(int pid, void *args)');
  const unlockFn = symbol<(pid: number, args: Uint8Array) => number>('int cuCheckpointProcessUnlock(int pid, void *args)');
  if (cuInit === null || lockFn === null || unlockFn === null) {
    lib.unload();
    return { why: `${library} has no cuCheckpointProcessLock/Unlock (the CUDA driver is older than 550)` };
  }
  const initialised = cuInit(0);
  if (initialised !== 0) {
    lib.unload();
    return { why: `cuInit failed (CUDA error ${initialised})` };
  }
  const timed = (call: () => number): CheckpointCall => {
    const started = process.hrtime.bigint();
    const code = call();
    return { code, us: Number((process.hrtime.bigint() - started) / 1000n) };
  };
  return {
    lock: (pid, timeoutMs) => {
      const args = new Uint8Array(64);
      new DataView(args.buffer).setUint32(0, Math.max(0, Math.min(0xffff_ffff, Math.round(timeoutMs))), true);
      return timed(() => lockFn(pid, args));
    },
    unlock: (pid) => timed(() => unlockFn(pid, new Uint8Array(64))),
  };
}
