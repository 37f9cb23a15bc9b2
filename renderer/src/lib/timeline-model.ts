/**
 * The timeline as data: which rectangles and lines to paint for the last 10 s, given the state
 * samples received. Pure, so that the geometry is unit-tested and the canvas only paints.
 *
 * Time flows right to left: the right edge is now (on the core's wall clock), the left edge is
 * now − 10 s. One lane per peer, in slot order.
 *
 * - Light blocks: the schedule's windows. The schedule is a pure function of the registry and the
 *   wall clock (position in the period = wallUs mod periodUs), so every window repeats every
 *   period, and the sample that opens an interval tells which schedule held during it.
 * - Solid blocks: when the peer really ran. The core sends no per-token trace, only each peer's
 *   measured busy fraction with every state sample; so a peer that was active with busy b % in a
 *   sample is drawn as running for the first b % of each of its windows until the next sample
 *   (a peer runs from the start of its window until its work for the window is done). It is a
 *   faithful picture of how much of each window was used, not of the exact instants.
 * - A sample stands for at most SAMPLE_HOLD_US: after a gap in the stream the timeline shows
 *   nothing rather than a guess.
 */
import type { ScheduleView, ScheduleWindowView } from '../../../electron/core/contract.js';

export const TIMELINE_SPAN_US = 10_000_000;
/** The zoom levels: the last 2 s (windows readable at a ~90 ms period), 10 s, a minute. */
export const TIMELINE_SPANS_US: readonly number[] = [2_000_000, TIMELINE_SPAN_US, 60_000_000];
/** The longest span: the history the dashboard keeps. */
export const MAX_TIMELINE_SPAN_US = 60_000_000;
export const SAMPLE_HOLD_US = 2_000_000;
/** Height of the time axis under the lanes, px. */
export const AXIS_HEIGHT = 22;
/** Labelled ticks at least this far apart, px. */
export const MIN_TICK_SPACING = 64;

export interface SamplePeer {
  slot: number;
  name: string;
  active: boolean;
  busyPct: number;
  /** Its share of the device, 0–100 (0 when idle). */
  sharePct: number;
}

/** One `state` event as the timeline keeps it. */
export interface TimelineSample {
  /** The core's wall µs when the state was taken. */
  wallUs: number;
  /** The renderer's performance.now() (ms) when it arrived: ties the two clocks together. */
  receivedAtMs: number;
  peers: SamplePeer[];
  schedule: ScheduleView | null;
}

export interface Transform {
  nowUs: number;
  spanUs: number;
  width: number;
}

/** World time (wall µs) → x in pixels: now at the right edge, now − span at 0. */
export function xOf(t: number, transform: Transform): number {
  return transform.width - ((transform.nowUs - t) / transform.spanUs) * transform.width;
}

/** x in pixels → world time (wall µs). */
export function timeAt(x: number, transform: Transform): number {
  return transform.nowUs - ((transform.width - x) / transform.width) * transform.spanUs;
}

export interface Lane {
  slot: number;
  name: string;
  top: number;
  height: number;
  /** Its share in the newest sample that lists it, 0–100. */
  sharePct: number;
}

/** A labelled tick of the time axis: "now", "−2 s", "−500 ms". */
export interface AxisTick {
  x: number;
  /** µs before now. */
  agoUs: number;
  label: string;
}

export interface TimelineRect {
  kind: 'window' | 'ran';
  slot: number;
  x: number;
  y: number;
  w: number;
  h: number;
  startUs: number;
  endUs: number;
  window: ScheduleWindowView;
  periodUs: number;
  /** The busy % the "ran" block (and the hover) is derived from. */
  busyPct: number;
}

export interface TimelineModel {
  transform: Transform;
  height: number;
  /** Where the lanes end and the axis begins: nothing of the lanes is drawn below it. */
  lanesBottom: number;
  lanes: Lane[];
  ticks: AxisTick[];
  /** Windows first, then the ran blocks over them: paint in order. */
  rects: TimelineRect[];
  /** x of each period boundary inside the covered time. */
  periodLines: number[];
  /** The schedule that holds at now (the newest sample's), or null. */
  current: ScheduleView | null;
}

