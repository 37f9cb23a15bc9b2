/**
 * Activity bookkeeping shared by both gates: when the engine last did work (the `active` flag is
 * "worked within the last 2 s") and how much of the last second it spent working (`busy_ppm`).
 */
export const ACTIVITY_WINDOW_US = 2_000_000;
export const BUSY_WINDOW_US = 1_000_000;

export class BusyMeter {
  /** [endMonoUs, durationUs] of recent work intervals, oldest first. */
  private readonly intervals: [number, number][] = [];
  private lastWorkMonoUs: number | null = null;

  /** Work that ended at `endMonoUs` and lasted `durationUs`. */
  record(endMonoUs: number, durationUs: number): void {
    if (durationUs > 0) this.intervals.push([endMonoUs, durationUs]);
    this.lastWorkMonoUs = endMonoUs;
    this.prune(endMonoUs);
  }

  /** Did it work within the activity window? */
  active(nowMonoUs: number): boolean {
    return this.lastWorkMonoUs !== null && nowMonoUs - this.lastWorkMonoUs <= ACTIVITY_WINDOW_US;
  }

  /** Fraction of the last second spent working, in parts per million. */
  busyPpm(nowMonoUs: number): number {
    this.prune(nowMonoUs);
    const from = nowMonoUs - BUSY_WINDOW_US;
    let busy = 0;
    for (const [end, duration] of this.intervals) busy += Math.max(0, Math.min(duration, end - from));
    return Math.min(1_000_000, Math.round((busy / BUSY_WINDOW_US) * 1_000_000));
  }

  private prune(nowMonoUs: number): void {
    while (this.intervals.length > 0 && (this.intervals[0]?.[0] ?? 0) < nowMonoUs - BUSY_WINDOW_US) this.intervals.shift();
  }
}
