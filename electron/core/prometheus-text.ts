/**
 * Reading Prometheus' text exposition format: the one piece both the pacer (a llama.cpp server's
 * activity) and the engines (their live figures) need, below both. Pure.
 */

/** A sample's value in a Prometheus text body (the first line for the name, labels ignored);
 *  null when absent or not a finite number. */
export function metricValue(text: string, name: string): number | null {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const match = new RegExp(`^${escaped}(?:\\{[^}]*\\})?\\s+([-+0-9.eE]+|NaN|[+-]?Inf)\\s*(?:\\s\\d+)?$`, 'm').exec(text);
  const n = match?.[1] === undefined ? Number.NaN : Number(match[1]);
  return Number.isFinite(n) ? n : null;
}