export interface TimelineOptions {
  nowUs: number;
  width: number;
  height: number;
  spanUs?: number;
  /** Vertical gap between lanes, px. */
  laneGap?: number;
  /** Lanes grow to fill the height up to this, px (two peers need not be 200 px tall). */
  maxLaneHeight?: number;
  /** Room for the time axis under the lanes, px (0: no axis). */
  axisHeight?: number;
}

const TICK_STEPS_US: readonly number[] = [100_000, 250_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 15_000_000, 30_000_000, 60_000_000];

function tickLabel(agoUs: number): string {
  if (agoUs === 0) return 'now';
  return agoUs < 1_000_000 ? `−${Math.round(agoUs / 1000)} ms` : `−${Number((agoUs / 1e6).toFixed(2))} s`;
}

/** Labelled ticks counted back from now (so they stand still while time flows under them), the
 *  smallest round step that keeps labels MIN_TICK_SPACING apart. Pure. */
export function axisTicks(transform: Transform): AxisTick[] {
  if (!(transform.width > 0) || !(transform.spanUs > 0)) return [];
  const pxPerUs = transform.width / transform.spanUs;
  const step = TICK_STEPS_US.find((us) => us * pxPerUs >= MIN_TICK_SPACING) ?? transform.spanUs;
  const ticks: AxisTick[] = [];
  for (let agoUs = 0; agoUs <= transform.spanUs + 1e-6; agoUs += step) ticks.push({ x: transform.width - agoUs * pxPerUs, agoUs, label: tickLabel(agoUs) });
  return ticks;
}

export const MAX_LANE_HEIGHT = 64;

/**
 * The core's wall clock as seen from the renderer: offset = performance-clock µs − core µs for
 * each sample; the smallest offset is the sample that travelled fastest, so it is the best
 * estimate (network and event-loop delays only ever add). Core now = performance.now()·1000 −
 * offset.
 */
export function coreClockOffsetUs(samples: readonly Pick<TimelineSample, 'wallUs' | 'receivedAtMs'>[]): number | null {
  let best: number | null = null;
  for (const sample of samples) {
    const offset = sample.receivedAtMs * 1000 - sample.wallUs;
    if (Number.isFinite(offset) && (best === null || offset < best)) best = offset;
  }
  return best;
}

const validSchedule = (schedule: ScheduleView | null): schedule is ScheduleView =>
  schedule !== null && Number.isFinite(schedule.periodUs) && schedule.periodUs > 0 && schedule.windows.length > 0;

function sameSchedule(a: ScheduleView, b: ScheduleView): boolean {
  if (a === b) return true;
  if (a.periodUs !== b.periodUs || a.windows.length !== b.windows.length) return false;
  return a.windows.every((w, i) => {
    const v = b.windows[i];
    return v !== undefined && w.slot === v.slot && w.startUs === v.startUs && w.lengthUs === v.lengthUs;
  });
}

