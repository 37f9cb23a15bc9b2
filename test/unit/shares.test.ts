import { describe, expect, it } from 'vitest';
import { computeShares, shareFloor } from '../../electron/core/registry/shares.js';

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

describe('computeShares', () => {
  it('splits by weight: 2,1,1 → 50/25/25', () => {
    expect(computeShares([2, 1, 1])).toEqual([0.5, 0.25, 0.25]);
  });

  it('gives a lone peer everything, and nobody nothing', () => {
    expect(computeShares([0.3])).toEqual([1]);
    expect(computeShares([])).toEqual([]);
  });

  it('raises a peer under the 10% floor and takes it from the others by weight', () => {
    // 20:1 → 95.2/4.8 without a floor; the floor is min(10%, 1/2) = 10%.
    const shares = computeShares([20, 1]);
    expect(shares[1]).toBeCloseTo(0.1, 12);
    expect(shares[0]).toBeCloseTo(0.9, 12);
  });

  it('water-fills repeatedly: raising one peer can push another under the floor', () => {
    // 100, 9, 1, 1: 1s are raised to 10% first; 9 then gets 0.8·9/109 = 6.6% < 10% and is raised too.
    const shares = computeShares([100, 9, 1, 1]);
    expect(shares.slice(1)).toEqual([0.1, 0.1, 0.1].map((x) => expect.closeTo(x, 12)));
    expect(shares[0]).toBeCloseTo(0.7, 12);
    expect(sum(shares)).toBeCloseTo(1, 12);
  });

  it('uses a floor of 1/n once there are more than 10 peers', () => {
    expect(shareFloor(16)).toBeCloseTo(1 / 16, 15);
    const shares = computeShares([100, ...new Array<number>(15).fill(0.01)]);
    for (const share of shares) expect(share).toBeCloseTo(1 / 16, 12);
  });

  it('keeps proportions when nobody is under the floor', () => {
    const shares = computeShares([3, 2, 1, 4]);
    expect(shares).toEqual([0.3, 0.2, 0.1, 0.4].map((x) => expect.closeTo(x, 12)));
  });
});
