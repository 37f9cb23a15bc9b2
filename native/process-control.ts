/**
 * Process control for the process gate: suspend and resume a paced command's whole process tree,
 * and read the tree's CPU time (the default activity source). One implementation per platform,
 * chosen once at start.
 *
 * What "the tree" is, per platform:
 * - Linux: the process group the command leads (it is started as a group leader), plus every
 *   descendant found by ancestry in procfs, including one that left the group with setsid. CPU time
 *   is summed over all of them.
 * - macOS and other POSIX systems: the process group. A descendant that leaves the group (setsid)
 *   is not paced, and CPU time is not available (activity then counts as "unknown": paced).
 * - Windows: a job object that the command is put in right after it starts (its children join it
 *   unless they break away); every member is suspended with NtSuspendProcess, CPU time is the job's
 *   accounting. A child the command started before it was put in the job is not held.
 */
import { existsSync } from 'node:fs';
import { nativeCandidates, nativeFileNames } from './paths.js';

export interface ProcessControl {
  /** Take charge of the tree of a command we just started (its root): on Windows put it in a job
   *  object; on POSIX it already leads its own process group. */
  hold(rootPid: number): void;
  /** Stop every process of the tree (SIGSTOP; NtSuspendProcess). false when it is gone. */
  suspend(rootPid: number): boolean;
  /** Let every process of the tree run again (SIGCONT; NtResumeProcess). false when it is gone. */
  resume(rootPid: number): boolean;
  /** Cumulative CPU time of the tree's processes, µs; null when it cannot be known (gone, no
   *  access, or no way to read it on this platform) — never a guess. It may fall when a member
   *  exits (its time leaves with it). */
  cpuTimeUs(rootPid: number): number | null;
  /** Members of the tree outside the root's process group, as last found (Linux: by ancestry; []
   *  elsewhere). The watchdog is told about them. */
  outsideGroup(rootPid: number): { pid: number; startTicks: number }[];
  /** Send `signal` to every process of the tree, as a terminal does to its foreground group (on
   *  Windows, where there are no signals, every one of them terminates the job's members, as Node's
   *  `kill` terminates a process). false when none is left. */
  signal(rootPid: number, signal: NodeJS.Signals): boolean;
  /** Is any process of the tree still running (zombies do not count)? */
  alive(rootPid: number): boolean;
  /** Forget the tree (after its root exited and the rest was let go or ended). */
  release(rootPid: number): void;
}

let chosen: ProcessControl | null = null;

export async function loadProcessControl(): Promise<ProcessControl> {
  if (chosen) return chosen;
  chosen = process.platform === 'win32' ? (await import('./process-win32.js')).win32ProcessControl() : (await import('./process-posix.js')).posixProcessControl();
  return chosen;
}

/** The watchdog executable beside the registry helper (see native/watchdog.c). */
export function watchdogCandidates(): string[] {
  return nativeCandidates(nativeFileNames().watchdog);
}

export function findWatchdog(): string {
  const candidates = watchdogCandidates();
  const found = candidates.find((path) => existsSync(path));
  if (found === undefined) throw new Error(`the pacing watchdog is missing; tried:\n  ${candidates.join('\n  ')}\nbuild it with: npm run build:native`);
  return found;
}
