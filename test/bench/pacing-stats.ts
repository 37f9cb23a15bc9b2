/** Figures the pacing benchmarks derive from token timestamps (µs on the wall clock). Pure. */

export const round = (x: number, digits = 2): number => Math.round(x * 10 ** digits) / 10 ** digits;

export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

export function gapsMs(tokens: number[], fromUs: number, toUs: number): number[] {
  const inside = tokens.filter((t) => t >= fromUs && t < toUs);
  const gaps: number[] = [];
  for (let i = 1; i < inside.length; i++) gaps.push(((inside[i] ?? 0) - (inside[i - 1] ?? 0)) / 1000);
  return gaps.sort((a, b) => a - b);
}

export function summary(gaps: number[]): { p50: number; p95: number; max: number } {
  return { p50: round(percentile(gaps, 0.5)), p95: round(percentile(gaps, 0.95)), max: round(gaps[gaps.length - 1] ?? 0) };
}

export const rate = (tokens: number[], fromUs: number, toUs: number): number => tokens.filter((t) => t >= fromUs && t < toUs).length / ((toUs - fromUs) / 1e6);

/** The engine's own token counter at a time, interpolated between samples; null outside them. */
export function counterAt(counters: readonly [number, number][], us: number): number | null {
  for (let i = 1; i < counters.length; i++) {
    const [t0, n0] = counters[i - 1] ?? [0, 0];
    const [t1, n1] = counters[i] ?? [0, 0];
    if (us >= t0 && us <= t1) return t1 === t0 ? n0 : n0 + ((n1 - n0) * (us - t0)) / (t1 - t0);
  }
  return null;
}

/** The start of the first 200 ms window after `fromUs` in which the engine decoded at ≥ 95 % of
 *  its solo rate; null when it never did. */
export function recoveredAtUs(tokens: number[], fromUs: number, soloTokps: number): number | null {
  const windowUs = 200_000;
  const needed = Math.ceil(0.95 * soloTokps * (windowUs / 1e6));
  const after = tokens.filter((t) => t >= fromUs);
  for (let i = 0; i + needed - 1 < after.length; i++) {
    const first = after[i] ?? 0;
    if ((after[i + needed - 1] ?? 0) - first <= windowUs) return first;
  }
  return null;
}

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

