/**
 * The built-in engines' decode steps set against the schedule (`bench:pacing --serve --trace DIR`:
 * each engine host writes every step to a file of its own, pacer/trace.ts): where each engine's
 * windows go, step by step. `analyseSteps` is pure. It gives the figures of pacer NOTES.md "The
 * split through `serve`, taken apart":
 * - a step's length by its place in its window (the first steps after the other engine's window
 *   run on cold caches, and a short window is more of them);
 * - the time between two steps (the engine's JavaScript: the gate, the token's write);
 * - where a window's first step started and its last step ended against the window's edges (the
 *   device's idle time at each hand-over);
 * - windows that start while the previous window's engine still runs its last step (two decode
 *   teams on the same cores) and what their first steps cost against a clean start;
 * - steps of 20 ms or more (a last step held off its cores through the whole next window).
 */
import { readFileSync } from 'node:fs';
import { parseGateTrace } from '../../electron/core/pacer/trace.js';
import { windowsOf, type TraceSchedule } from './pacing-trace.js';
import { median as medianOrZero, round, textTable } from './pacing-stats.js';

/** A step: its start (wall µs) and its length (µs). */
export type Step = readonly [startUs: number, us: number];

export interface StepTraceEngine {
  label: string;
  slot: number;
  /** Its steps, in the order it took them. */
  steps: readonly Step[];
}

export interface StepTraceInput {
  schedule: TraceSchedule;
  /** The intervals both engines ran in ([from, to) wall µs); only windows wholly inside one count. */
  intervals: readonly (readonly [number, number])[];
  engines: readonly StepTraceEngine[];
}

export interface StepTraceFindings {
  label: string;
  slot: number;
  windowMs: number;
  /** Its windows in the intervals in which it took at least one step. */
  windows: number;
  stepsPerWindow: number;
  /** Mean µs of a step by its place in its window; steps of LONG_STEP_US or more are left out. */
  byPlaceUs: { first: number | null; secondToSixth: number | null; seventhTo21st: number | null; later: number | null };
  /** Mean µs from the end of a step to the start of the next in the same window. */
  gapUs: number | null;
  /** Where each window's first step started against the window's start, µs (median; positive: the
   *  window began idle). */
  firstStepStartUs: number | null;
  /** Where each window's last step ended against the window's end, µs (median; negative: the
   *  window ended idle), and the windows whose last step ran past it. */
  lastStepEnd: { medianUs: number | null; pastEnd: number; pastEndPct: number };
  /** Windows whose first step started while the previous window's engine still had OVERLAP_US or
   *  more of its last step to run, and the mean ms of their first six steps against the others'. */
  overlappedStarts: { windows: number; pct: number; firstSixMs: number | null; cleanFirstSixMs: number | null };
  /** Steps of LONG_STEP_US or more, and those of HELD_STEP_US or more with their ms in all. */
  longSteps: number;
  heldSteps: number;
  heldMs: number;
}

/** A step this long was held up (by another process, another team on its cores): counted apart. */
export const LONG_STEP_US = 5_000;
/** A step this long was held through a window of someone else's. */
export const HELD_STEP_US = 20_000;
/** A window starts beside the previous engine's step when that step ends this much after its start. */
export const OVERLAP_US = 500;
/** A window's first step may start this early (the gate's START_LEAD_US, with a margin). */
const EARLY_US = 3_000;
/** A window's first steps, whose cost an overlapped start raises. */
const FIRST_STEPS = 6;

const median = (values: readonly number[]): number | null => (values.length === 0 ? null : medianOrZero(values));
const mean = (values: readonly number[]): number | null => (values.length === 0 ? null : values.reduce((sum, v) => sum + v, 0) / values.length);

/** Each window of `slot` in the interval (as [start, end) wall µs) with the steps that started in
 *  it (from EARLY_US before its start); windows with no step are left out. Pure. */
export function stepsByWindow(schedule: TraceSchedule, slot: number, fromUs: number, toUs: number, steps: readonly Step[]): { window: [number, number]; steps: Step[] }[] {
  const out: { window: [number, number]; steps: Step[] }[] = [];
  let i = 0;
  for (const window of windowsOf(schedule, slot, fromUs, toUs)) {
    while (i < steps.length && (steps[i]?.[0] ?? 0) < window[0] - EARLY_US) i++;
    const inWindow: Step[] = [];
    for (; i < steps.length && (steps[i]?.[0] ?? 0) < window[1]; i++) inWindow.push(steps[i] as Step);
    if (inWindow.length > 0) out.push({ window, steps: inWindow });
  }
  return out;
}

/** The last step of `steps` that started before `us` (binary search; steps in order). */
function lastStepBefore(steps: readonly Step[], us: number): Step | undefined {
  let lo = 0;
  let hi = steps.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((steps[mid]?.[0] ?? 0) < us) lo = mid + 1;
    else hi = mid;
  }
  return steps[lo - 1];
}

