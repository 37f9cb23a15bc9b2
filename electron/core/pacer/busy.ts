/**
 * Activity bookkeeping shared by both gates: when the engine last did work (the `active` flag is
 * "worked within the last 2 s") and how much of the last second it spent working (`busy_ppm`).
 */
/** How long `active` outlives the last evidence of work when the engine's idleness is not known:
 *  its CPU time (process gate) or its decode steps (cooperative gate) are all we see, and a quiet
 *  spell of either proves nothing (a GPU-bound engine waiting on its kernels burns no CPU; a client
 *  between two requests is about to send the next). opencoti's rule. */
export const ACTIVITY_WINDOW_US = 2_000_000;
/** How long `active` outlives the last request when the engine's idleness is known (no request in
 *  flight and none queued: the built-in engine's own queue, a llama.cpp server's /metrics): a short
 *  hysteresis, so that a client sending requests back to back keeps its place in the schedule. */
export const KNOWN_IDLE_HYSTERESIS_US = 150_000;
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
