/** The calling thread's CPUs: masks and lists, keeping them across a load that narrows them (what
 *  libgomp does to the thread that loads it under OMP_PROC_BIND), and the real libc calls. */
import { describe, expect, it } from 'vitest';
import { cpuList, cpusOf, keepingThreadCpus, loadThreadCpus, maskOf, type ThreadCpus } from '../../native/thread-affinity.js';

/** A thread's CPUs kept in memory, with every set recorded. */
function fakeCpus(initial: number[], options: { failGet?: boolean } = {}): ThreadCpus & { sets: number[][]; current: number[] } {
  const state = {
    current: initial,
    sets: [] as number[][],
    get: () => {
      if (options.failGet === true) throw new Error('sched_getaffinity failed (errno 22)');
      return [...state.current];
    },
    set: (cpus: readonly number[]) => {
      state.sets.push([...cpus]);
      state.current = [...cpus];
    },
  };
  return state;
}

describe('thread affinity', () => {
  it('turns CPU lists into masks and back, and writes them as the kernel does', () => {
    expect(cpusOf(maskOf([0, 1, 2, 3, 9, 64, 1023]))).toEqual([0, 1, 2, 3, 9, 64, 1023]);
    expect(maskOf([0, 9]).subarray(0, 2)).toEqual(Buffer.from([0x01, 0x02]));
    expect(cpuList([3, 0, 1, 2, 6])).toBe('0-3,6');
    expect(cpuList([5])).toBe('5');
    expect(cpuList([0, 2, 4, 5])).toBe('0,2,4-5');
    expect(() => maskOf([1024])).toThrow(/CPU 1024/);
    expect(() => maskOf([-1])).toThrow(/CPU -1/);
  });

  it('gives the thread back the CPUs a load narrowed, and leaves it alone when the load did not', async () => {
    const cpus = fakeCpus([0, 1, 2, 3]);
    const narrowed = await keepingThreadCpus(cpus, async () => {
      cpus.current = [0];
      return 'loaded';
    });
    expect(narrowed).toEqual({ value: 'loaded', cpus: { kind: 'restored', narrowed: [0], restored: [0, 1, 2, 3] } });
    expect(cpus.current).toEqual([0, 1, 2, 3]);
    const untouched = fakeCpus([0, 1]);
    expect(await keepingThreadCpus(untouched, async () => 1)).toEqual({ value: 1, cpus: { kind: 'unchanged' } });
    expect(untouched.sets).toEqual([]);
  });

  it('never fails the load when the CPUs cannot be read: it says why', async () => {
    expect(await keepingThreadCpus(fakeCpus([0], { failGet: true }), async () => 'loaded')).toEqual({ value: 'loaded', cpus: { kind: 'unknown', why: 'sched_getaffinity failed (errno 22)' } });
    expect(await keepingThreadCpus({ why: 'thread affinity is only handled on Linux (this is win32)' }, async () => 'loaded')).toEqual({ value: 'loaded', cpus: { kind: 'unknown', why: 'thread affinity is only handled on Linux (this is win32)' } });
  });

  it.skipIf(process.platform !== 'linux')("reads and sets this thread's CPUs through libc", () => {
    const cpus = loadThreadCpus();
    if (!('get' in cpus)) throw new Error(cpus.why);
    const before = cpus.get();
    expect(before.length).toBeGreaterThan(0);
    const first = before[0] ?? 0;
    try {
      cpus.set([first]);
      expect(cpus.get()).toEqual([first]);
    } finally {
      cpus.set(before);
    }
    expect(cpus.get()).toEqual(before);
    // A CPU this machine does not have (the highest a mask holds) is refused with the OS's reason.
    expect(() => cpus.set([1023])).toThrow(/sched_setaffinity\(1023\) failed \(errno 22\)/);
    expect(cpus.get()).toEqual(before);
  });
});
