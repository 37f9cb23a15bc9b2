/**
 * A plan's fingerprint: a hash of its canonical inputs and result. The caller feeds every field in
 * a fixed order and sorts the lists whose order carries no meaning, so the same inputs in any order
 * (of keys or of list items) give the same fingerprint. Values derived from the clock are never
 * fed (plan.ts says which), so the same state planned twice gives the same fingerprint.
 *
 * The canonical form is one byte stream: a tag per value ('s' string, 'n' number, 't'/'f' boolean,
 * '[' list, '0' absent), then a string's UTF-8 length (u32) and bytes, a number's raw 8-byte double,
 * a list's length (u32); all little-endian. It is written into one buffer that is reused from plan
 * to plan: a plan is on the planner's hot path, and the garbage of building text for it cost more
 * than the plan (the young-generation collections it set off were the benchmark's p99).
 */
import * as crypto from 'node:crypto';

const TAG_STRING = 0x73; // 's'
const TAG_NUMBER = 0x6e; // 'n'
const TAG_TRUE = 0x74; // 't'
const TAG_FALSE = 0x66; // 'f'
const TAG_LIST = 0x5b; // '['
const TAG_ABSENT = 0x30; // '0'

/** The one-shot hash (Node ≥ 20.12) when there is one: it allocates no Hash object. */
const oneShotHash = (crypto as { hash?: (algorithm: string, data: Uint8Array, encoding: 'hex') => string }).hash;

export class Fingerprint {
  private buffer = Buffer.allocUnsafe(4096);
  private at = 0;

  reset(): this {
    this.at = 0;
    return this;
  }

  private room(bytes: number): void {
    if (this.at + bytes <= this.buffer.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.at + bytes));
    this.buffer.copy(bigger, 0, 0, this.at);
    this.buffer = bigger;
  }

  num(value: number | undefined): this {
    this.room(9);
    if (value === undefined) {
      this.buffer[this.at++] = TAG_ABSENT;
      return this;
    }
    this.buffer[this.at] = TAG_NUMBER;
    this.buffer.writeDoubleLE(value, this.at + 1);
    this.at += 9;
    return this;
  }

  str(value: string | null | undefined): this {
    if (value === null || value === undefined) {
      this.room(1);
      this.buffer[this.at++] = TAG_ABSENT;
      return this;
    }
    // A UTF-16 unit is at most 3 UTF-8 bytes.
    this.room(5 + value.length * 3);
    this.buffer[this.at] = TAG_STRING;
    const written = this.buffer.write(value, this.at + 5, 'utf8');
    this.buffer.writeUInt32LE(written, this.at + 1);
    this.at += 5 + written;
    return this;
  }

  bool(value: boolean): this {
    this.room(1);
    this.buffer[this.at++] = value ? TAG_TRUE : TAG_FALSE;
    return this;
  }

  /** A list of `length` items follows. */
  list(length: number): this {
    this.room(5);
    this.buffer[this.at] = TAG_LIST;
    this.buffer.writeUInt32LE(length, this.at + 1);
    this.at += 5;
    return this;
  }

  /** sha256 of the stream, first 16 hex digits. */
  digest(): string {
    const bytes = this.buffer.subarray(0, this.at);
    const hex = oneShotHash === undefined ? crypto.createHash('sha256').update(bytes).digest('hex') : oneShotHash('sha256', bytes, 'hex');
    return hex.slice(0, 16);
  }
}

const shared = new Fingerprint();

/** Plans are computed synchronously, one at a time, so one builder serves them all. */
export function fingerprint(): Fingerprint {
  return shared.reset();
}