/** Where each engine's windows went. Pure. */
export function analyseSteps(input: StepTraceInput): StepTraceFindings[] {
  const { schedule } = input;
  const ordered = [...schedule.windows].sort((a, b) => a.startUs - b.startUs);
  return input.engines.map((engine) => {
    const own = schedule.windows.find((w) => w.slot === engine.slot);
    const at = ordered.findIndex((w) => w.slot === engine.slot);
    const previousSlot = ordered[(at - 1 + ordered.length) % ordered.length]?.slot;
    const previous = ordered.length > 1 ? input.engines.find((e) => e.slot === previousSlot) : undefined;
    const windows = input.intervals.flatMap(([fromUs, toUs]) => stepsByWindow(schedule, engine.slot, fromUs, toUs, engine.steps));
    const places: number[][] = [[], [], [], []];
    const gaps: number[] = [];
    const firstStarts: number[] = [];
    const lastEnds: number[] = [];
    const overlapped: number[] = [];
    const clean: number[] = [];
    let long = 0;
    let held = 0;
    let heldUs = 0;
    for (const { window, steps } of windows) {
      const [first] = steps;
      const last = steps[steps.length - 1];
      if (first !== undefined) firstStarts.push(first[0] - window[0]);
      if (last !== undefined) lastEnds.push(last[0] + last[1] - window[1]);
      steps.forEach(([start, us], index) => {
        if (us >= LONG_STEP_US) {
          long++;
          if (us >= HELD_STEP_US) {
            held++;
            heldUs += us;
          }
        } else places[index === 0 ? 0 : index < 6 ? 1 : index < 21 ? 2 : 3]?.push(us);
        const before = steps[index - 1];
        if (before !== undefined) gaps.push(start - (before[0] + before[1]));
      });
      if (previous === undefined || first === undefined) continue;
      const theirs = lastStepBefore(previous.steps, first[0]);
      const firstSix = steps.slice(0, FIRST_STEPS).reduce((sum, [, us]) => sum + us, 0);
      (theirs !== undefined && theirs[0] + theirs[1] - first[0] >= OVERLAP_US ? overlapped : clean).push(firstSix);
    }
    const pastEnd = lastEnds.filter((us) => us > 0).length;
    const toMs = (value: number | null): number | null => (value === null ? null : round(value / 1000, 2));
    const wholeUs = (value: number | null): number | null => (value === null ? null : round(value, 0));
    return {
      label: engine.label,
      slot: engine.slot,
      windowMs: round((own?.lengthUs ?? 0) / 1000, 1),
      windows: windows.length,
      stepsPerWindow: round(mean(windows.map((w) => w.steps.length)) ?? 0, 1),
      byPlaceUs: { first: wholeUs(mean(places[0] ?? [])), secondToSixth: wholeUs(mean(places[1] ?? [])), seventhTo21st: wholeUs(mean(places[2] ?? [])), later: wholeUs(mean(places[3] ?? [])) },
      gapUs: wholeUs(mean(gaps)),
      firstStepStartUs: wholeUs(median(firstStarts)),
      lastStepEnd: { medianUs: wholeUs(median(lastEnds)), pastEnd, pastEndPct: lastEnds.length === 0 ? 0 : round((pastEnd / lastEnds.length) * 100, 1) },
      overlappedStarts: { windows: overlapped.length, pct: windows.length === 0 ? 0 : round((overlapped.length / windows.length) * 100, 1), firstSixMs: toMs(mean(overlapped)), cleanFirstSixMs: toMs(mean(clean)) },
      longSteps: long,
      heldSteps: held,
      heldMs: round(heldUs / 1000, 1),
    };
  });
}

export function stepTraceTable(findings: readonly StepTraceFindings[]): string {
  const header = ['engine', 'window ms', 'windows', 'steps/window', 'µs by place: 1st', '2nd–6th', '7th–21st', 'later', 'gap µs', "first step's start, µs from the window's start (median)", "last step's end, µs from the window's end (median)", 'past the end', 'starts beside the last step', 'first six ms (clean)', `steps ≥ ${LONG_STEP_US / 1000} ms`, `≥ ${HELD_STEP_US / 1000} ms (ms)`];
  const text = (value: number | null): string => (value === null ? '—' : String(value));
  const rows = findings.map((f) => [
    f.label,
    String(f.windowMs),
    String(f.windows),
    String(f.stepsPerWindow),
    text(f.byPlaceUs.first),
    text(f.byPlaceUs.secondToSixth),
    text(f.byPlaceUs.seventhTo21st),
    text(f.byPlaceUs.later),
    text(f.gapUs),
    text(f.firstStepStartUs),
    text(f.lastStepEnd.medianUs),
    `${f.lastStepEnd.pastEnd} (${f.lastStepEnd.pastEndPct} %)`,
    `${f.overlappedStarts.windows} (${f.overlappedStarts.pct} %)`,
    `${text(f.overlappedStarts.firstSixMs)} (${text(f.overlappedStarts.cleanFirstSixMs)})`,
    String(f.longSteps),
    `${f.heldSteps} (${f.heldMs})`,
  ]);
  return textTable(header, rows);
}

/** The steps of one host's trace file (pacer/trace.ts's `step` events, read by its own parser), in
 *  order; other events and a torn last line are left out. */
export function readSteps(path: string): Step[] {
  const steps: Step[] = [];
  for (const event of parseGateTrace(readFileSync(path, 'utf8')).events) if (event.k === 'step' && typeof event.us === 'number') steps.push([event.t, event.us]);
  return steps;
}
