import { describe, expect, it } from 'vitest';
import { blockFigures, costByWindowPosition, rate, serveBlocks, splitOf, stepEndsUs, rateOverWholeRequests, releasedAtUs, tokensBetweenPieces, windowStartCost, type StreamedRequest } from '../../test/bench/pacing-stats.js';

// 2:1 over a 120 ms period: slot 0 owns [0, 80) ms, slot 1 [80, 120) ms.
const schedule = { periodUs: 120_000, windows: [{ slot: 0, startUs: 0, lengthUs: 80_000 }, { slot: 1, startUs: 80_000, lengthUs: 40_000 }] };

describe('costByWindowPosition', () => {
  it('separates the first token of a window (from its start) from the second and the rest', () => {
    // Slot 1's windows: its first token 9 ms after the start, then every 6 ms.
    const tokens: number[] = [];
    for (let p = 0; p < 10; p++) for (const at of [9, 15, 21, 27, 33, 39]) tokens.push(p * 120_000 + 80_000 + at * 1000);
    const cost = costByWindowPosition(tokens, schedule, 1, 0, 1_200_000);
    expect(cost).toEqual({ first: 9, second: 6, rest: 6, perWindow: 6, start: 4, startToNext: 4 });
  });

  it("counts only whole windows inside the interval and only the slot's own windows", () => {
    const tokens = [5_000, 10_000, 15_000, 85_000, 125_000, 130_000];
    // From 100 ms: slot 0's first whole window is [120, 200) ms.
    expect(costByWindowPosition(tokens, schedule, 0, 100_000, 240_000)).toEqual({ first: 5, second: 5, rest: null, perWindow: 2, start: null, startToNext: null });
    // Slot 1's only whole window there, [200, 240) ms, holds no token.
    expect(costByWindowPosition(tokens, schedule, 1, 100_000, 240_000)).toEqual({ first: null, second: null, rest: null, perWindow: 0, start: null, startToNext: null });
  });

  it("reads a window's start cost at its own cadence, whatever the cadence of the others and however its tokens bunch", () => {
    // Slot 1's windows alternate between a fast machine (2 ms tokens, the first 7 ms in) and a slow
    // one (5 ms tokens, the first 10 ms in), whose tokens arrive in pairs (text held back, then sent).
    const tokens: number[] = [];
    for (let p = 0; p < 10; p++) {
      const start = p * 120_000 + 80_000;
      const arrivals = p % 2 === 0 ? Array.from({ length: 17 }, (_, k) => 7 + 2 * k) : [10, 15, 25, 25, 35, 35];
      for (const at of arrivals) tokens.push(start + at * 1000);
    }
    const cost = costByWindowPosition(tokens, schedule, 1, 0, 1_200_000);
    // Fast: 40 − 17·2 = 6 ms; slow: 40 − 6·5 = 10 ms (5 ms from its second token to its last, a
    // token at a time). The median of the ten windows: 8.
    expect(cost.start).toBe(8);
    // Over the run the median gap is 2 ms (the pairs' zero gaps pull the slow windows' down): the
    // mean window's 11.5 tokens at 2 ms would have read 17 ms.
    expect(cost.rest).toBe(2);
  });

  it("counts up to the window's next start its tokens that reach the client after its end or were decoded past it", () => {
    // Slot 1's windows [80, 120) ms: a token decoded every 6 ms from 8 ms in (starting cost 2 ms),
    // each reaching the client 2.5 ms later; the one decoded at 38 ms arrives 0.5 ms past the end.
    const late: number[] = [];
    for (let p = 0; p < 10; p++) for (let k = 0; k < 6; k++) late.push(p * 120_000 + 80_000 + (8 + 6 * k + 2.5) * 1000);
    // In the window: 5 tokens, 40 − 5·6 = 10 ms; to the next start all 6: 40 − 36 = 4 ms.
    expect(costByWindowPosition(late, schedule, 1, 0, 1_200_000)).toMatchObject({ perWindow: 5, start: 10, startToNext: 4 });
    // A gate that lets the last step go with half of it left: tokens at 7, 13, … 37 ms and the last
    // at 43 ms, 3 ms past the end. In the window its 3 ms inside read as lost (40 − 36 = 4); to the
    // next start the step counts whole (40 − 42 = −2), the 3 ms it took from the next window with it.
    const overrun: number[] = [];
    for (let p = 0; p < 10; p++) for (let k = 0; k < 7; k++) overrun.push(p * 120_000 + 80_000 + (7 + 6 * k) * 1000);
    expect(costByWindowPosition(overrun, schedule, 1, 0, 1_200_000)).toMatchObject({ perWindow: 6, start: 4, startToNext: -2 });
  });

  it("from a built-in engine's step log: each token where its step ended, in order, the log's other events left out", () => {
    const events = [
      { k: 'step', t: 81_000, pid: 7, mono: 1, us: 6_000 },
      { k: 'decide', t: 81_500 },
      { k: 'step', t: 93_000, pid: 7, mono: 13, us: 6_000 },
      { k: 'step', t: 87_000, pid: 7, mono: 7, us: 6_000 },
      { k: 'step', t: 99_000, pid: 7, mono: 19, us: 6_000 },
    ];
    expect(stepEndsUs(events)).toEqual([87_000, 93_000, 99_000, 105_000]);
    // Slot 1's window [80, 120) ms: the first step ends 7 ms in, then one every 6 ms.
    expect(costByWindowPosition(stepEndsUs(events), schedule, 1, 0, 120_000)).toMatchObject({ first: 7, second: 6, perWindow: 4, start: 16 });
  });

  it('knows nothing of a slot without a window', () => {
    expect(costByWindowPosition([1, 2, 3], schedule, 5, 0, 1e6)).toEqual({ first: null, second: null, rest: null, perWindow: null, start: null, startToNext: null });
  });
});

