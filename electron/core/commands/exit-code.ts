import { constants as osConstants } from 'node:os';

/** The shell's convention: 128 + signal number for a process ended by a signal. Pure. */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const number = signal === null ? undefined : osConstants.signals[signal];
  return number === undefined ? 1 : 128 + number;
}
