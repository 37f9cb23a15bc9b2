import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { decodeSegment, encodeEmptySegment, encodeSlot } from '../../electron/core/registry/codec.js';
import { judgeOneShot } from '../../electron/core/registry/liveness.js';
import type { RegistryMember } from '../../electron/core/registry/member.js';
import { resolvePeers, type AlivePeer } from '../../electron/core/registry/view.js';
import { ProcessGate } from '../../electron/core/pacer/process-gate.js';
import { fileTraceRecorder, parseGateTrace, traceFromEnv, type GateTraceEvent } from '../../electron/core/pacer/trace.js';
import { analyseTrace, runningIntervals, windowsOf, type PacingTrace, type TraceEngine } from '../bench/pacing-trace.js';

const PERIOD = 120_000;
const FROM = 1_800_000_000_000_000 - (1_800_000_000_000_000 % PERIOD);
/** 2:1: slot 0 [0, 80 ms), slot 1 [80, 120 ms) of each 120 ms period. */
const SCHEDULE = { periodUs: PERIOD, windows: [{ slot: 0, startUs: 0, lengthUs: 80_000 }, { slot: 1, startUs: 80_000, lengthUs: 40_000 }] };
const PERIODS = 10;
const TO = FROM + PERIODS * PERIOD;

const peers2: [number, boolean, number][] = [[0, true, 2 / 3], [1, true, 1 / 3]];

/** An engine paced exactly: continued at its window's start, stopped at its end, a token every
 *  5 ms inside it, and the gate's decision at each edge; `skip` lists periods whose window it
 *  loses in the way `lose` says. */
function pacedEngine(slot: number, skip: Map<number, 'no-decision' | 'waited' | 'silent'>): TraceEngine {
  const window = SCHEDULE.windows[slot] ?? { startUs: 0, lengthUs: 0 };
  const gate: GateTraceEvent[] = [];
  const tokens: number[] = [];
  for (let p = 0; p < PERIODS; p++) {
    const start = FROM + p * PERIOD + window.startUs;
    const end = start + window.lengthUs;
    const how = skip.get(p);
    if (how === 'no-decision') continue;
    if (how === 'waited') {
      // It read a third active peer that is not there: its schedule put its window elsewhere.
      gate.push({ k: 'decide', t: start + 100, pid: 10 + slot, slot, active: true, run: false, inWindow: false, peers: [...peers2, [2, true, 0.25]] });
      continue;
    }
    gate.push({ k: 'decide', t: start + 100, pid: 10 + slot, slot, active: true, run: true, inWindow: true, peers: peers2 });
    gate.push({ k: 'cont', t: start + 150, pid: 10 + slot });
    gate.push({ k: 'decide', t: end + 100, pid: 10 + slot, slot, active: true, run: false, inWindow: false, peers: peers2 });
    gate.push({ k: 'stop', t: end + 150, pid: 10 + slot });
    if (how === 'silent') {
      gate.push({ k: 'sample', t: start + 20_000, pid: 10 + slot, busy: false, active: true });
      continue;
    }
    for (let t = start + 2_000; t < end; t += 5_000) tokens.push(t);
  }
  gate.sort((a, b) => a.t - b.t);
  return { slot, weight: slot === 0 ? 2 : 1, boundUs: slot === 0 ? 40_000 : 80_000, tokens, gate, stoppedAtStart: slot !== 0 };
}

function trace(engines: TraceEngine[], mode = 'gate'): PacingTrace {
  return { scenario: '2:1', mode, run: 1, fromUs: FROM, toUs: TO, schedule: SCHEDULE, engines, nvml: { device: 'not available: CPU run', processes: 'not available: CPU run' } };
}

