/**
 * The TDM schedule: a pure function of the active peers' shares and the wall clock. Every process
 * derives the same schedule from the same registry and the same CLOCK_REALTIME, so no one has to
 * send anyone a message.
 *
 * - each active peer's window share is its plain share floored at 10 %, all renormalized to sum 1
 *   (registry/shares.ts: 20:1 → 90.50/9.50 of the period, while the shares shown stay 95.24/4.76);
 * - period = clamp(40 ms / min_window_share, 80 ms, 400 ms): the smallest window is at least 40 ms
 *   (or the period is as long as we allow), so that switching costs stay small against useful work;
 * - one contiguous window per active peer, ordered by slot index, its length proportional to its
 *   window share (whole µs; rounding goes to the last window so that the windows tile the period);
 * - the position in the period is wall_us mod period.
 */
import { windowShares } from '../registry/shares.js';

export const MIN_WINDOW_US = 40_000;
export const MIN_PERIOD_US = 80_000;
export const MAX_PERIOD_US = 400_000;

export interface SchedulePeer {
  readonly slot: number;
  /** Plain share in (0, 1] (w / Σw); the active peers' shares sum to 1. */
  readonly share: number;
}

export interface ScheduleWindow {
  readonly slot: number;
  /** The peer's plain share, as shown everywhere. */
  readonly share: number;
  /** Its share of the period: the plain share floored at 10 %, renormalized. */
  readonly windowShare: number;
  /** Offset of the window's start inside the period, µs. */
  readonly startUs: number;
  readonly lengthUs: number;
}

export interface Schedule {
  readonly periodUs: number;
  /** In slot order; they tile [0, periodUs). Empty when nobody is active. */
  readonly windows: readonly ScheduleWindow[];
}

export function periodFor(minWindowShare: number): number {
  if (!(minWindowShare > 0)) return MAX_PERIOD_US;
  return Math.round(Math.min(MAX_PERIOD_US, Math.max(MIN_PERIOD_US, MIN_WINDOW_US / minWindowShare)));
}

export function buildSchedule(peers: readonly SchedulePeer[]): Schedule {
  const active = peers.filter((peer) => peer.share > 0).sort((a, b) => a.slot - b.slot);
  if (active.length === 0) return { periodUs: MIN_PERIOD_US, windows: [] };
  const total = active.reduce((sum, peer) => sum + peer.share, 0);
  const fractions = windowShares(active.map((peer) => peer.share / total));
  const periodUs = periodFor(Math.min(...fractions));
  const windows: ScheduleWindow[] = [];
  let startUs = 0;
  active.forEach((peer, i) => {
    const windowShare = fractions[i] ?? 0;
    const last = i === active.length - 1;
    const lengthUs = last ? periodUs - startUs : Math.round(periodUs * windowShare);
    windows.push({ slot: peer.slot, share: peer.share, windowShare, startUs, lengthUs });
    startUs += lengthUs;
  });
  return { periodUs, windows };
}

/** Where the wall clock is inside the period. */
export function positionUs(schedule: Schedule, wallUs: number): number {
  const p = wallUs % schedule.periodUs;
  return p < 0 ? p + schedule.periodUs : p;
}

export function windowOf(schedule: Schedule, slot: number): ScheduleWindow | undefined {
  return schedule.windows.find((window) => window.slot === slot);
}

/** The slot whose window holds the wall time, or null when nobody is active. */
export function ownerAt(schedule: Schedule, wallUs: number): number | null {
  const pos = positionUs(schedule, wallUs);
  for (const window of schedule.windows) if (pos >= window.startUs && pos < window.startUs + window.lengthUs) return window.slot;
  return null;
}

/** Is `slot` inside its window at `wallUs`? A slot with no window (idle) is never inside. */
export function inWindow(schedule: Schedule, slot: number, wallUs: number): boolean {
  return ownerAt(schedule, wallUs) === slot && windowOf(schedule, slot) !== undefined;
}

/** µs from `wallUs` until `slot`'s next window starts: 0 inside it, null when it has none. */
export function usUntilWindow(schedule: Schedule, slot: number, wallUs: number): number | null {
  const window = windowOf(schedule, slot);
  if (window === undefined) return null;
  const pos = positionUs(schedule, wallUs);
  if (pos >= window.startUs && pos < window.startUs + window.lengthUs) return 0;
  const until = window.startUs - pos;
  return until > 0 ? until : until + schedule.periodUs;
}

/** µs from `wallUs` until `slot`'s current window ends: 0 outside it. */
export function usUntilWindowEnd(schedule: Schedule, slot: number, wallUs: number): number {
  const window = windowOf(schedule, slot);
  if (window === undefined) return 0;
  const pos = positionUs(schedule, wallUs);
  if (pos < window.startUs || pos >= window.startUs + window.lengthUs) return 0;
  return window.startUs + window.lengthUs - pos;
}

/** µs since `slot`'s last window ended: 0 inside it or with no window. A peer that still runs
 *  this long after its window ended is overshooting into the next peer's window. */
export function usSinceWindowEnd(schedule: Schedule, slot: number, wallUs: number): number {
  const window = windowOf(schedule, slot);
  if (window === undefined) return 0;
  const pos = positionUs(schedule, wallUs);
  const end = window.startUs + window.lengthUs;
  if (pos >= window.startUs && pos < end) return 0;
  const since = pos - end;
  return since >= 0 ? since : since + schedule.periodUs;
}

/** The longest a peer waits between windows: the period less its own window (its window share,
 *  not its plain share: with 20:1 the small peer waits 362 ms, not 381). */
export function stallBoundUs(schedule: Schedule, slot: number): number | null {
  const window = windowOf(schedule, slot);
  return window === undefined ? null : schedule.periodUs - window.lengthUs;
}

/** The schedule as text for golden files: reads like a design review. */
export function describeSchedule(title: string, weights: readonly number[], schedule: Schedule): string {
  const lines = [`# ${title}`, `weights: ${weights.join(' : ')}`, `period: ${(schedule.periodUs / 1000).toFixed(3)} ms`, ''];
  lines.push('slot  share    window share  window start   length       stall bound');
  for (const w of schedule.windows) {
    lines.push(
      `${String(w.slot).padStart(4)}  ${(w.share * 100).toFixed(2).padStart(6)}%  ${(w.windowShare * 100).toFixed(2).padStart(11)}%  ${(w.startUs / 1000).toFixed(3).padStart(9)} ms  ${(w.lengthUs / 1000).toFixed(3).padStart(8)} ms  ${((schedule.periodUs - w.lengthUs) / 1000).toFixed(3).padStart(8)} ms`,
    );
  }
  const scale = 80 / schedule.periodUs;
  let bar = '';
  for (const w of schedule.windows) {
    const cells = Math.max(1, Math.round((w.startUs + w.lengthUs) * scale) - bar.length);
    bar += (w.slot % 36).toString(36).repeat(cells);
  }
  lines.push('', `timeline (one period, ${schedule.windows.length} windows, each character ${(schedule.periodUs / 80 / 1000).toFixed(2)} ms):`, `|${bar.slice(0, 80)}|`);
  return `${lines.join('\n')}\n`;
}
