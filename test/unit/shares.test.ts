import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { computeShares, WINDOW_SHARE_FLOOR, windowShares } from '../../electron/core/registry/shares.js';

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
const SIXTEEN = [8, 4, 4, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0.5, 0.5, 0.25, 0.1];

describe('computeShares: the plain ratio w / Σw', () => {
  it('splits by weight: 2,1,1 → 50/25/25; 20:1 → 95.24/4.76', () => {
    expect(computeShares([2, 1, 1])).toEqual([0.5, 0.25, 0.25]);
    const [big, small] = computeShares([20, 1]);
    expect(big).toBeCloseTo(20 / 21, 12);
    expect(small).toBeCloseTo(1 / 21, 12);
  });

  it('gives a lone peer everything, and nobody nothing', () => {
    expect(computeShares([0.3])).toEqual([1]);
    expect(computeShares([])).toEqual([]);
  });

  it('keeps weights mattering past 10 peers: 16 peers weighted 8 … 0.1 are not all 6.25 %', () => {
    const shares = computeShares(SIXTEEN);
    expect(shares[0]).toBeCloseTo(8 / 29.35, 12);
    expect(shares[15]).toBeCloseTo(0.1 / 29.35, 12);
    expect(new Set(shares.map((s) => s.toFixed(6))).size).toBe(7);
  });

  it('property: shares are exactly proportional to weights and sum to 1', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0.01, max: 100, noNaN: true }), { minLength: 1, maxLength: 16 }), (weights) => {
        const shares = computeShares(weights);
        expect(sum(shares)).toBeCloseTo(1, 9);
        for (let i = 0; i < weights.length; i++) {
          for (let j = 0; j < weights.length; j++) {
            // share_i / share_j = w_i / w_j, written without a division that could round away.
            expect((shares[i] ?? 0) * (weights[j] ?? 0)).toBeCloseTo((shares[j] ?? 0) * (weights[i] ?? 0), 9);
          }
        }
      }),
    );
  });
});

describe('windowShares: floored at 10 %, renormalized', () => {
  it('20:1 → 90.50 / 9.50', () => {
    const [big, small] = windowShares(computeShares([20, 1]));
    expect((big ?? 0) * 100).toBeCloseTo(90.5, 2);
    expect((small ?? 0) * 100).toBeCloseTo(9.5, 2);
  });

  it('16 peers weighted 8 … 0.1 → 14.77, 7.39, 7.39, then 13 × 5.42 %', () => {
    const windows = windowShares(computeShares(SIXTEEN)).map((share) => Number((share * 100).toFixed(2)));
    expect(windows).toEqual([14.77, 7.39, 7.39, ...new Array<number>(13).fill(5.42)]);
  });

  it('changes nothing when every share is at least 10 %', () => {
    const shares = computeShares([3, 2, 1, 4]);
    expect(windowShares(shares)).toEqual(shares.map((x) => expect.closeTo(x, 12)));
  });

  it('property: windows sum to 1; peers with a plain share ≥ 10 % keep their proportions; peers under it share one window length', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0.01, max: 100, noNaN: true }), { minLength: 1, maxLength: 16 }), (weights) => {
        const shares = computeShares(weights);
        const windows = windowShares(shares);
        expect(sum(windows)).toBeCloseTo(1, 9);
        const big = weights.map((_, i) => i).filter((i) => (shares[i] ?? 0) >= WINDOW_SHARE_FLOOR);
        const small = weights.map((_, i) => i).filter((i) => (shares[i] ?? 0) < WINDOW_SHARE_FLOOR);
        for (const i of big) for (const j of big) expect((windows[i] ?? 0) * (weights[j] ?? 0)).toBeCloseTo((windows[j] ?? 0) * (weights[i] ?? 0), 9);
        for (const i of small) expect(windows[i]).toBeCloseTo(windows[small[0] ?? 0] ?? 0, 12);
        // A bigger weight never gets a smaller window.
        for (let i = 0; i < weights.length; i++) for (let j = 0; j < weights.length; j++) if ((weights[i] ?? 0) > (weights[j] ?? 0)) expect(windows[i]).toBeGreaterThanOrEqual((windows[j] ?? 0) - 1e-12);
      }),
    );
  });
});