describe('the pacing trace analyser', () => {
  it('finds each engine\'s windows inside the interval', () => {
    expect(windowsOf(SCHEDULE, 1, FROM, TO)).toHaveLength(PERIODS);
    expect(windowsOf(SCHEDULE, 1, FROM, TO)[0]).toEqual([FROM + 80_000, FROM + 120_000]);
    // A window cut by the interval's end is not one.
    expect(windowsOf(SCHEDULE, 0, FROM, FROM + 50_000)).toEqual([]);
    expect(windowsOf(SCHEDULE, 5, FROM, TO)).toEqual([]);
  });

  it('reads when an engine ran from its stops and continues', () => {
    expect(runningIntervals([{ k: 'cont', t: FROM + 10, pid: 1 }, { k: 'stop', t: FROM + 50, pid: 1 }, { k: 'stop', t: FROM + 60, pid: 1 }], true, FROM, TO)).toEqual([[FROM + 10, FROM + 50]]);
    expect(runningIntervals([{ k: 'stop', t: FROM + 50, pid: 1 }], false, FROM, TO)).toEqual([[FROM, FROM + 50]]);
    expect(runningIntervals([], false, FROM, TO)).toEqual([[FROM, TO]]);
  });

  it('an exact 2:1 loses nothing and its gaps stay within the bounds', () => {
    const found = analyseTrace(trace([pacedEngine(0, new Map()), pacedEngine(1, new Map())]));
    expect(found.engines.map((e) => [e.lost.length, e.silent.length, e.windows])).toEqual([[0, 0, PERIODS], [0, 0, PERIODS]]);
    // Engine 1: the last token of a window (at +117 ms) to the first of the next (+202 ms).
    expect(found.engines[1]?.longestGapMs).toBe(85);
    expect(found.engines[1]?.overBoundMs).toBe(5);
    expect(found.lines[0]).toMatch(/^engine 0: 0 lost and 0 silent window\(s\) of 10; longest gap 45 ms against its bound 40 ms/);
    // Each stop and continue 50 µs after the decision that led to it.
    expect(found.engines[0]?.stopMs).toEqual({ p50: 0.05, max: 0.05 });
    expect(found.engines[0]?.contMs).toEqual({ p50: 0.05, max: 0.05 });
    expect(found.lines[0]).toMatch(/; decision to stop 0\.05 ms p50 \/ 0\.05 max, to continue 0\.05 \/ 0\.05$/);
  });

  it('names each lost window\'s cause: no decision, a schedule read with a peer that is not there, a silent window', () => {
    const light = pacedEngine(1, new Map([[3, 'no-decision'], [6, 'waited'], [8, 'silent']]));
    const found = analyseTrace(trace([pacedEngine(0, new Map()), light]));
    const e1 = found.engines[1];
    expect(e1?.lost.map((w) => w.startUs - FROM)).toEqual([3 * PERIOD + 80_000, 6 * PERIOD + 80_000]);
    expect(e1?.lost[0]?.causes[0]).toMatch(/^its gate decided nothing in the window \(last decision 79.9 ms before it, next 80.1 ms after its end\)/);
    expect(e1?.lost[1]?.causes[0]).toBe('its gate waited at every decision in the window (1), reading 3 active peer(s) of 2');
    expect(e1?.silent.map((w) => w.startUs - FROM)).toEqual([8 * PERIOD + 80_000]);
    expect(e1?.silent[0]?.ranUs).toBe(39_850); // continued 150 µs after the window began
    expect(e1?.silent[0]?.causes).toContain('a /metrics answer said idle (nothing in flight, nothing generated since the previous poll)');
    expect(e1?.samplesIdle).toBe(1);
    // A request sent just before a silent window is named as its cause.
    const again = analyseTrace(trace([pacedEngine(0, new Map()), { ...light, requests: [FROM + 8 * PERIOD + 70_000] }]));
    expect(again.engines[1]?.silent[0]?.causes).toContain("its client sent a new request 10 ms before the window (the request's own start: HTTP, prompt, slot)");
    // Two windows in a row lost (periods 3 and 6 are apart): the longest gap spans one of them.
    expect(e1?.longestGapMs).toBe(205);
    expect(e1?.overBoundMs).toBe(125);
    expect(found.lines.some((l) => l.startsWith('  lost window at +440 ms (ran 0 ms of 40 ms)'))).toBe(true);
    expect(found.engines[0]?.lost).toEqual([]);
  });

  it('says when another engine was let run through the window and another gate read this one idle', () => {
    const heavy = pacedEngine(0, new Map());
    const light = pacedEngine(1, new Map([[2, 'no-decision']]));
    const start = FROM + 2 * PERIOD + 80_000;
    // Engine 0's gate read slot 1 idle and let engine 0 run through engine 1's window.
    heavy.gate = heavy.gate.filter((e) => !(e.t > start - 1_000 && e.t < start + 40_000));
    heavy.gate.push({ k: 'decide', t: start + 100, pid: 10, slot: 0, active: true, run: true, inWindow: false, peers: [[0, true, 1], [1, false, 0]] });
    heavy.gate.sort((a, b) => a.t - b.t);
    const found = analyseTrace(trace([heavy, light]));
    const causes = found.engines[1]?.lost[0]?.causes ?? [];
    expect(causes).toContain('engine 0 was let run 40 ms of it');
    expect(causes).toContain('another gate read this engine idle in the registry');
  });

  it('counts the polls: sent, skipped while unanswered, timed out, answers and their latency', () => {
    const e0 = pacedEngine(0, new Map());
    e0.gate.push(
      { k: 'poll', t: FROM + 1_000, what: 'sent' },
      { k: 'answer', t: FROM + 1_400, busy: true, processing: 1, deferred: 0, predicted: 10 },
      { k: 'poll', t: FROM + 101_000, what: 'sent' },
      { k: 'poll', t: FROM + 201_000, what: 'in-flight' },
      { k: 'answer', t: FROM + 231_000, busy: true, processing: 1, deferred: 0, predicted: 30 },
      { k: 'poll', t: FROM + 301_000, what: 'sent' },
      { k: 'poll', t: FROM + 901_000, what: 'timed-out' },
      { k: 'poll', t: FROM + 901_000, what: 'sent' },
      { k: 'answer', t: FROM + 901_500, busy: null, why: 'not 200' },
    );
    e0.gate.sort((a, b) => a.t - b.t);
    const polls = analyseTrace(trace([e0, pacedEngine(1, new Map())])).engines[0]?.polls;
    expect(polls).toEqual({ sent: 4, inFlightSkips: 1, timedOut: 1, answers: 3, failedAnswers: 1, idleAnswers: 0, answerMsMax: 130, answerMsP50: 0.5 });
  });

  it('unpaced, no window is lost (there are none): gaps only', () => {
    const free = [pacedEngine(0, new Map()), pacedEngine(1, new Map())].map((e) => ({ ...e, gate: [], stoppedAtStart: false }));
    const found = analyseTrace(trace(free, 'free'));
    expect(found.engines.map((e) => e.windows)).toEqual([0, 0]);
    expect(found.lines[0]).toMatch(/^engine 0: longest gap 45 ms/);
  });
});

