/**
 * A plan's fingerprint: a hash of its canonical inputs and result. The caller feeds every field in
 * a fixed order and sorts the lists whose order carries no meaning, so the same inputs in any order
 * (of keys or of list items) give the same fingerprint. Values are written in a tagged binary form
 * (numbers as 8-byte doubles) rather than as JSON: formatting ~250 numbers as text cost more than
 * the rest of a plan.
 */
import { createHash } from 'node:crypto';

export type CanonicalValue = null | undefined | boolean | number | string | readonly CanonicalValue[];

const TAG = { null: 0, false: 1, true: 2, number: 3, string: 4, list: 5 } as const;

export class CanonicalWriter {
  private buffer = new Uint8Array(4096);
  private view = new DataView(this.buffer.buffer);
  private length = 0;
  private readonly encoder = new TextEncoder();

  write(value: CanonicalValue): this {
    if (value === null || value === undefined) this.byte(TAG.null);
    else if (value === false) this.byte(TAG.false);
    else if (value === true) this.byte(TAG.true);
    else if (typeof value === 'number') {
      this.byte(TAG.number);
      this.reserve(8);
      this.view.setFloat64(this.length, value, true);
      this.length += 8;
    } else if (typeof value === 'string') {
      const bytes = this.encoder.encode(value);
      this.byte(TAG.string);
      this.u32(bytes.length);
      this.reserve(bytes.length);
      this.buffer.set(bytes, this.length);
      this.length += bytes.length;
    } else {
      this.byte(TAG.list);
      this.u32(value.length);
      for (const item of value) this.write(item);
    }
    return this;
  }

  digest(): string {
    return createHash('sha256').update(this.buffer.subarray(0, this.length)).digest('hex').slice(0, 16);
  }

  private byte(b: number): void {
    this.reserve(1);
    this.buffer[this.length++] = b;
  }

  private u32(n: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, n, true);
    this.length += 4;
  }

  private reserve(n: number): void {
    if (this.length + n <= this.buffer.length) return;
    const bigger = new Uint8Array(Math.max(this.buffer.length * 2, this.length + n));
    bigger.set(this.buffer.subarray(0, this.length));
    this.buffer = bigger;
    this.view = new DataView(bigger.buffer);
  }
}

export function fingerprintOf(canonical: CanonicalValue): string {
  return new CanonicalWriter().write(canonical).digest();
}
