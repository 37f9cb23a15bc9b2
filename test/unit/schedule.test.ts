import { describe, expect, it } from 'vitest';
import { computeShares } from '../../electron/core/registry/shares.js';
import {
  buildSchedule,
  describeSchedule,
  inWindow,
  ownerAt,
  periodFor,
  stallBoundUs,
  usUntilWindow,
  usUntilWindowEnd,
  type Schedule,
} from '../../electron/core/pacer/schedule.js';
import { golden } from '../fixtures/golden.js';

function scheduleFor(weights: readonly number[]): Schedule {
  const shares = computeShares(weights);
  return buildSchedule(weights.map((_, slot) => ({ slot, share: shares[slot] ?? 0 })));
}

const CASES: [string, number[]][] = [
  ['1-1', [1, 1]],
  ['2-1', [2, 1]],
  ['2-1-1', [2, 1, 1]],
  ['20-1', [20, 1]],
  ['16-peers', [8, 4, 4, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0.5, 0.5, 0.25, 0.1]],
];

describe('schedule golden files', () => {
  for (const [name, weights] of CASES) {
    it(`${name}`, () => {
      const schedule = scheduleFor(weights);
      const { expected, actual } = golden(`schedule-${name}.txt`, describeSchedule(`TDM schedule ${name}`, weights, schedule));
      expect(actual).toBe(expected);
      // Windows tile the period exactly.
      expect(schedule.windows.reduce((sum, w) => sum + w.lengthUs, 0)).toBe(schedule.periodUs);
    });
  }
});

describe('schedule', () => {
  it('shows plain shares while the windows use window shares: 20:1 reads 95.24/4.76, its windows are 362/38 ms', () => {
    const schedule = scheduleFor([20, 1]);
    expect(schedule.windows.map((w) => Number((w.share * 100).toFixed(2)))).toEqual([95.24, 4.76]);
    expect(schedule.windows.map((w) => Number((w.windowShare * 100).toFixed(2)))).toEqual([90.5, 9.5]);
    expect(schedule.periodUs).toBe(400_000);
    expect(schedule.windows.map((w) => w.lengthUs)).toEqual([361_991, 38_009]);
    // The stall bound is the period less the peer's own window, not (1 − share) · period (381 ms).
    expect(stallBoundUs(schedule, 1)).toBe(361_991);
    expect(stallBoundUs(schedule, 0)).toBe(38_009);
  });

  it('16 peers weighted 8 … 0.1: shares stay proportional to weights, windows 14.77 / 7.39 / 13 × 5.42 %', () => {
    const weights = [8, 4, 4, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0.5, 0.5, 0.25, 0.1];
    const schedule = scheduleFor(weights);
    for (const [i, w] of schedule.windows.entries()) expect(w.share).toBeCloseTo((weights[i] ?? 0) / 29.35, 12);
    expect(schedule.windows.map((w) => Number((w.windowShare * 100).toFixed(2)))).toEqual([14.77, 7.39, 7.39, ...new Array<number>(13).fill(5.42)]);
    // The period comes from the smallest window share: 40 ms / 5.42 % is past the 400 ms cap.
    expect(schedule.periodUs).toBe(400_000);
  });

  it('clamps the period to [80, 400] ms around 40 ms / min_window_share', () => {
    expect(periodFor(1)).toBe(80_000);
    expect(periodFor(1 / 3)).toBe(120_000);
    expect(periodFor(0.1)).toBe(400_000);
    expect(periodFor(1 / 16)).toBe(400_000);
  });

  it('orders windows by slot index, not by weight or input order', () => {
    const schedule = buildSchedule([
      { slot: 7, share: 0.25 },
      { slot: 2, share: 0.5 },
      { slot: 4, share: 0.25 },
    ]);
    expect(schedule.windows.map((w) => [w.slot, w.startUs, w.lengthUs])).toEqual([
      [2, 0, 80_000],
      [4, 80_000, 40_000],
      [7, 120_000, 40_000],
    ]);
  });

  it('answers "in my window?" and "how long until it?" from the wall clock', () => {
    const schedule = scheduleFor([2, 1]); // period 120 ms: slot 0 [0, 80), slot 1 [80, 120)
    const base = 1_800_000_000_080_000 - (1_800_000_000_080_000 % 120_000); // a period boundary
    expect(inWindow(schedule, 0, base)).toBe(true);
    expect(inWindow(schedule, 1, base)).toBe(false);
    expect(usUntilWindow(schedule, 1, base)).toBe(80_000);
    expect(usUntilWindow(schedule, 1, base + 79_999)).toBe(1);
    expect(usUntilWindow(schedule, 1, base + 80_000)).toBe(0);
    expect(usUntilWindow(schedule, 0, base + 80_000)).toBe(40_000);
    expect(usUntilWindowEnd(schedule, 0, base + 30_000)).toBe(50_000);
    expect(ownerAt(schedule, base + 119_999)).toBe(1);
    expect(ownerAt(schedule, base + 120_000)).toBe(0);
    expect(stallBoundUs(schedule, 0)).toBe(40_000);
    expect(stallBoundUs(schedule, 1)).toBe(80_000);
  });

  it('has no window for a peer that is not active, and none at all when nobody is', () => {
    const schedule = buildSchedule([{ slot: 0, share: 1 }]);
    expect(usUntilWindow(schedule, 3, 0)).toBeNull();
    expect(inWindow(schedule, 3, 0)).toBe(false);
    expect(buildSchedule([]).windows).toEqual([]);
  });
});
