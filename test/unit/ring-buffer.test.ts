import { describe, expect, it } from 'vitest';
import { RingBuffer } from '../../electron/core/telemetry/ring.js';

describe('ring buffer', () => {
  it('keeps the last N values, oldest first', () => {
    const ring = new RingBuffer<number>(3);
    expect(ring.toArray()).toEqual([]);
    ring.push(1);
    ring.push(2);
    expect(ring.toArray()).toEqual([1, 2]);
    for (const n of [3, 4, 5]) ring.push(n);
    expect(ring.toArray()).toEqual([3, 4, 5]);
    expect(ring.length).toBe(3);
    ring.push(6);
    expect(ring.toArray()).toEqual([4, 5, 6]);
    ring.clear();
    expect(ring.toArray()).toEqual([]);
  });

  it('refuses a capacity below 1', () => {
    expect(() => new RingBuffer(0)).toThrow(RangeError);
    expect(() => new RingBuffer(1.5)).toThrow(RangeError);
  });
});
