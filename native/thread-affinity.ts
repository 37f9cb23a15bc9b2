/**
 * The CPUs the calling thread may run on: glibc's sched_getaffinity / sched_setaffinity through
 * koffi (pid 0 is the calling thread). Linux only; elsewhere, or where libc cannot be loaded, the
 * loader says why instead.
 *
 * The built-in engine needs it for one reason: GCC's OpenMP runtime (libgomp), with OMP_PROC_BIND
 * set, binds the thread that loads it to the first place as it loads, and every thread created
 * after that inherits the binding. The engine host loads llama.cpp on its JavaScript thread, which
 * must keep every CPU: only the decode threads are to be bound (builtinHostEnv).
 */
import koffi from 'koffi';
import { errorText } from '../electron/core/error-text.js';

export interface ThreadCpus {
  /** The calling thread's CPUs, ascending. */
  get(): number[];
  /** Confines the calling thread to `cpus`; throws with the OS's reason. */
  set(cpus: readonly number[]): void;
}

/** Masks of up to this many CPUs (glibc's cpu_set_t is 1,024 bits). */
const MASK_BYTES = 128;

let loaded: ThreadCpus | { why: string } | null = null;

export function loadThreadCpus(): ThreadCpus | { why: string } {
  loaded ??= bind();
  return loaded;
}

function bind(): ThreadCpus | { why: string } {
  if (process.platform !== 'linux') return { why: `thread affinity is only handled on Linux (this is ${process.platform})` };
  let getAffinity: (pid: number, size: number, mask: Buffer) => number;
  let setAffinity: (pid: number, size: number, mask: Buffer) => number;
  try {
    const libc = koffi.load('libc.so.6');
    getAffinity = libc.func('int sched_getaffinity(int pid, size_t size, uint8_t *mask)') as unknown as typeof getAffinity;
    setAffinity = libc.func('int sched_setaffinity(int pid, size_t size, const uint8_t *mask)') as unknown as typeof setAffinity;
  } catch (error) {
    return { why: `libc.so.6 could not be loaded (${errorText(error)})` };
  }
  return {
    get: () => {
      const mask = Buffer.alloc(MASK_BYTES);
      if (getAffinity(0, MASK_BYTES, mask) !== 0) throw new Error(`sched_getaffinity failed (errno ${koffi.errno()})`);
      return cpusOf(mask);
    },
    set: (cpus) => {
      if (setAffinity(0, MASK_BYTES, maskOf(cpus)) !== 0) throw new Error(`sched_setaffinity(${cpuList(cpus)}) failed (errno ${koffi.errno()})`);
    },
  };
}

/** The CPUs set in a cpu_set_t. Pure. */
export function cpusOf(mask: Uint8Array): number[] {
  const cpus: number[] = [];
  mask.forEach((byte, i) => {
    for (let bit = 0; bit < 8; bit++) if ((byte >> bit) & 1) cpus.push(i * 8 + bit);
  });
  return cpus;
}

/** A cpu_set_t of `cpus`; a CPU past the mask is an error. Pure. */
export function maskOf(cpus: readonly number[]): Buffer {
  const mask = Buffer.alloc(MASK_BYTES);
  for (const cpu of cpus) {
    if (!Number.isInteger(cpu) || cpu < 0 || cpu >= MASK_BYTES * 8) throw new RangeError(`CPU ${cpu} is not one a mask of ${MASK_BYTES * 8} CPUs holds`);
    mask[cpu >> 3] = (mask[cpu >> 3] ?? 0) | (1 << (cpu & 7));
  }
  return mask;
}

/** "0-3,6" for [0, 1, 2, 3, 6]: the kernel's list format. Pure. */
export function cpuList(cpus: readonly number[]): string {
  const sorted = [...cpus].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === (sorted[j] ?? 0) + 1) j++;
    parts.push(j === i ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}

/** What became of the calling thread's CPUs while something loaded. */
export type CpusAfterLoad =
  | { kind: 'unchanged' }
  /** The load narrowed them to `narrowed`; they are `restored` again. */
  | { kind: 'restored'; narrowed: number[]; restored: number[] }
  /** No way to tell or to restore (not Linux, no libc, the call failed): why. */
  | { kind: 'unknown'; why: string };

/** Runs `load` on the calling thread, then gives the thread back the CPUs it had before if `load`
 *  narrowed them. A failure to read or set them never fails the load: it is reported instead. */
export async function keepingThreadCpus<T>(cpus: ThreadCpus | { why: string }, load: () => Promise<T>): Promise<{ value: T; cpus: CpusAfterLoad }> {
  if (!('get' in cpus)) return { value: await load(), cpus: { kind: 'unknown', why: cpus.why } };
  let before: number[];
  try {
    before = cpus.get();
  } catch (error) {
    return { value: await load(), cpus: { kind: 'unknown', why: errorText(error) } };
  }
  const value = await load();
  try {
    const after = cpus.get();
    if (cpuList(after) === cpuList(before)) return { value, cpus: { kind: 'unchanged' } };
    cpus.set(before);
    return { value, cpus: { kind: 'restored', narrowed: after, restored: before } };
  } catch (error) {
    return { value, cpus: { kind: 'unknown', why: errorText(error) } };
  }
}

