/**
 * Window overshoot: how long past the end of its window a peer was still running (a cooperative
 * engine's last step, or the process gate's suspend coming late). Measured where it happens — in
 * the engine host or the `gpu-share run` that paces a command — and reported to the supervisor
 * every few seconds as a batch, for /metrics and the timeline.
 */
export const OVERSHOOT_REPORT_INTERVAL_MS = 2_000;
/** At most this many values per report (the rest of a burst is dropped, not the report). */
const MAX_BATCH = 256;

export class OvershootLog {
  private batch: number[] = [];

  record(us: number): void {
    if (this.batch.length < MAX_BATCH && Number.isFinite(us) && us >= 0) this.batch.push(Math.round(us));
  }

  /** The values since the last take (empty when none). */
  take(): number[] {
    const taken = this.batch;
    this.batch = [];
    return taken;
  }
}

/** The line `gpu-share run` writes on stderr for its supervisor: `gpu-share: pacer {"overshoots_us":[…]}`. */
export const PACER_LINE_PREFIX = 'gpu-share: pacer ';

export function formatPacerLine(overshootsUs: readonly number[]): string {
  return `${PACER_LINE_PREFIX}${JSON.stringify({ overshoots_us: overshootsUs })}`;
}

/** The overshoots of a pacer line; null when the line is not one (never throws). */
export function parsePacerLine(line: string): number[] | null {
  if (!line.startsWith(PACER_LINE_PREFIX) || line.length > 16_384) return null;
  try {
    const value = JSON.parse(line.slice(PACER_LINE_PREFIX.length)) as unknown;
    return overshootsOf((value as { overshoots_us?: unknown } | null)?.overshoots_us);
  } catch {
    return null;
  }
}

/** A report's `overshoots_us` when it is one (a batch of µs, each under a minute); null otherwise.
 *  The one check for both transports: `gpu-share run`'s stderr line and the engine host's event. */
export function overshootsOf(list: unknown): number[] | null {
  if (!Array.isArray(list) || list.length > MAX_BATCH) return null;
  return list.every((v) => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v < 60_000_000) ? (list as number[]) : null;
}