export function buildTimeline(samples: readonly TimelineSample[], options: TimelineOptions): TimelineModel {
  const spanUs = options.spanUs ?? TIMELINE_SPAN_US;
  const width = Math.max(0, options.width);
  const height = Math.max(0, options.height);
  const lanesBottom = Math.max(0, height - Math.max(0, options.axisHeight ?? 0));
  const transform: Transform = { nowUs: options.nowUs, spanUs, width };
  const visibleStart = options.nowUs - spanUs;
  const visibleEnd = options.nowUs;
  // Samples arrive in time order, so the history is normally sorted already: check (O(n)) before
  // sorting at every frame.
  const finite = samples.filter((s) => Number.isFinite(s.wallUs));
  const sorted = finite.every((s, i) => i === 0 || (finite[i - 1]?.wallUs ?? 0) <= s.wallUs) ? finite : finite.sort((a, b) => a.wallUs - b.wallUs);

  // Each sample's interval: from its time to the next sample, at most SAMPLE_HOLD_US, never
  // past now; kept when it overlaps the visible range.
  const intervals: { sample: TimelineSample; from: number; to: number }[] = [];
  sorted.forEach((sample, i) => {
    const next = sorted[i + 1];
    const end = Math.min(next === undefined ? Number.POSITIVE_INFINITY : next.wallUs, sample.wallUs + SAMPLE_HOLD_US, visibleEnd);
    const from = Math.max(sample.wallUs, visibleStart);
    if (end > from) intervals.push({ sample, from, to: end });
  });

  // Lanes: every peer present in a visible sample, named as in the newest one.
  const names = new Map<number, { name: string; sharePct: number }>();
  for (const { sample } of intervals) for (const peer of sample.peers) names.set(peer.slot, { name: peer.name, sharePct: Number.isFinite(peer.sharePct) ? peer.sharePct : 0 });
  const slots = [...names.keys()].sort((a, b) => a - b);
  const gap = options.laneGap ?? 4;
  const laneHeight = slots.length === 0 ? 0 : Math.min(options.maxLaneHeight ?? MAX_LANE_HEIGHT, Math.max(0, (lanesBottom - gap * (slots.length - 1)) / slots.length));
  const lanes: Lane[] = slots.map((slot, i) => ({ slot, name: names.get(slot)?.name ?? `slot ${slot}`, sharePct: names.get(slot)?.sharePct ?? 0, top: i * (laneHeight + gap), height: laneHeight }));
  const laneOf = new Map(lanes.map((lane) => [lane.slot, lane]));

  // Consecutive intervals under the same schedule form one run, so that a window crossing a
  // sample boundary is drawn (and counted) once.
  const runs: { schedule: ScheduleView; from: number; to: number; parts: { from: number; to: number; busy: Map<number, number> }[] }[] = [];
  for (const { sample, from, to } of intervals) {
    const schedule = sample.schedule;
    if (!validSchedule(schedule)) continue;
    const busy = new Map(sample.peers.map((peer) => [peer.slot, peer.active ? Math.min(100, Math.max(0, Number.isFinite(peer.busyPct) ? peer.busyPct : 0)) : 0]));
    const last = runs[runs.length - 1];
    if (last !== undefined && last.to === from && sameSchedule(last.schedule, schedule)) {
      last.to = to;
      last.parts.push({ from, to, busy });
    } else {
      runs.push({ schedule, from, to, parts: [{ from, to, busy }] });
    }
  }

  const windowRects: TimelineRect[] = [];
  const ranRects: TimelineRect[] = [];
  const periodLines: number[] = [];
  for (const run of runs) {
    const P = run.schedule.periodUs;
    let part = 0;
    for (let k = Math.floor(run.from / P); k * P < run.to; k++) {
      const periodStart = k * P;
      if (periodStart >= run.from) periodLines.push(xOf(periodStart, transform));
      for (const window of run.schedule.windows) {
        const lane = laneOf.get(window.slot);
        if (lane === undefined) continue;
        const start = periodStart + window.startUs;
        const end = start + window.lengthUs;
        const a = Math.max(start, run.from);
        const b = Math.min(end, run.to);
        if (b <= a) continue;
        // The busy figure of the sample in force where the drawn window begins.
        while (part < run.parts.length - 1 && (run.parts[part]?.to ?? Number.POSITIVE_INFINITY) <= a) part++;
        const busyPct = run.parts[part]?.busy.get(window.slot) ?? 0;
        const x = xOf(a, transform);
        const base = { slot: window.slot, y: lane.top, h: lane.height, window, periodUs: P, busyPct };
        windowRects.push({ kind: 'window', x, w: xOf(b, transform) - x, startUs: a, endUs: b, ...base });
        const ranEnd = Math.min(b, start + (window.lengthUs * busyPct) / 100);
        if (ranEnd > a) ranRects.push({ kind: 'ran', x, w: xOf(ranEnd, transform) - x, startUs: a, endUs: ranEnd, ...base });
      }
    }
  }

  const newest = sorted[sorted.length - 1];
  const current = newest !== undefined && newest.wallUs + SAMPLE_HOLD_US >= visibleEnd && validSchedule(newest.schedule) ? newest.schedule : null;
  return { transform, height, lanesBottom, lanes, ticks: options.axisHeight === undefined || options.axisHeight <= 0 ? [] : axisTicks(transform), rects: [...windowRects, ...ranRects], periodLines, current };
}

export interface HoverInfo {
  slot: number;
  name: string;
  /** When the hovered window began, and µs before now. */
  startUs: number;
  agoUs: number;
  lengthUs: number;
  share: number;
  stallBoundUs: number;
  periodUs: number;
  busyPct: number;
}

