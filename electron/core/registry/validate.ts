/**
 * Validation of what users and programs hand us for the registry (CLI flags, API bodies). Each
 * check returns the value or a message that names what was wrong; callers prefix the flag.
 */
import { GPU_KEY_MAX, GPU_KEY_PATTERN, NAME_MAX_BYTES } from './abi.js';
import { MAX_WEIGHT, MIN_WEIGHT, stripBidiControls } from './codec.js';

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

export function checkGpuKey(raw: string): Checked<string> {
  if (raw.length === 0) return { ok: false, message: 'must not be empty' };
  if (raw.length > GPU_KEY_MAX) return { ok: false, message: `must be at most ${GPU_KEY_MAX} characters (got ${raw.length})` };
  if (!GPU_KEY_PATTERN.test(raw)) return { ok: false, message: 'may contain only A-Z, a-z, 0-9, ".", "_" and "-"' };
  return { ok: true, value: raw };
}

export function checkWeight(raw: string | number): Checked<number> {
  const text = String(raw).trim();
  // Number('') is 0 and Number('0x10') is 16: accept plain decimal notation only.
  const value = /^[+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isFinite(value) || value <= 0) return { ok: false, message: `must be a finite number > 0 (got ${JSON.stringify(text)})` };
  if (value < MIN_WEIGHT || value > MAX_WEIGHT) return { ok: false, message: `must be between ${MIN_WEIGHT} and ${MAX_WEIGHT} (got ${text})` };
  return { ok: true, value };
}

export function checkName(raw: string): Checked<string> {
  const bytes = Buffer.byteLength(raw, 'utf8');
  if (bytes === 0) return { ok: false, message: 'must not be empty' };
  if (bytes > NAME_MAX_BYTES) return { ok: false, message: `must be at most ${NAME_MAX_BYTES} bytes of UTF-8 (got ${bytes})` };
  if (/[\u0000-\u001f\u007f]/.test(raw)) return { ok: false, message: 'must not contain control characters' };
  if (stripBidiControls(raw) !== raw) return { ok: false, message: 'must not contain Unicode bidirectional controls (they make a name display as another)' };
  return { ok: true, value: raw };
}

/** A whole number in [min, max] written in plain digits (no sign, exponent or hex); null if not. */
export function parseWholeNumber(raw: string, min: number, max: number): number | null {
  if (!/^\d+$/.test(raw.trim())) return null;
  const value = Number(raw);
  return Number.isSafeInteger(value) && value >= min && value <= max ? value : null;
}

export function checkWholeNumber(raw: string, min: number, max: number): Checked<number> {
  const value = parseWholeNumber(raw, min, max);
  return value === null ? { ok: false, message: `must be a whole number from ${min} to ${max} (got ${JSON.stringify(raw)})` } : { ok: true, value };
}

export function checkIntervalMs(raw: string): Checked<number> {
  const value = parseWholeNumber(raw, 50, 60_000);
  if (value === null) return { ok: false, message: `must be a whole number of milliseconds between 50 and 60000 (got ${JSON.stringify(raw)})` };
  return { ok: true, value };
}