/** An engine with `share` of the device decoding back-to-back requests of `length` tokens whose
 *  cost grows by `growth` from the first token to the last, the first `headStart` tokens of its
 *  first request already decoded: its token times and request starts. */
function decode(share: number, length: number, growth: number, untilUs: number, headStart = 0): { tokens: number[]; starts: [number, number][] } {
  const tokens: number[] = [];
  const starts: [number, number][] = [];
  let at = 0;
  for (let decoded = 0; at < untilUs; decoded++) {
    const place = (decoded + headStart) % length;
    if (place === 0) starts.push([at, decoded]);
    at += (6_500 * (1 + (growth * place) / length)) / share;
    tokens.push(at);
  }
  return { tokens, starts };
}

describe('rateOverWholeRequests', () => {
  it('reads the split of time as the split of tokens where a rate over a cut interval does not', () => {
    // 2:1:1: the heavy engine gets half the device, each light one a quarter; tokens cost 31 % more
    // at the end of a 400-token request than at its start. The heavy engine decoded alone first
    // (half of its request done), the light ones start theirs at 0.
    const heavy = decode(0.5, 400, 0.31, 60e6, 200);
    const light = decode(0.25, 400, 0.31, 60e6);
    // Over 1–9 s the light engines decode the cheap first half of their first request while the
    // heavy one decodes the dear second half of its: the rate over that cut interval reads low.
    const cut = rate(heavy.tokens, 1e6, 9e6) / rate(light.tokens, 1e6, 9e6);
    expect(cut).toBeLessThan(1.95);
    const h = rateOverWholeRequests(heavy.starts, 1e6, 55e6);
    const l = rateOverWholeRequests(light.starts, 1e6, 55e6);
    expect(h?.requests).toBeGreaterThanOrEqual(6);
    expect(l?.requests).toBeGreaterThanOrEqual(2);
    expect((h?.tokps ?? 0) / (l?.tokps ?? 1)).toBeCloseTo(2, 6);
  });

  it('counts the cycles from the first start inside the interval to the last, and needs one whole cycle', () => {
    const starts: [number, number][] = [[0, 0], [2e6, 100], [5e6, 200], [7e6, 300]];
    expect(rateOverWholeRequests(starts, 1e6, 7e6)).toEqual({ tokps: 40, requests: 2 });
    expect(rateOverWholeRequests(starts, 1e6, 4e6)).toBeNull();
    expect(rateOverWholeRequests([], 0, 1e6)).toBeNull();
  });
});

