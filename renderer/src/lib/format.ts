/**
 * How numbers read on screen. Every figure carries its unit; a value we do not have reads "—"
 * and carries a title that says why, so that NaN, undefined or a bare number never reach the
 * page.
 */
import { formatBytes } from '../../../electron/core/planner/describe.js';

export const UNKNOWN_TEXT = '—';

/** Text to show and, when the value is unknown or needs context, the tooltip. */
export interface Shown {
  text: string;
  title: string | null;
}

export const GIB = 1024 ** 3;
export const MIB = 1024 ** 2;

export const isKnown = (value: number | null | undefined): value is number => typeof value === 'number' && Number.isFinite(value);

export function unknown(why: string): Shown {
  return { text: UNKNOWN_TEXT, title: why };
}

const known = (text: string, title: string | null = null): Shown => ({ text, title });

/** Bytes as GiB with two decimals ("6.20 GiB"): the GPU views compare figures in one unit. */
export function gib(bytes: number | null | undefined, why = 'not measured'): Shown {
  if (!isKnown(bytes)) return unknown(why);
  const value = bytes / GIB;
  // −0.00 reads as a sign error; a value that rounds to zero is zero.
  const text = Math.abs(value) < 0.005 ? '0.00' : value.toFixed(2);
  return known(`${text.replace('-', '−')} GiB`, `${Math.round(bytes).toLocaleString('en-US')} bytes`);
}

/** A size that may be small (a log, a KiB-sized file): the unit follows the magnitude. */
export function bytes(value: number | null | undefined, why = 'not measured'): Shown {
  if (!isKnown(value)) return unknown(why);
  return known(formatBytes(value));
}

/** A percentage already in 0–100, clamped there ("42 %"). */
export function pct(value: number | null | undefined, digits = 0, why = 'not measured'): Shown {
  if (!isKnown(value)) return unknown(why);
  const clamped = Math.min(100, Math.max(0, value));
  return known(`${clamped.toFixed(digits)} %`);
}

/** A fraction in 0–1 as a percentage. */
export function fractionPct(value: number | null | undefined, digits = 0, why = 'not measured'): Shown {
  return pct(isKnown(value) ? value * 100 : null, digits, why);
}

/** A duration given in µs: "850 µs", "120 ms", "1.5 s", "3 min". */
export function durationUs(us: number | null | undefined, why = 'not measured'): Shown {
  if (!isKnown(us)) return unknown(why);
  const abs = Math.abs(us);
  const sign = us < 0 ? '−' : '';
  if (abs < 1000) return known(`${sign}${Math.round(abs)} µs`);
  if (abs < 10_000) return known(`${sign}${(abs / 1000).toFixed(1)} ms`);
  if (abs < 1_000_000) return known(`${sign}${Math.round(abs / 1000)} ms`);
  if (abs < 60_000_000) return known(`${sign}${(abs / 1e6).toFixed(1)} s`);
  if (abs < 3_600_000_000) return known(`${sign}${Math.round(abs / 60e6)} min`);
  return known(`${sign}${(abs / 3600e6).toFixed(1)} h`);
}

/** A heartbeat age: always in seconds with one decimal so the column does not jump units. */
export function ageSeconds(ms: number | null | undefined, why = 'no heartbeat seen'): Shown {
  if (!isKnown(ms) || ms < 0) return unknown(why);
  return known(`${(ms / 1000).toFixed(1)} s`);
}

/** A weight as typed (1.5, 0.25), never 0.10000000149 (weights pass through an f32). */
export function weight(value: number | null | undefined, why = 'no weight'): Shown {
  if (!isKnown(value)) return unknown(why);
  return known(String(Number(value.toPrecision(3))));
}

export function integer(value: number | null | undefined, unit = '', why = 'not known'): Shown {
  if (!isKnown(value)) return unknown(why);
  const text = Math.round(value).toLocaleString('en-US');
  return known(unit === '' ? text : `${text} ${unit}`);
}

/** An identifier that happens to be a number (a pid, a port): no digit grouping. */
export function idNumber(value: number | null | undefined, why = 'not known'): Shown {
  if (!isKnown(value)) return unknown(why);
  return known(String(Math.round(value)));
}

/** Wall-clock µs as local time of day (plan history), with the date in the title. */
export function clockTime(wallUs: number | null | undefined, why = 'no time recorded'): Shown {
  if (!isKnown(wallUs) || wallUs <= 0) return unknown(why);
  const date = new Date(wallUs / 1000);
  const two = (n: number): string => String(n).padStart(2, '0');
  return known(`${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}`, date.toLocaleString());
}

/** Plain text of a possibly-missing string. */
export function text(value: string | null | undefined, why: string): Shown {
  return value === null || value === undefined || value === '' ? unknown(why) : known(value);
}
