/**
 * Reading Prometheus' text exposition format: the one piece both the pacer (a llama.cpp server's
 * activity) and the engines (their live figures) need, below both. Pure.
 */

/** Compiled once per name: the pacer reads the same few names ten times a second. */
const patterns = new Map<string, RegExp>();

/** A sample's value in a Prometheus text body (the first line for the name, labels ignored);
 *  null when absent or not a finite number. */
export function metricValue(text: string, name: string): number | null {
  let pattern = patterns.get(name);
  if (pattern === undefined) {
    const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    pattern = new RegExp(`^${escaped}(?:\\{[^}]*\\})?\\s+([-+0-9.eE]+|NaN|[+-]?Inf)\\s*(?:\\s\\d+)?$`, 'm');
    if (patterns.size < 64) patterns.set(name, pattern);
  }
  const match = pattern.exec(text);
  const n = match?.[1] === undefined ? Number.NaN : Number(match[1]);
  return Number.isFinite(n) ? n : null;
}
