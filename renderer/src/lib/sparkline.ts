/**
 * Sparklines: a short history of one figure drawn in a small box. The world is (time, value);
 * the box is pixels, y down. The time axis ends at the newest point (or `end`) and spans `span`
 * back, so that sparse readings are not stretched across the box; the value axis is given (0–100
 * for a utilisation) or the range of the values shown. A value that is not known (null) breaks the
 * line, it is never drawn as 0. Pure.
 */

export interface SparkPoint {
  /** Time, in any unit the span uses (µs in the state). */
  t: number;
  v: number | null;
}

export interface SparkOptions {
  width: number;
  height: number;
  /** Inset of the line from the box's edges, px (the stroke's half-width at least). */
  pad?: number;
  /** How much time the box shows; default: from the oldest point to the newest. */
  span?: number;
  /** The time at the right edge; default: the newest point's. */
  end?: number;
  /** Fixed value range ends; default: the values' own. */
  min?: number;
  max?: number;
}

export interface SparkScale {
  t0: number;
  t1: number;
  v0: number;
  v1: number;
}

export interface Pixel {
  x: number;
  y: number;
}

export interface SparkLayout {
  scale: SparkScale;
  /** Runs of known values, in pixels; a single-point run is drawn as a dot. */
  runs: Pixel[][];
  /** The newest known value and where it is. */
  last: (Pixel & { v: number }) | null;
  /** The known values shown (in the time window). */
  known: number;
}

const finite = (v: number | null): v is number => v !== null && Number.isFinite(v);

export function sparkScale(points: readonly SparkPoint[], options: SparkOptions): SparkScale {
  const t1 = options.end ?? points.at(-1)?.t ?? 0;
  const t0 = options.span === undefined ? (points[0]?.t ?? t1) : t1 - options.span;
  const values = points.filter((p) => p.t >= t0 && p.t <= t1).map((p) => p.v).filter(finite);
  let v0 = options.min ?? (values.length === 0 ? 0 : Math.min(...values));
  let v1 = options.max ?? (values.length === 0 ? 1 : Math.max(...values));
  if (v1 <= v0) {
    // A flat line sits in the middle of its box, not on an edge.
    const half = Math.max(Math.abs(v0) * 0.05, 0.5);
    if (options.min === undefined) v0 -= half;
    if (options.max === undefined) v1 += half;
    if (v1 <= v0) v1 = v0 + 1;
  }
  return { t0, t1, v0, v1 };
}

/** World → pixel: time left to right, value bottom to top, clamped inside the padded box. */
export function toPixel(scale: SparkScale, options: SparkOptions, t: number, v: number): Pixel {
  const pad = options.pad ?? 1;
  const w = Math.max(0, options.width - 2 * pad);
  const h = Math.max(0, options.height - 2 * pad);
  const fx = scale.t1 === scale.t0 ? 1 : (t - scale.t0) / (scale.t1 - scale.t0);
  const fy = (v - scale.v0) / (scale.v1 - scale.v0);
  const clamp = (f: number): number => Math.min(1, Math.max(0, f));
  return { x: pad + clamp(fx) * w, y: pad + (1 - clamp(fy)) * h };
}

export function sparklineLayout(points: readonly SparkPoint[], options: SparkOptions): SparkLayout {
  const scale = sparkScale(points, options);
  const runs: Pixel[][] = [];
  let run: Pixel[] | null = null;
  let last: SparkLayout['last'] = null;
  let known = 0;
  for (const p of points) {
    if (p.t < scale.t0 || p.t > scale.t1) continue;
    if (!finite(p.v)) {
      run = null;
      continue;
    }
    const pixel = toPixel(scale, options, p.t, p.v);
    if (run === null) {
      run = [];
      runs.push(run);
    }
    run.push(pixel);
    last = { ...pixel, v: p.v };
    known++;
  }
  return { scale, runs, last, known };
}

/** A run as an SVG polyline's points attribute ("x,y x,y"), to two decimals. */
export function polylinePoints(run: readonly Pixel[]): string {
  return run.map((p) => `${Math.round(p.x * 100) / 100},${Math.round(p.y * 100) / 100}`).join(' ');
}
