/**
 * A process's CPU time by thread, from /proc: its main thread (for the built-in engine host, the
 * JavaScript thread: the gate, the token's way to the client) and all its other threads together
 * (the decode threads: the libuv worker that leads the OpenMP team, the team's other threads; V8's
 * helpers, next to nothing). Through `serve` at 2:1 the decode threads split 1.955–2.048 : 1 and
 * the JavaScript threads 1.65–1.93 (pacer NOTES.md, "Which threads take the time"): the decode
 * threads' split is the nearest this machine has to a GPU's time split.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { splitOf } from './pacing-stats.js';

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

/** The other threads' time between two readings of each of two processes, the first's over the
 *  second's (splitOf): null unless all four readings exist and the second's time is positive. Pure. */
export function otherThreadsRatio(from: readonly (ThreadCpuNs | null)[], to: readonly (ThreadCpuNs | null)[]): number | null {
  const spent = (i: number): number | null => {
    const a = from[i];
    const b = to[i];
    return a === undefined || a === null || b === undefined || b === null ? null : b.otherNs - a.otherNs;
  };
  return splitOf(spent(0), spent(1));
}
