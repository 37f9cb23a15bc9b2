import { describe, expect, it } from 'vitest';
import type { ScheduleView } from '../../../electron/core/contract.js';
import { buildSchedule } from '../../../electron/core/pacer/schedule.js';
import {
  AXIS_HEIGHT,
  axisTicks,
  buildTimeline,
  coreClockOffsetUs,
  debugView,
  FpsMeter,
  hitTest,
  MIN_TICK_SPACING,
  overshootSummary,
  SAMPLE_HOLD_US,
  timeAt,
  TIMELINE_SPAN_US,
  TIMELINE_SPANS_US,
  xOf,
  type TimelineSample,
} from './timeline-model.js';

const NOW = 1_700_000_000_000_000; // a multiple of 80 ms and 100 ms periods
const W = 1000;
const H = 208;

/** A ScheduleView from the core's own schedule function. */
function scheduleView(shares: { slot: number; share: number }[]): ScheduleView {
  const schedule = buildSchedule(shares);
  return {
    periodUs: schedule.periodUs,
    windows: schedule.windows.map((w) => ({ slot: w.slot, startUs: w.startUs, lengthUs: w.lengthUs, share: w.share, stallBoundUs: schedule.periodUs - w.lengthUs })),
  };
}

const sample = (wallUs: number, schedule: ScheduleView | null, peers: TimelineSample['peers']): TimelineSample => ({ wallUs, receivedAtMs: 0, peers, schedule });

const twoPeers = scheduleView([
  { slot: 1, share: 0.75 },
  { slot: 3, share: 0.25 },
]);
const peers = [
  { slot: 1, name: 'chat', active: true, busyPct: 100, sharePct: 75 },
  { slot: 3, name: 'coder', active: true, busyPct: 50, sharePct: 25 },
];

/** Samples every 250 ms over the last `seconds`. */
const steady = (seconds: number, schedule: ScheduleView | null = twoPeers): TimelineSample[] =>
  Array.from({ length: seconds * 4 + 1 }, (_, i) => sample(NOW - seconds * 1_000_000 + i * 250_000, schedule, peers));

describe('transform', () => {
  const t = { nowUs: NOW, spanUs: TIMELINE_SPAN_US, width: W };
  it('puts now at the right edge and now − 10 s at the left', () => {
    expect(xOf(NOW, t)).toBe(W);
    expect(xOf(NOW - TIMELINE_SPAN_US, t)).toBe(0);
    expect(xOf(NOW - 2_500_000, t)).toBe(750);
  });
  it('inverts', () => {
    for (const x of [0, 1, 333.5, 999, 1000]) expect(xOf(timeAt(x, t), t)).toBeCloseTo(x, 6);
  });
});

