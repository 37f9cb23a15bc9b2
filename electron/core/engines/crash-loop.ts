/**
 * When an engine that keeps ending by itself may be started again (pure). Each end by itself (a
 * crash, or an exit the supervisor did not ask for) is counted per profile; the next start waits
 * 1 s, 2 s, 4 s, 8 s … (at most 30 s) after the last one, however many requests ask for it; after
 * 5 within 60 s the profile is held as failed until the user starts it again (the dashboard's
 * Restart or Launch, `gpu-share launch`, or an edit of the profile).
 */
export interface CrashLoopPolicy {
  /** Ends within the window that leave it failed. */
  limit: number;
  windowUs: number;
  firstBackoffMs: number;
  maxBackoffMs: number;
}

export const CRASH_LOOP_POLICY: Readonly<CrashLoopPolicy> = Object.freeze({ limit: 5, windowUs: 60_000_000, firstBackoffMs: 1_000, maxBackoffMs: 30_000 });

/** The ends of one profile's engines by themselves, newest last (monotonic µs). */
export interface CrashRecord {
  atUs: number[];
  /** Its last end, in words (exit code or signal, and its last line of output). */
  last: string;
}

export type CrashHold =
  /** It may start once `retryAtUs` has come. */
  | { kind: 'backoff'; crashes: number; retryAtUs: number; last: string }
  /** It stays down until the user starts it. */
  | { kind: 'failed'; crashes: number; last: string };

/** The ends that still count at `nowUs` (within the window). */
export function recentCrashes(atUs: readonly number[], nowUs: number, policy: CrashLoopPolicy = CRASH_LOOP_POLICY): number[] {
  return atUs.filter((t) => nowUs - t < policy.windowUs);
}

/** The back-off after the n-th end in a row (n ≥ 1). */
export function backoffMs(crashes: number, policy: CrashLoopPolicy = CRASH_LOOP_POLICY): number {
  return Math.min(policy.maxBackoffMs, policy.firstBackoffMs * 2 ** Math.max(0, crashes - 1));
}

/** What holds a profile back at `nowUs`: nothing (null), a back-off, or a failure. Once failed it
 *  stays failed (`failed` is remembered by the caller); the window only decides when it fails. */
export function crashHold(record: CrashRecord | undefined, failed: boolean, nowUs: number, policy: CrashLoopPolicy = CRASH_LOOP_POLICY): CrashHold | null {
  if (record === undefined || record.atUs.length === 0) return null;
  const recent = recentCrashes(record.atUs, nowUs, policy);
  if (failed || recent.length >= policy.limit) return { kind: 'failed', crashes: Math.max(recent.length, policy.limit), last: record.last };
  const lastAt = record.atUs[record.atUs.length - 1] ?? nowUs;
  const retryAtUs = lastAt + backoffMs(Math.max(1, recent.length), policy) * 1000;
  return nowUs < retryAtUs ? { kind: 'backoff', crashes: recent.length, retryAtUs, last: record.last } : null;
}

/** A hold in words, for the 503 and the profile's failure (`name` '': without the name). */
export function describeCrashHold(name: string, hold: CrashHold, nowUs: number, policy: CrashLoopPolicy = CRASH_LOOP_POLICY): string {
  const who = name === '' ? '' : `${name}: `;
  if (hold.kind === 'failed') return `${who}its engine ended by itself ${hold.crashes} times within ${policy.windowUs / 1_000_000} s (last: ${hold.last}); it stays stopped until it is restarted from the dashboard`;
  const inS = Math.max(0.1, (hold.retryAtUs - nowUs) / 1_000_000);
  return `${who}its engine ended by itself ${hold.crashes} time${hold.crashes === 1 ? '' : 's'} (last: ${hold.last}); next start in ${inS.toFixed(1)} s`;
}
