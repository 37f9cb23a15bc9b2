/**
 * The supervisor's side of the watchdog (native/watchdog.c): a small process that, as soon as our
 * end of its stdin pipe closes — which the kernel does when we die, SIGKILL included — resumes the
 * process trees we told it about, sends them SIGTERM and, after the grace, SIGKILL. It runs in its
 * own session so a Ctrl-C to our terminal, or a SIGKILL to our process group, does not reach it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { findWatchdog } from '../../../native/process-control.js';

export interface Watchdog {
  readonly pid: number;
  /** A command's process group (the command leads it): ended if we die. */
  watchGroup(pgid: number): void;
  /** A member of a tree outside its group (it left with setsid), with its start time in clock
   *  ticks (0 when unknown) so that a re-used pid is never signalled. */
  watchProcess(pid: number, startTicks: number): void;
  unwatchGroup(pgid: number): void;
  unwatchProcess(pid: number): void;
  /** Close the pipe: the watchdog ends what it still watches (nothing, after an orderly stop:
   *  unwatch first) and exits. */
  close(): void;
}

export function startWatchdog(graceMs: number, path: string = findWatchdog()): Watchdog {
  const child: ChildProcess = spawn(path, ['--grace-ms', String(Math.round(graceMs))], { stdio: ['pipe', 'ignore', 'ignore'], detached: true, windowsHide: true });
  const stdin = child.stdin;
  if (stdin === null || child.pid === undefined) throw new Error(`could not start the pacing watchdog ${path}`);
  // Neither the process nor its pipe may keep us alive; the pipe stays open until we exit.
  child.unref();
  (stdin as unknown as { unref?: () => void }).unref?.();
  stdin.on('error', () => undefined); // the watchdog died: writes fail quietly, pacing goes on
  const send = (line: string): void => {
    if (!stdin.destroyed) stdin.write(`${line}\n`);
  };
  return {
    pid: child.pid,
    watchGroup: (pgid) => send(`+g${pgid}`),
    watchProcess: (pid, startTicks) => send(`+${pid} ${startTicks}`),
    unwatchGroup: (pgid) => send(`-g${pgid}`),
    unwatchProcess: (pid) => send(`-${pid}`),
    close: () => stdin.end(),
  };
}
