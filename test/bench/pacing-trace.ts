/**
 * The per-window trace of `bench:pacing --llama-server|--gpu --trace FILE`, and what it says.
 * A trace covers the measured interval (at most TRACE_MAX_S of it) of one run of one scenario and
 * mode: the schedule every engine should follow, each engine's token arrivals, each gate's events
 * (pacer/trace.ts: decisions with the registry they read, stops and continues, activity samples,
 * /metrics polls and answers; the naive loop's stops and continues), and NVML's samples.
 * `analyseTrace` is pure: which windows each engine lost and why, as far as the trace shows.
 */
import type { GateTraceEvent } from '../../electron/core/pacer/trace.js';
import { round } from './pacing-stats.js';

/** The most of a measured interval a trace keeps. */
export const TRACE_MAX_S = 10;

export interface TraceSchedule {
  periodUs: number;
  windows: readonly { slot: number; startUs: number; lengthUs: number }[];
}

export interface TraceEngine {
  /** The engine's place in the scenario (its window is the schedule's window of this slot). */
  slot: number;
  weight: number;
  /** The stall bound, µs: (1 − share) · period. */
  boundUs: number;
  /** Wall µs of every token that arrived inside the traced interval. */
  tokens: number[];
  /** Its gate's events (the naive loop's stops and continues under `naive`; none unpaced). */
  gate: GateTraceEvent[];
  /** The engine's state when the interval began, by its gate's last stop or continue before it. */
  stoppedAtStart: boolean;
  /** Wall µs at which its client sent each request (from a period before the interval on). */
  requests?: number[];
}

export interface PacingTrace {
  scenario: string;
  mode: string;
  run: number;
  fromUs: number;
  toUs: number;
  schedule: TraceSchedule;
  engines: TraceEngine[];
  /** NVML: the device's utilisation samples [wall µs, %], and per process where the binding
   *  reads it; a string saying why where it does not. */
  nvml: { device: [number, number][] | string; processes: string };
}

export interface LostWindow {
  slot: number;
  /** The window's start and end, wall µs. */
  startUs: number;
  endUs: number;
  /** µs the engine was let run inside it. */
  ranUs: number;
  causes: string[];
}

export interface EngineTraceFindings {
  slot: number;
  windows: number;
  /** Windows with no token in which the engine was let run for less than half the window. */
  lost: LostWindow[];
  /** Windows with no token although the engine was let run for at least half of it (the device,
   *  work queued before, or the client). */
  silent: LostWindow[];
  longestGapMs: number;
  boundMs: number;
  overBoundMs: number;
  /** The longest gap's start and end (wall µs), and the windows of this engine inside it. */
  longestGapAtUs: [number, number] | null;
  polls: { sent: number; inFlightSkips: number; timedOut: number; answers: number; failedAnswers: number; idleAnswers: number; answerMsMax: number | null; answerMsP50: number | null };
  /** Activity samples that said idle (busy false) or could not tell (null), and times `active`
   *  read false, while the engine's client kept it busy (the whole interval). */
  samplesIdle: number;
  samplesUnknown: number;
  inactiveSamples: number;
  /** From each decision to the stop or continue it led to, ms (p50, max): the signal's cost, or
   *  under `--stop-method cuda-lock` how long the lock took to drain the engine's queued work and
   *  the unlock; null without such pairs (unpaced, naive). */
  stopMs: { p50: number; max: number } | null;
  contMs: { p50: number; max: number } | null;
}

export interface TraceFindings {
  scenario: string;
  mode: string;
  run: number;
  intervalS: number;
  engines: EngineTraceFindings[];
  /** One line per finding, for the log and the closing note. */
  lines: string[];
}

/** The windows of `slot` that lie wholly inside [fromUs, toUs), as [start, end) wall µs. */
export function windowsOf(schedule: TraceSchedule, slot: number, fromUs: number, toUs: number): [number, number][] {
  const window = schedule.windows.find((w) => w.slot === slot);
  if (window === undefined) return [];
  const out: [number, number][] = [];
  let periodStart = Math.floor(fromUs / schedule.periodUs) * schedule.periodUs;
  for (; periodStart < toUs; periodStart += schedule.periodUs) {
    const start = periodStart + window.startUs;
    const end = start + window.lengthUs;
    if (start >= fromUs && end <= toUs) out.push([start, end]);
  }
  return out;
}