describe('windowStartCost', () => {
  it('reads a fixed cost per window from the tokens a window held and the CPU they took', () => {
    // 40 ms windows, 6 ms tokens unstopped (5 ms of CPU each); every window loses 10 ms: 5 tokens.
    const cost = windowStartCost({ windowMs: 40, windows: 100, tokens: 500, cpuMs: 100 * 40 }, { msPerToken: 6, cpuMsPerToken: 5 });
    expect(cost).toEqual({ lostMsPerWindow: 10, extraCpuMsPerWindow: 15 });
  });

  it('reads nothing lost where windows hold what the unstopped rate does, and no CPU figure without one', () => {
    expect(windowStartCost({ windowMs: 40, windows: 10, tokens: 80, cpuMs: null }, { msPerToken: 5, cpuMsPerToken: null })).toEqual({ lostMsPerWindow: 0, extraCpuMsPerWindow: null });
    expect(windowStartCost({ windowMs: 40, windows: 0, tokens: 0, cpuMs: 0 }, { msPerToken: 5, cpuMsPerToken: 4 })).toBeNull();
  });
});

describe('releasedAtUs', () => {
  // Engine 0 at 2:1 (120 ms period): it runs 80 ms, is held 40 ms; 1 ms tokens.
  const paced = (fromMs: number, toMs: number): number[] => {
    const tokens: number[] = [];
    for (let t = fromMs; t < toMs; t++) if (t % 120 < 80) tokens.push(t * 1000);
    return tokens;
  };
  const free = (fromMs: number, toMs: number): number[] => Array.from({ length: toMs - fromMs }, (_, i) => (fromMs + i) * 1000);

  it('is the end of the last hold after the others stop', () => {
    // The others stop at 1,000 ms; holds go on until 2,160 ms (the activity window), then free.
    const tokens = [...paced(0, 2_160), ...free(2_160, 5_000)];
    expect(releasedAtUs(tokens, 1_000_000, 20_000, 120_000)).toBe(2_160_000);
  });

  it('does not count a stall of the machine long after the release', () => {
    const tokens = [...paced(0, 2_160), ...free(2_160, 3_000), ...free(3_200, 5_000)];
    expect(releasedAtUs(tokens, 1_000_000, 20_000, 120_000)).toBe(2_160_000);
  });

  it('reads the stop itself when the engine is never held after it', () => {
    expect(releasedAtUs(free(0, 3_000), 1_000_000, 20_000, 120_000)).toBe(1_000_000);
  });
});

describe('splitOf', () => {
  it('gives a over b to three digits, and null for a missing side or a second side that is not positive', () => {
    expect(splitOf(2, 1)).toBe(2);
    expect(splitOf(805.3, 379.7)).toBe(2.121);
    expect(splitOf(0, 5)).toBe(0);
    for (const [a, b] of [[null, 1], [1, null], [undefined, 1], [1, undefined], [1, 0], [1, -2]] as const) expect(splitOf(a, b), `${String(a)} / ${String(b)}`).toBeNull();
  });
});

describe('serveBlocks', () => {
  it('alternates blocks of both at once with blocks of one engine alone, alone at both ends', () => {
    expect(serveBlocks(8, 4).map((b) => `${b.kind} ${b.seconds}`)).toEqual(['solo 2', 'together 2', 'solo 2', 'together 2', 'solo 2', 'together 2', 'solo 2', 'together 2', 'solo 2']);
    expect(serveBlocks(10, 1).map((b) => `${b.kind} ${b.seconds}`)).toEqual(['solo 10', 'together 10', 'solo 10']);
  });
});

