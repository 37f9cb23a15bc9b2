/** POSIX process control: signals, and CPU time from procfs on Linux. */
import { readFileSync, readdirSync } from 'node:fs';
import type { ProcessControl } from './process-control.js';

const signal = (pid: number, sig: NodeJS.Signals): boolean => {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
};

/** /proc/<pid>/stat, fields after the parenthesised command (which may itself hold spaces). */
function statFields(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

const TICKS_PER_SECOND = 100; // USER_HZ on every Linux ABI Node supports

/** CPU time summed over the threads' schedstat (ns precision); utime+stime (10 ms ticks) when
 *  schedstat is not available. */
function linuxCpuTimeUs(pid: number): number | null {
  try {
    let totalNs = 0;
    let any = false;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const first = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0];
        const ns = Number(first);
        if (Number.isFinite(ns)) {
          totalNs += ns;
          any = true;
        }
      } catch {
        // the thread exited between readdir and read
      }
    }
    if (any && totalNs > 0) return totalNs / 1000;
  } catch {
    // no /proc/<pid>/task: fall through to stat
  }
  const fields = statFields(pid);
  if (fields === null) return null;
  // Fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the command.
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isFinite(ticks) ? (ticks * 1_000_000) / TICKS_PER_SECOND : null;
}

export function posixProcessControl(): ProcessControl {
  const linux = process.platform === 'linux';
  return {
    suspend: (pid) => signal(pid, 'SIGSTOP'),
    resume: (pid) => signal(pid, 'SIGCONT'),
    // macOS has no procfs; its CPU time needs proc_pid_rusage, not wired yet: unknown, not 0.
    cpuTimeUs: (pid) => (linux ? linuxCpuTimeUs(pid) : null),
  };
}