/** [start, end) intervals in which the engine was let run, from its gate's stops and continues. */
export function runningIntervals(gate: readonly GateTraceEvent[], stoppedAtStart: boolean, fromUs: number, toUs: number): [number, number][] {
  const out: [number, number][] = [];
  let runningSince: number | null = stoppedAtStart ? null : fromUs;
  for (const event of gate) {
    if (event.t < fromUs || event.t >= toUs) continue;
    if (event.k === 'stop' && runningSince !== null) {
      out.push([runningSince, event.t]);
      runningSince = null;
    } else if (event.k === 'cont' && runningSince === null) runningSince = event.t;
  }
  if (runningSince !== null) out.push([runningSince, toUs]);
  return out;
}

const overlapUs = (intervals: readonly [number, number][], a: number, b: number): number => intervals.reduce((sum, [s, e]) => sum + Math.max(0, Math.min(e, b) - Math.max(s, a)), 0);

const ms = (us: number): string => `${round(us / 1000, 1)} ms`;

/** Why a window was lost or silent, from what the trace holds around it. */
function causesOf(trace: PacingTrace, engine: TraceEngine, running: Map<number, [number, number][]>, start: number, end: number): string[] {
  const causes: string[] = [];
  const length = end - start;
  const own = engine.gate;
  // Decisions inside the window: one just before it (the gate waiting for its edge) says nothing
  // about whether the edge itself was taken.
  const decisions = own.filter((e): e is Extract<GateTraceEvent, { k: 'decide' }> => e.k === 'decide' && e.t >= start && e.t < end);
  const conts = own.filter((e) => e.k === 'cont' && e.t >= start && e.t < end);
  const hasGateEvents = own.some((e) => e.k === 'decide');
  if (hasGateEvents && decisions.length === 0) {
    const before = own.filter((e) => e.k === 'decide' && e.t < start).at(-1);
    const after = own.find((e) => e.k === 'decide' && e.t >= end);
    causes.push(`its gate decided nothing in the window (last decision ${before === undefined ? 'never' : `${ms(start - before.t)} before it`}, next ${after === undefined ? 'never' : `${ms(after.t - end)} after its end`})`);
  }
  const waited = decisions.filter((d) => !d.run);
  if (waited.length > 0 && waited.length === decisions.length) {
    const idlePeers = new Set<number>();
    const ownIdle = new Set<number>();
    for (const d of waited) for (const [slot, active] of d.peers) if (!active) (slot === d.slot ? ownIdle : idlePeers).add(slot);
    const sizes = new Set(waited.map((d) => d.peers.filter(([, a]) => a).length));
    causes.push(`its gate waited at every decision in the window (${waited.length}), reading ${[...sizes].join('/')} active peer(s) of ${trace.engines.length}${idlePeers.size > 0 ? `, registry slot(s) ${[...idlePeers].join(',')} idle` : ''}${ownIdle.size > 0 ? ', its own slot idle' : ''}`);
  }
  if (conts.length > 0) {
    const first = conts[0]?.t ?? start;
    if (first - start > length / 4) causes.push(`continued ${ms(first - start)} after the window began`);
  }
  // Another engine let run inside this window: the device was shared or given away.
  for (const other of trace.engines) {
    if (other.slot === engine.slot) continue;
    const overlap = overlapUs(running.get(other.slot) ?? [], start, end);
    if (overlap > length / 4) causes.push(`engine ${other.slot} was let run ${ms(overlap)} of it`);
  }
  // Other gates reading this engine idle: its window then is not in their schedule.
  const ownRegistrySlot = own.find((e): e is Extract<GateTraceEvent, { k: 'decide' }> => e.k === 'decide' && e.slot !== null)?.slot ?? null;
  if (ownRegistrySlot !== null) {
    const readIdle = trace.engines.filter((o) => o.slot !== engine.slot).some((o) => o.gate.some((e) => e.k === 'decide' && e.t >= start - 5_000 && e.t < end && e.peers.some(([slot, active]) => slot === ownRegistrySlot && !active)));
    if (readIdle) causes.push('another gate read this engine idle in the registry');
  }
  const samples = own.filter((e): e is Extract<GateTraceEvent, { k: 'sample' }> => e.k === 'sample' && e.t >= start - 200_000 && e.t < end);
  if (samples.some((s) => !s.active)) causes.push('its own activity sample read it inactive');
  if (samples.some((s) => s.busy === false)) causes.push('a /metrics answer said idle (nothing in flight, nothing generated since the previous poll)');
  const request = (engine.requests ?? []).filter((t) => t >= start - trace.schedule.periodUs && t < end).at(-1);
  if (request !== undefined) causes.push(`its client sent a new request ${request < start ? `${ms(start - request)} before the window` : `${ms(request - start)} into it`} (the request's own start: HTTP, prompt, slot)`);
  const tokensBefore = engine.tokens.filter((t) => t < start);
  const tokensAfter = engine.tokens.filter((t) => t >= end);
  if (causes.length === 0) causes.push(`no cause in the trace (previous token ${tokensBefore.length === 0 ? '—' : `${ms(start - (tokensBefore.at(-1) ?? start))} before`}, next ${tokensAfter.length === 0 ? '—' : `${ms((tokensAfter[0] ?? end) - end)} after`} the window)`);
  return causes;
}

