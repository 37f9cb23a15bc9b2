/**
 * A plan's fingerprint: a hash of its canonical inputs and result. The caller feeds every field in
 * a fixed order and sorts the lists whose order carries no meaning, so the same inputs in any order
 * (of keys or of list items) give the same fingerprint.
 *
 * The canonical form is two streams hashed together: the structure and the strings as text (tags,
 * lengths, characters) and the numbers as raw 8-byte doubles. Typed calls (str, num, …) rather than
 * a generic walk over values, and no decimal formatting of numbers: those two cost more than the
 * rest of a plan.
 */
import { createHash } from 'node:crypto';

export class Fingerprint {
  private structure = '';
  private numbers = new Float64Array(1024);
  private count = 0;

  reset(): this {
    this.structure = '';
    this.count = 0;
    return this;
  }

  num(value: number | undefined): this {
    if (value === undefined) {
      this.structure += '0';
      return this;
    }
    if (this.count === this.numbers.length) {
      const bigger = new Float64Array(this.numbers.length * 2);
      bigger.set(this.numbers);
      this.numbers = bigger;
    }
    this.numbers[this.count++] = value;
    this.structure += 'n';
    return this;
  }

  str(value: string | null | undefined): this {
    this.structure += value === null || value === undefined ? '0' : `s${value.length}:${value}`;
    return this;
  }

  bool(value: boolean): this {
    this.structure += value ? 't' : 'f';
    return this;
  }

  /** A list of `length` items follows. */
  list(length: number): this {
    this.structure += `[${length}:`;
    return this;
  }

  digest(): string {
    return createHash('sha256')
      .update(this.structure)
      .update(new Uint8Array(this.numbers.buffer, 0, this.count * 8))
      .digest('hex')
      .slice(0, 16);
  }
}

const shared = new Fingerprint();

/** Plans are computed synchronously, one at a time, so one builder serves them all. */
export function fingerprint(): Fingerprint {
  return shared.reset();
}