describe('buildTimeline', () => {
  it('draws the same from samples out of order as in order (they are sorted only when needed)', () => {
    const inOrder = steady(12);
    const shuffled = [...inOrder.slice(20), ...inOrder.slice(0, 20).reverse()];
    const options = { nowUs: NOW, width: W, height: H };
    expect(buildTimeline(shuffled, options)).toEqual(buildTimeline(inOrder, options));
    expect(shuffled[0]).toBe(inOrder[20]); // the caller's array is left as it was
  });

  it('draws one window per peer per period over the last 10 s, in its lane', () => {
    // the period for shares 0.75/0.25 is 160 ms: 10 s hold 62.5 periods
    expect(twoPeers.periodUs).toBe(160_000);
    const model = buildTimeline(steady(12), { nowUs: NOW, width: W, height: H });
    const windows = model.rects.filter((r) => r.kind === 'window');
    const bySlot = (slot: number): typeof windows => windows.filter((r) => r.slot === slot);
    // NOW is a period boundary; the left edge is 10 s = 62.5 periods back, i.e. in the middle of
    // a period: slot 1's window (first 120 ms) is clipped there, slot 3's (last 40 ms) is whole.
    expect(bySlot(1)).toHaveLength(63);
    expect(bySlot(3)).toHaveLength(63);
    expect(model.lanes.map((l) => [l.slot, l.name])).toEqual([
      [1, 'chat'],
      [3, 'coder'],
    ]);
    const [lane1, lane3] = model.lanes;
    expect(bySlot(1).every((r) => r.y === lane1?.top && r.h === lane1.height)).toBe(true);
    expect(bySlot(3).every((r) => r.y === lane3?.top)).toBe(true);
    // Nothing outside the canvas; the windows of one lane never overlap.
    for (const r of model.rects) {
      expect(r.x).toBeGreaterThanOrEqual(-1e-9);
      expect(r.x + r.w).toBeLessThanOrEqual(W + 1e-9);
    }
    // Whole windows are 120 ms and 40 ms: 12 px and 4 px at 10 s per 1000 px.
    expect(bySlot(1)[5]?.w).toBeCloseTo(12, 6);
    expect(bySlot(3)[5]?.w).toBeCloseTo(4, 6);
    // Windows follow wallUs mod period: slot 1 starts on every period boundary.
    for (const r of bySlot(1).slice(1)) expect(Math.abs((r.startUs - NOW) % twoPeers.periodUs)).toBe(0);
    // Boundaries at now − 9.92 s … now − 0.16 s (now itself is the right edge, not drawn).
    expect(model.periodLines).toHaveLength(62);
  });

  it('stacks lanes from the top, at most 64 px tall, with a gap', () => {
    const tall = buildTimeline(steady(2), { nowUs: NOW, width: W, height: 600 });
    expect(tall.lanes.map((l) => [l.top, l.height])).toEqual([
      [0, 64],
      [68, 64],
    ]);
    const short = buildTimeline(steady(2), { nowUs: NOW, width: W, height: 100 });
    expect(short.lanes.map((l) => l.height)).toEqual([48, 48]);
  });

  it('clips at the 10 s edge', () => {
    const model = buildTimeline(steady(12), { nowUs: NOW, width: W, height: H });
    const leftmost = model.rects.filter((r) => r.kind === 'window' && r.slot === 1).sort((a, b) => a.x - b.x)[0];
    // The period starting at NOW − 10.08 s: its window would run to NOW − 9.96 s; only the last
    // 40 ms are visible.
    expect(leftmost?.x).toBe(0);
    expect(leftmost?.startUs).toBe(NOW - TIMELINE_SPAN_US);
    expect(leftmost?.w).toBeCloseTo(4, 6);
  });

  it('draws ran blocks as busy % of each window', () => {
    const model = buildTimeline(steady(12), { nowUs: NOW, width: W, height: H });
    const ran = (slot: number): number[] =>
      model.rects
        .filter((r) => r.kind === 'ran' && r.slot === slot)
        .slice(3, 6)
        .map((r) => r.endUs - r.startUs);
    expect(ran(1)).toEqual([120_000, 120_000, 120_000]);
    expect(ran(3)).toEqual([20_000, 20_000, 20_000]);
    // Ran blocks are painted after (over) the windows.
    const firstRan = model.rects.findIndex((r) => r.kind === 'ran');
    expect(model.rects.slice(firstRan).every((r) => r.kind === 'ran')).toBe(true);
  });

  it('draws no ran block for an idle peer and no window without a schedule', () => {
    const idle = [
      { slot: 1, name: 'chat', active: true, busyPct: 100, sharePct: 100 },
      { slot: 3, name: 'coder', active: false, busyPct: 90, sharePct: 0 },
    ];
    const model = buildTimeline([sample(NOW - 1_000_000, twoPeers, idle)], { nowUs: NOW, width: W, height: H });
    expect(model.rects.filter((r) => r.kind === 'ran' && r.slot === 3)).toHaveLength(0);
    expect(model.rects.filter((r) => r.kind === 'ran' && r.slot === 1).length).toBeGreaterThan(0);

    const none = buildTimeline([sample(NOW - 1_000_000, null, idle)], { nowUs: NOW, width: W, height: H });
    expect(none.rects).toEqual([]);
    expect(none.lanes).toHaveLength(2);
    expect(none.current).toBeNull();
  });

  it('follows a schedule change at the sample that brought it', () => {
    const alone = scheduleView([{ slot: 1, share: 1 }]);
    const changeAt = NOW - 4_000_000;
    const samples = [...steady(12, alone).filter((s) => s.wallUs < changeAt), ...steady(4, twoPeers)];
    const model = buildTimeline(samples, { nowUs: NOW, width: W, height: H });
    const slot3 = model.rects.filter((r) => r.kind === 'window' && r.slot === 3);
    expect(Math.min(...slot3.map((r) => r.startUs))).toBeGreaterThanOrEqual(changeAt);
    const before = model.rects.filter((r) => r.kind === 'window' && r.slot === 1 && r.endUs <= changeAt);
    // alone the window is the whole 80 ms period
    expect(before.slice(2, 4).map((r) => r.endUs - r.startUs)).toEqual([80_000, 80_000]);
    expect(model.current).toBe(twoPeers);
  });

  it('shows nothing for a gap in the samples longer than the hold', () => {
    const samples = [sample(NOW - 9_000_000, twoPeers, peers), sample(NOW - 1_000_000, twoPeers, peers)];
    const model = buildTimeline(samples, { nowUs: NOW, width: W, height: H });
    const covered = (t: number): boolean => model.rects.some((r) => r.startUs <= t && t < r.endUs);
    expect(covered(NOW - 9_000_000 + SAMPLE_HOLD_US - 50_000)).toBe(true);
    expect(covered(NOW - 5_000_000)).toBe(false);
    expect(covered(NOW - 500_000)).toBe(true);
  });

  it('scales with the canvas and ignores samples from the future', () => {
    const half = buildTimeline(steady(12), { nowUs: NOW, width: 500, height: 100 });
    expect(half.rects.filter((r) => r.kind === 'window' && r.slot === 1)[5]?.w).toBeCloseTo(6, 6);
    const future = buildTimeline([sample(NOW + 1_000_000, twoPeers, peers)], { nowUs: NOW, width: W, height: H });
    expect(future.rects).toEqual([]);
  });
});