describe('the gate\'s trace', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-trace-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('records each decision with the registry it read, the activity samples, and each stop and continue', () => {
    const clock = new FakeClock();
    clock.stepWall(PERIOD - (clock.wallUs() % PERIOD));
    const peers = (): readonly AlivePeer[] => {
      const bytes = encodeEmptySegment();
      encodeSlot(bytes, 0, { pid: 4242, weight: 2, active: true, heartbeatUs: clock.wallUs() });
      encodeSlot(bytes, 1, { pid: 777, weight: 1, active: true, heartbeatUs: clock.wallUs() });
      const decoded = decodeSegment(bytes);
      return resolvePeers(decoded, judgeOneShot(decoded.slots, clock.wallUs()));
    };
    const events: GateTraceEvent[] = [];
    let cpuUs = 0;
    const gate = new ProcessGate({ clock, control: { suspend: () => true, resume: () => true }, activity: { workUs: () => (cpuUs += 5_000), busyNow: () => true }, peers, trace: (e) => events.push(e) });
    gate.add(4242, { slot: 0, set: () => true } as unknown as RegistryMember);
    for (let t = 0; t < PERIOD * 2; t += 10_000) {
      gate.step();
      clock.advance(10_000);
    }
    const kinds = new Set(events.map((e) => e.k));
    expect([...kinds].sort()).toEqual(['cont', 'decide', 'sample', 'stop']);
    const decide = events.find((e): e is Extract<GateTraceEvent, { k: 'decide' }> => e.k === 'decide');
    expect(decide?.peers.map(([slot, active]) => [slot, active])).toEqual([[0, true], [1, true]]);
    expect(decide?.slot).toBe(0);
    const sample = events.find((e) => e.k === 'sample');
    expect(sample).toMatchObject({ busy: true, active: true, pid: 4242 });
    // Stopped at 80 ms into each period, continued at its start.
    const stops = events.filter((e) => e.k === 'stop').map((e) => (e.t % PERIOD) / 1000);
    expect(stops.length).toBeGreaterThanOrEqual(1);
    expect(stops.every((ms) => ms >= 80 && ms < 120)).toBe(true);
  });

  it('writes JSON lines to a file it creates, and refuses one that exists or is a link', () => {
    const path = join(dir, 'gate.jsonl');
    const recorder = fileTraceRecorder(path);
    recorder.record({ k: 'stop', t: 5, pid: 1 });
    recorder.record({ k: 'poll', t: 6, what: 'sent' });
    recorder.close();
    recorder.record({ k: 'stop', t: 7, pid: 1 }); // after close: dropped
    const parsed = parseGateTrace(`${readFileSync(path, 'utf8')}{"k":"cont","t":`);
    expect(parsed.events).toEqual([{ k: 'stop', t: 5, pid: 1 }, { k: 'poll', t: 6, what: 'sent' }]);
    expect(parsed.skipped).toBe(1);
    expect(() => fileTraceRecorder(path)).toThrow(/EEXIST/);
    const target = join(dir, 'target');
    writeFileSync(target, '');
    symlinkSync(target, join(dir, 'link.jsonl'));
    expect(() => fileTraceRecorder(join(dir, 'link.jsonl'))).toThrow();
    expect(readFileSync(target, 'utf8')).toBe('');
  });

  it('is asked for in the environment: none without it, a problem when it cannot be created, the file with its suffix otherwise', () => {
    expect(traceFromEnv({})).toBeNull();
    expect(traceFromEnv({ GPU_SHARE_PACER_TRACE: '' })).toBeNull();
    expect(traceFromEnv({ GPU_SHARE_PACER_TRACE: join(dir, 'no-such-folder', 'trace') })).toEqual({ problem: expect.stringMatching(/^GPU_SHARE_PACER_TRACE: cannot create .*no-such-folder\/trace \(/) });
    const traced = traceFromEnv({ GPU_SHARE_PACER_TRACE: join(dir, 'steps') }, '.42');
    if (traced === null || !('recorder' in traced)) throw new Error('no recorder');
    traced.recorder.record({ k: 'step', t: 5, pid: 42, mono: 3, us: 700 });
    traced.recorder.close();
    expect(parseGateTrace(readFileSync(join(dir, 'steps.42'), 'utf8')).events).toEqual([{ k: 'step', t: 5, pid: 42, mono: 3, us: 700 }]);
    // Created afresh: a second host of the same pid (or anyone who got there first) is refused.
    expect(traceFromEnv({ GPU_SHARE_PACER_TRACE: join(dir, 'steps') }, '.42')).toEqual({ problem: expect.stringContaining('cannot create') });
  });
});
