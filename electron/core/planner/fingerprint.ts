/** A plan's fingerprint: a hash of its canonical inputs and result. Arrays whose order carries no
 *  meaning are sorted and object keys are ordered, so the same inputs in any order give the same
 *  fingerprint. */
import { createHash } from 'node:crypto';

export type Canonical = null | boolean | number | string | Canonical[] | { [key: string]: Canonical };

export function canonicalJson(value: Canonical): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key] ?? null)}`).join(',')}}`;
}

export function fingerprintOf(value: Canonical): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex').slice(0, 16);
}