describe('hitTest and debugView', () => {
  const model = buildTimeline(steady(12), { nowUs: NOW, width: W, height: H });
  it('finds the window under the pointer with its stall bound', () => {
    const lane3 = model.lanes[1];
    if (lane3 === undefined) throw new Error('no lane');
    // slot 3's window is the last 40 ms of each period: the 4 px before a boundary.
    const hit = hitTest(model, W - 2, lane3.top + 1);
    expect(hit).toEqual({ slot: 3, name: 'coder', startUs: NOW - 40_000, agoUs: 40_000, lengthUs: 40_000, share: 0.25, stallBoundUs: 120_000, periodUs: 160_000, busyPct: 50 });
    expect(hitTest(model, W - 14, lane3.top + 1)).toBeNull();
    expect(hitTest(model, W - 2, H + 10)).toBeNull();
  });

  it('counts windows per slot for the end-to-end check', () => {
    const debug = debugView(model, 58, 1234);
    expect(debug.windowsPerSlot).toEqual({ '1': 63, '3': 63 });
    expect(debug.ranPerSlot['3']).toBe(63);
    expect(debug.periodUs).toBe(160_000);
    expect(debug.fps).toBe(58);
    expect(debug.lanes.map((lane) => ({ slot: lane.slot, name: lane.name }))).toEqual([
      { slot: 1, name: 'chat' },
      { slot: 3, name: 'coder' },
    ]);
  });
});

describe('clock and fps', () => {
  it('estimates the core clock from the fastest sample', () => {
    const samples = [
      { wallUs: 1_000_000, receivedAtMs: 5_020 }, // 20 ms late
      { wallUs: 1_250_000, receivedAtMs: 5_253 }, // 3 ms late: the best
      { wallUs: 1_500_000, receivedAtMs: 5_540 },
    ];
    expect(coreClockOffsetUs(samples)).toBe(5_253_000 - 1_250_000);
    expect(coreClockOffsetUs([])).toBeNull();
  });

  it('counts frames in the last second', () => {
    const meter = new FpsMeter();
    for (let t = 0; t <= 2000; t += 16) meter.frame(t);
    expect(meter.fps()).toBeGreaterThanOrEqual(62);
    expect(meter.fps()).toBeLessThanOrEqual(63);
    meter.frame(4000);
    expect(meter.fps()).toBe(1);
  });
});