/** Lost windows per engine, the longest gap against its bound, the polls, and the causes the
 *  trace shows. Pure. */
export function analyseTrace(trace: PacingTrace): TraceFindings {
  const { fromUs, toUs } = trace;
  const paced = trace.engines.some((e) => e.gate.some((g) => g.k === 'stop' || g.k === 'cont' || g.k === 'decide'));
  const running = new Map(trace.engines.map((e) => [e.slot, paced ? runningIntervals(e.gate, e.stoppedAtStart, fromUs, toUs) : ([[fromUs, toUs]] as [number, number][])]));
  const engines = trace.engines.map((engine): EngineTraceFindings => {
    const windows = paced ? windowsOf(trace.schedule, engine.slot, fromUs, toUs) : [];
    const lost: LostWindow[] = [];
    const silent: LostWindow[] = [];
    const ran = running.get(engine.slot) ?? [];
    let t = 0;
    const tokens = engine.tokens.filter((x) => x >= fromUs && x < toUs).sort((a, b) => a - b);
    for (const [start, end] of windows) {
      while (t < tokens.length && (tokens[t] ?? 0) < start) t++;
      if (t < tokens.length && (tokens[t] ?? 0) < end) continue;
      const ranUs = overlapUs(ran, start, end);
      const record: LostWindow = { slot: engine.slot, startUs: start, endUs: end, ranUs, causes: causesOf(trace, engine, running, start, end) };
      (ranUs < (end - start) / 2 ? lost : silent).push(record);
    }
    let longest = 0;
    let longestAt: [number, number] | null = null;
    for (let i = 1; i < tokens.length; i++) {
      const gap = (tokens[i] ?? 0) - (tokens[i - 1] ?? 0);
      if (gap > longest) {
        longest = gap;
        longestAt = [tokens[i - 1] ?? 0, tokens[i] ?? 0];
      }
    }
    const inside = engine.gate.filter((e) => e.t >= fromUs && e.t < toUs);
    const sends = inside.filter((e) => e.k === 'poll' && e.what === 'sent').map((e) => e.t);
    const answers = inside.filter((e): e is Extract<GateTraceEvent, { k: 'answer' }> => e.k === 'answer');
    // Each answer against the latest request sent before it.
    const latencies: number[] = [];
    for (const a of answers) {
      const sent = sends.filter((s) => s <= a.t).at(-1);
      if (sent !== undefined) latencies.push((a.t - sent) / 1000);
    }
    latencies.sort((a, b) => a - b);
    const samples = inside.filter((e): e is Extract<GateTraceEvent, { k: 'sample' }> => e.k === 'sample');
    const latency = (kind: 'stop' | 'cont'): { p50: number; max: number } | null => {
      const values: number[] = [];
      let decidedAt: number | null = null;
      for (const e of inside) {
        if (e.k === 'decide') decidedAt = e.t;
        else if (e.k === kind && decidedAt !== null) {
          values.push((e.t - decidedAt) / 1000);
          decidedAt = null;
        } else if (e.k === 'stop' || e.k === 'cont') decidedAt = null;
      }
      values.sort((a, b) => a - b);
      return values.length === 0 ? null : { p50: round(values[Math.floor(values.length / 2)] ?? 0, 2), max: round(values.at(-1) ?? 0, 2) };
    };
    return {
      slot: engine.slot,
      windows: windows.length,
      lost,
      silent,
      longestGapMs: round(longest / 1000, 1),
      boundMs: round(engine.boundUs / 1000, 1),
      overBoundMs: round((longest - engine.boundUs) / 1000, 1),
      longestGapAtUs: longestAt,
      polls: {
        sent: sends.length,
        inFlightSkips: inside.filter((e) => e.k === 'poll' && e.what === 'in-flight').length,
        timedOut: inside.filter((e) => e.k === 'poll' && e.what === 'timed-out').length,
        answers: answers.length,
        failedAnswers: answers.filter((a) => a.busy === null).length,
        idleAnswers: answers.filter((a) => a.busy === false).length,
        answerMsMax: latencies.length === 0 ? null : round(latencies.at(-1) ?? 0, 1),
        answerMsP50: latencies.length === 0 ? null : round(latencies[Math.floor(latencies.length / 2)] ?? 0, 1),
      },
      samplesIdle: samples.filter((s) => s.busy === false).length,
      samplesUnknown: samples.filter((s) => s.busy === null).length,
      inactiveSamples: samples.filter((s) => !s.active).length,
      stopMs: latency('stop'),
      contMs: latency('cont'),
    };
  });
  const lines: string[] = [];
  for (const e of engines) {
    const gapCause = e.longestGapAtUs === null ? [] : [...e.lost, ...e.silent].filter((w) => w.startUs >= (e.longestGapAtUs?.[0] ?? 0) && w.endUs <= (e.longestGapAtUs?.[1] ?? 0));
    lines.push(
      `engine ${e.slot}: ${paced ? `${e.lost.length} lost and ${e.silent.length} silent window(s) of ${e.windows}; ` : ''}longest gap ${e.longestGapMs} ms against its bound ${e.boundMs} ms (${e.overBoundMs >= 0 ? '+' : ''}${e.overBoundMs})${gapCause.length > 0 ? `, spanning ${gapCause.length} window(s) without a token` : ''}; polls ${e.polls.sent} sent, ${e.polls.answers} answered (${e.polls.idleAnswers} idle, ${e.polls.failedAnswers} failed), ${e.polls.inFlightSkips} skipped while one was unanswered, ${e.polls.timedOut} timed out, answer ${e.polls.answerMsP50 ?? '—'} ms p50 / ${e.polls.answerMsMax ?? '—'} ms max; samples idle ${e.samplesIdle}, cannot tell ${e.samplesUnknown}, inactive ${e.inactiveSamples}${e.stopMs === null ? '' : `; decision to stop ${e.stopMs.p50} ms p50 / ${e.stopMs.max} max, to continue ${e.contMs?.p50 ?? '—'} / ${e.contMs?.max ?? '—'}`}`,
    );
    for (const w of [...e.lost, ...e.silent].slice(0, 8)) lines.push(`  ${e.lost.includes(w) ? 'lost' : 'silent'} window at +${ms(w.startUs - fromUs)} (ran ${ms(w.ranUs)} of ${ms(w.endUs - w.startUs)}): ${w.causes.join('; ')}`);
  }
  return { scenario: trace.scenario, mode: trace.mode, run: trace.run, intervalS: round((toUs - fromUs) / 1e6, 2), engines, lines };
}
