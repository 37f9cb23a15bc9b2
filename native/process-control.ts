/**
 * Process control for the process gate: suspend and resume an engine, and read its CPU time (the
 * default activity source). One implementation per platform, chosen once at start.
 */
import { existsSync } from 'node:fs';
import { nativeCandidates, nativeFileNames } from './paths.js';

export interface ProcessControl {
  /** Stop the process (SIGSTOP; NtSuspendProcess). false when it is gone. */
  suspend(pid: number): boolean;
  /** Let it run again (SIGCONT; NtResumeProcess). false when it is gone. */
  resume(pid: number): boolean;
  /** Cumulative CPU time of all its threads, µs; null when it cannot be known (gone, no access,
   *  or no way to read it on this platform) — never a guess. */
  cpuTimeUs(pid: number): number | null;
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