describe('blockFigures', () => {
  const solo = (seconds: number, heavyTokens: number) => ({ kind: 'solo' as const, seconds, heavyTokens, lightTokens: 0 });
  const together = (seconds: number, heavyTokens: number, lightTokens: number) => ({ kind: 'together' as const, seconds, heavyTokens, lightTokens });

  it('sets the blocks of both at once against the blocks alone, over all of them and each against its neighbours', () => {
    // The machine slows down for the middle blocks: alone 1,000 → 800 → 1,000 tok/s; together
    // 95 % of the solo blocks beside each block.
    const figures = blockFigures([solo(2, 2_000), together(2, 1_140, 570), solo(2, 1_600), together(2, 1_140, 570), solo(2, 2_000)]);
    expect(figures.soloBlocksTokps).toEqual([1_000, 800, 1_000]);
    expect(figures.togetherTokps).toEqual([570, 285]);
    expect(figures.togetherBlocksPct).toEqual([95, 95]);
    // Over all blocks: 855 tok/s together against 933.3 alone.
    expect(figures.aggregatePctOfSolo).toBe(91.6);
    expect(figures.soloTokps).toBeCloseTo(933.33, 2);
  });

  it('weighs each block by its own length', () => {
    const figures = blockFigures([solo(1, 1_000), together(3, 1_800, 900), solo(1, 1_000)]);
    expect(figures.soloTokps).toBe(1_000);
    expect(figures.togetherTokps).toEqual([600, 300]);
    expect(figures.aggregatePctOfSolo).toBe(90);
  });

  it('says what is missing when there is no block alone or none together', () => {
    expect(() => blockFigures([together(2, 100, 50)])).toThrow('blockFigures: needs time alone and together (got 0 s and 2 s)');
    expect(() => blockFigures([solo(2, 100)])).toThrow('blockFigures: needs time alone and together (got 2 s and 0 s)');
    expect(() => blockFigures([solo(2, 0), together(2, 100, 50), solo(2, 0)])).toThrow('blockFigures: the weight-2 engine made no tokens alone in 4 s');
  });
});

describe('tokensBetweenPieces', () => {
  // Two finished requests of 8 and 6 tokens in 4 and 3 pieces (some pieces held several tokens),
  // then one cut off after 2 pieces.
  const requests: StreamedRequest[] = [
    { piecesUs: [10, 20, 30, 40], tokens: 8, endUs: 41 },
    { piecesUs: [50, 60, 70], tokens: 6, endUs: 71 },
    { piecesUs: [80, 90], tokens: null, endUs: null },
  ];

  it("spreads a finished request's usage over its pieces instead of counting it at the end", () => {
    expect(tokensBetweenPieces(requests, 15, 35)).toBe(4);
    // A piece counts one token and the rest of the request would land at its end (41): 2 + 0.
    expect(tokensBetweenPieces(requests, 41, 50)).toBe(0);
    expect(tokensBetweenPieces(requests, 0, 50)).toBe(8);
  });

  it('counts a cut-off request at the mean tokens a piece of the finished ones', () => {
    // 14 tokens over 7 pieces: 2 a piece.
    expect(tokensBetweenPieces(requests, 75, 100)).toBe(4);
    expect(tokensBetweenPieces([{ piecesUs: [1, 2, 3], tokens: null, endUs: null }], 0, 10)).toBe(3);
  });

  it('splits the whole into adjacent intervals without counting a piece twice', () => {
    const whole = tokensBetweenPieces(requests, 0, 100);
    expect(whole).toBe(18);
    expect(tokensBetweenPieces(requests, 0, 50) + tokensBetweenPieces(requests, 50, 100)).toBe(whole);
    expect(tokensBetweenPieces(requests, 0, 60) + tokensBetweenPieces(requests, 60, 100)).toBe(whole);
  });

  it('counts a finished request without pieces at its end', () => {
    const silent: StreamedRequest[] = [{ piecesUs: [], tokens: 5, endUs: 30 }];
    expect(tokensBetweenPieces(silent, 0, 30)).toBe(0);
    expect(tokensBetweenPieces(silent, 30, 31)).toBe(5);
  });
});
