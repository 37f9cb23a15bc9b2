/**
 * A process's CPU time by thread, from /proc: its main thread (for the built-in engine host, the
 * JavaScript thread: the gate, the token's way to the client) and all its other threads together
 * (the decode threads: the libuv worker that leads the OpenMP team, the team's other threads; V8's
 * helpers, next to nothing). Through `serve` at 2:1 the decode threads split 1.955–2.048 : 1 and
 * the JavaScript threads 1.65–1.93 (pacer NOTES.md, "Which threads take the time"): the decode
 * threads' split is the nearest this machine has to a GPU's time split.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface ThreadCpuNs {
  /** The thread whose id is the process's. */
  mainNs: number;
  /** Every other thread alive when read (a thread that ended took its time with it). */
  otherNs: number;
}

/** The run time (ns, the first field of each thread's `schedstat`) of `pid`'s threads; null when
 *  the process is gone or its threads cannot be read. A thread that ends while read is skipped. */
export function threadCpuNs(pid: number, procRoot = '/proc'): ThreadCpuNs | null {
  let tids: string[];
  try {
    tids = readdirSync(`${procRoot}/${pid}/task`);
  } catch {
    return null;
  }
  let mainNs: number | null = null;
  let otherNs = 0;
  for (const tid of tids) {
    let text: string;
    try {
      text = readFileSync(`${procRoot}/${pid}/task/${tid}/schedstat`, 'utf8');
    } catch {
      continue;
    }
    const runNs = Number(text.trim().split(/\s+/)[0]);
    if (!Number.isFinite(runNs) || runNs < 0) continue;
    if (tid === String(pid)) mainNs = runNs;
    else otherNs += runNs;
  }
  return mainNs === null ? null : { mainNs, otherNs };
}

/** One process's other threads' time over several intervals, each a reading at its start and at
 *  its end: null when any reading is missing. Pure. */
export function otherThreadsSpentNs(intervals: readonly (readonly [ThreadCpuNs | null | undefined, ThreadCpuNs | null | undefined])[]): number | null {
  let spent = 0;
  for (const [from, to] of intervals) {
    if (from === undefined || from === null || to === undefined || to === null) return null;
    spent += to.otherNs - from.otherNs;
  }
  return spent;
}