describe('overshootSummary', () => {
  it('gives the worst and the 95th percentile of the reported overshoots', () => {
    const values = Array.from({ length: 100 }, (_, i) => (i + 1) * 10);
    expect(overshootSummary(values)).toEqual({ windows: 100, maxUs: 1000, p95Us: 950 });
    expect(overshootSummary([300, Number.NaN, -1])).toEqual({ windows: 1, maxUs: 300, p95Us: 300 });
    expect(overshootSummary([])).toBeNull();
  });
});

describe('the lanes and the axis', () => {
  it('keeps every lane and everything drawn above the axis, whatever the height', () => {
    for (const height of [60, 152, 481, 900]) {
      const model = buildTimeline(steady(12), { nowUs: NOW, width: W, height, axisHeight: AXIS_HEIGHT });
      expect(model.lanesBottom).toBe(height - AXIS_HEIGHT);
      for (const lane of model.lanes) expect(lane.top + lane.height).toBeLessThanOrEqual(model.lanesBottom + 1e-9);
      for (const rect of model.rects) {
        expect(rect.y + rect.h).toBeLessThanOrEqual(model.lanesBottom + 1e-9);
        expect(rect.x).toBeGreaterThanOrEqual(-1e-9);
        expect(rect.x + rect.w).toBeLessThanOrEqual(W + 1e-9);
      }
      expect(debugView(model, 60, 0).drawnBottom).toBeLessThanOrEqual(model.lanesBottom + 1e-9);
    }
  });

  it('gives each lane its peer\'s share', () => {
    const model = buildTimeline(steady(12), { nowUs: NOW, width: W, height: H });
    expect(model.lanes.map((lane) => [lane.slot, lane.sharePct])).toEqual([[1, 75], [3, 25]]);
  });

  it('labels round ticks back from now, at least MIN_TICK_SPACING apart, for every zoom and width', () => {
    expect(axisTicks({ nowUs: NOW, spanUs: 10_000_000, width: 1000 }).map((t) => t.label)).toEqual(['now', '−1 s', '−2 s', '−3 s', '−4 s', '−5 s', '−6 s', '−7 s', '−8 s', '−9 s', '−10 s']);
    expect(axisTicks({ nowUs: NOW, spanUs: 2_000_000, width: 600 }).map((t) => t.label)).toEqual(['now', '−250 ms', '−500 ms', '−750 ms', '−1 s', '−1.25 s', '−1.5 s', '−1.75 s', '−2 s']);
    expect(axisTicks({ nowUs: NOW, spanUs: 60_000_000, width: 500 }).map((t) => t.label)).toEqual(['now', '−10 s', '−20 s', '−30 s', '−40 s', '−50 s', '−60 s']);
    for (const spanUs of TIMELINE_SPANS_US) {
      for (const width of [300, 640, 1200, 1800]) {
        const ticks = axisTicks({ nowUs: NOW, spanUs, width });
        expect(ticks[0]?.x).toBe(width);
        for (let i = 1; i < ticks.length; i++) expect((ticks[i - 1]?.x ?? 0) - (ticks[i]?.x ?? 0)).toBeGreaterThanOrEqual(MIN_TICK_SPACING - 1e-9);
        for (const tick of ticks) expect(tick.x).toBeGreaterThanOrEqual(-1e-6);
      }
    }
    expect(axisTicks({ nowUs: NOW, spanUs: 10_000_000, width: 0 })).toEqual([]);
  });

  it('draws a 2 s zoom with wider windows than 10 s, and a 60 s one over a minute of history', () => {
    const history = steady(70);
    const at = (spanUs: number) => buildTimeline(history, { nowUs: NOW, width: W, height: H, spanUs });
    const width = (spanUs: number) => at(spanUs).rects.find((r) => r.kind === 'window' && r.slot === 1 && r.x > 10 && r.x < W - 200)?.w ?? 0;
    expect(width(2_000_000)).toBeCloseTo(5 * width(10_000_000), 6);
    expect(debugView(at(60_000_000), 0, 0).windowsPerSlot['1']).toBeGreaterThanOrEqual(Math.floor(60_000_000 / twoPeers.periodUs));
  });
});
