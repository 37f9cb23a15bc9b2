/** A fixed number of the latest values, oldest dropped first: the short histories the dashboard
 *  draws as sparklines (device telemetry, engine token rates). */
export class RingBuffer<T> {
  private readonly items: (T | undefined)[];
  private next = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`a ring buffer holds at least 1 value, got ${capacity}`);
    this.items = new Array<T | undefined>(capacity);
  }

  push(value: T): void {
    this.items[this.next] = value;
    this.next = (this.next + 1) % this.capacity;
    this.count = Math.min(this.count + 1, this.capacity);
  }

  get length(): number {
    return this.count;
  }

  /** The values, oldest first. */
  toArray(): T[] {
    const out: T[] = [];
    const start = this.count < this.capacity ? 0 : this.next;
    for (let i = 0; i < this.count; i++) out.push(this.items[(start + i) % this.capacity] as T);
    return out;
  }

  clear(): void {
    this.items.fill(undefined);
    this.next = 0;
    this.count = 0;
  }
}
