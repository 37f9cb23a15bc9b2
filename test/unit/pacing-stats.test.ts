import { describe, expect, it } from 'vitest';
import { costByWindowPosition } from '../../test/bench/pacing-stats.js';

// 2:1 over a 120 ms period: slot 0 owns [0, 80) ms, slot 1 [80, 120) ms.
const schedule = { periodUs: 120_000, windows: [{ slot: 0, startUs: 0, lengthUs: 80_000 }, { slot: 1, startUs: 80_000, lengthUs: 40_000 }] };

describe('costByWindowPosition', () => {
  it('separates the first token of a window (from its start) from the second and the rest', () => {
    // Slot 1's windows: its first token 9 ms after the start, then every 6 ms.
    const tokens: number[] = [];
    for (let p = 0; p < 10; p++) for (const at of [9, 15, 21, 27, 33, 39]) tokens.push(p * 120_000 + 80_000 + at * 1000);
    const cost = costByWindowPosition(tokens, schedule, 1, 0, 1_200_000);
    expect(cost).toEqual({ first: 9, second: 6, rest: 6, perWindow: 6 });
  });

  it("counts only whole windows inside the interval and only the slot's own windows", () => {
    const tokens = [5_000, 10_000, 15_000, 85_000, 125_000, 130_000];
    // From 100 ms: slot 0's first whole window is [120, 200) ms.
    expect(costByWindowPosition(tokens, schedule, 0, 100_000, 240_000)).toEqual({ first: 5, second: 5, rest: null, perWindow: 2 });
    // Slot 1's only whole window there, [200, 240) ms, holds no token.
    expect(costByWindowPosition(tokens, schedule, 1, 100_000, 240_000)).toEqual({ first: null, second: null, rest: null, perWindow: 0 });
  });

  it('knows nothing of a slot without a window', () => {
    expect(costByWindowPosition([1, 2, 3], schedule, 5, 0, 1e6)).toEqual({ first: null, second: null, rest: null, perWindow: null });
  });
});