/** What is under the pointer: the schedule window in that lane at that time, or null. */
export function hitTest(model: TimelineModel, x: number, y: number): HoverInfo | null {
  const lane = model.lanes.find((l) => y >= l.top && y < l.top + l.height);
  if (lane === undefined) return null;
  for (let i = model.rects.length - 1; i >= 0; i--) {
    const rect = model.rects[i];
    if (rect === undefined || rect.kind !== 'window' || rect.slot !== lane.slot) continue;
    if (x >= rect.x && x < rect.x + Math.max(rect.w, 1)) {
      return {
        slot: rect.slot,
        name: lane.name,
        startUs: rect.startUs,
        agoUs: Math.max(0, model.transform.nowUs - rect.startUs),
        lengthUs: rect.window.lengthUs,
        share: rect.window.share,
        stallBoundUs: rect.window.stallBoundUs,
        periodUs: rect.periodUs,
        busyPct: rect.busyPct,
      };
    }
  }
  return null;
}

/** What an end-to-end test can read back: `window.__gpuShareTimeline`. */
export interface TimelineDebug {
  nowUs: number;
  spanUs: number;
  width: number;
  height: number;
  /** The period of the schedule holding at now, µs; null when nobody is active. */
  periodUs: number | null;
  /** Slot → windows drawn (partly clipped ones at the edges included). */
  windowsPerSlot: Record<string, number>;
  /** Slot → "ran" blocks drawn. */
  ranPerSlot: Record<string, number>;
  lanes: { slot: number; name: string; top: number; height: number }[];
  periodLines: number;
  /** The lanes' bottom edge, and the lowest edge of anything drawn in them (≤ lanesBottom). */
  lanesBottom: number;
  drawnBottom: number;
  /** The axis labels, left to right. */
  ticks: string[];
  /** Frames painted per second, measured over the last second. */
  fps: number;
  drawnAtMs: number;
}

export function debugView(model: TimelineModel, fps: number, drawnAtMs: number): TimelineDebug {
  const windowsPerSlot: Record<string, number> = {};
  const ranPerSlot: Record<string, number> = {};
  for (const rect of model.rects) {
    const bucket = rect.kind === 'window' ? windowsPerSlot : ranPerSlot;
    bucket[String(rect.slot)] = (bucket[String(rect.slot)] ?? 0) + 1;
  }
  return {
    nowUs: model.transform.nowUs,
    spanUs: model.transform.spanUs,
    width: model.transform.width,
    height: model.height,
    periodUs: model.current?.periodUs ?? null,
    windowsPerSlot,
    ranPerSlot,
    lanes: model.lanes.map((lane) => ({ slot: lane.slot, name: lane.name, top: lane.top, height: lane.height })),
    periodLines: model.periodLines.length,
    lanesBottom: model.lanesBottom,
    drawnBottom: Math.max(0, ...model.rects.map((rect) => rect.y + rect.h), ...model.lanes.map((lane) => lane.top + lane.height)),
    ticks: [...model.ticks].sort((a, b) => a.x - b.x).map((tick) => tick.label),
    fps,
    drawnAtMs,
  };
}

/** Frames per second over a sliding second: feed every frame's timestamp. */
export class FpsMeter {
  private frames: number[] = [];

  frame(nowMs: number): void {
    this.frames.push(nowMs);
    while (this.frames.length > 0 && (this.frames[0] ?? nowMs) <= nowMs - 1000) this.frames.shift();
  }

  fps(): number {
    return this.frames.length;
  }

  reset(): void {
    this.frames = [];
  }
}

export interface OvershootSummary {
  windows: number;
  maxUs: number;
  /** The 95th percentile (nearest rank). */
  p95Us: number;
}

/** What the hover says about a managed engine's measured overshoot (µs past its window's end);
 *  null when it reported none. */
export function overshootSummary(values: readonly number[]): OvershootSummary | null {
  const clean = values.filter((us) => Number.isFinite(us) && us >= 0).sort((a, b) => a - b);
  if (clean.length === 0) return null;
  const rank = Math.max(0, Math.ceil(0.95 * clean.length) - 1);
  return { windows: clean.length, maxUs: clean[clean.length - 1] ?? 0, p95Us: clean[rank] ?? 0 };
}
