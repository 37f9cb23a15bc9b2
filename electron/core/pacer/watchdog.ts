/**
 * The supervisor's side of the watchdog (native/watchdog.c): a small process that resumes every
 * engine we told it about as soon as our end of its stdin pipe closes — which the kernel does when
 * we die, SIGKILL included. It runs in its own session so a Ctrl-C to our terminal does not reach
 * it first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { findWatchdog } from '../../../native/process-control.js';
import type { WatchdogLink } from './process-gate.js';

export interface Watchdog extends WatchdogLink {
  readonly pid: number;
  /** Close the pipe: the watchdog resumes what it still watches and exits. */
  close(): void;
}

export function startWatchdog(path: string = findWatchdog()): Watchdog {
  const child: ChildProcess = spawn(path, [], { stdio: ['pipe', 'ignore', 'ignore'], detached: true, windowsHide: true });
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
    watch: (pid) => send(`+${pid}`),
    unwatch: (pid) => send(`-${pid}`),
    close: () => stdin.end(),
  };
}
