/** The process gate with a fake clock, a recording process control and an in-memory registry. */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { decodeSegment, encodeEmptySegment, encodeSlot } from '../../electron/core/registry/codec.js';
import { judgeOneShot } from '../../electron/core/registry/liveness.js';
import type { RegistryMember } from '../../electron/core/registry/member.js';
import { resolvePeers, type AlivePeer } from '../../electron/core/registry/view.js';
import { PREPARED_MAX_AGE_US, ProcessGate } from '../../electron/core/pacer/process-gate.js';

const ENGINE = 4242;

/** Slot 0 (ours, weight 2) and slot 1 (another peer, weight 1), both active: 2:1, a 120 ms period,
 *  our window [0, 80 ms). */
function setUp(): { clock: FakeClock; gate: ProcessGate; signals: string[]; counts: { peers: number; cpu: number } } {
  const clock = new FakeClock();
  clock.stepWall(120_000 - (clock.wallUs() % 120_000)); // a period starts
  const counts = { peers: 0, cpu: 0 };
  const signals: string[] = [];
  let cpuUs = 0;
  const peers = (): readonly AlivePeer[] => {
    counts.peers++;
    const bytes = encodeEmptySegment();
    encodeSlot(bytes, 0, { pid: ENGINE, weight: 2, active: true, heartbeatUs: clock.wallUs() });
    encodeSlot(bytes, 1, { pid: 777, weight: 1, active: true, heartbeatUs: clock.wallUs() });
    const decoded = decodeSegment(bytes);
    return resolvePeers(decoded, judgeOneShot(decoded.slots, clock.wallUs()));
  };
  const gate = new ProcessGate({
    clock,
    control: {
      suspend: () => (signals.push('suspend'), true),
      resume: () => (signals.push('resume'), true),
    },
    // The engine works whenever it may run: 1 ms of CPU per call.
    activity: { workUs: () => (counts.cpu++, (cpuUs += 1_000)) },
    peers,
  });
  const member = { slot: 0, set: () => true } as unknown as RegistryMember;
  gate.add(ENGINE, member);
  return { clock, gate, signals, counts };
}

describe('process gate: prepare before an edge', () => {
  it('a step right after prepare() only decides and signals (no registry read, no sampling)', () => {
    const { clock, gate, signals, counts } = setUp();
    clock.advance(10_000);
    gate.step(); // active from now on, inside our window
    clock.advance(gate.step()); // at most SAMPLE_INTERVAL_US: 60 ms
    const untilEdge = gate.step();
    expect(untilEdge).toBe(20_000); // our window ends at 80 ms
    expect(signals).toEqual([]);
    clock.advance(untilEdge - 2_000);
    gate.prepare();
    const before = { ...counts };
    clock.advance(2_000); // the edge
    gate.step();
    expect(counts).toEqual(before);
    expect(signals).toEqual(['suspend']); // decided on the prepared view at the edge's time
  });

  it('a prepared view older than PREPARED_MAX_AGE_US is not used', () => {
    const { clock, gate, counts } = setUp();
    clock.advance(10_000);
    gate.step();
    gate.prepare();
    const before = counts.peers;
    clock.advance(PREPARED_MAX_AGE_US + 1);
    gate.step();
    expect(counts.peers).toBe(before + 1);
  });
});

describe('process gate: known idleness', () => {
  /** One engine (slot 0) and a busy rival (slot 1); `busy` is what the engine says of itself
   *  (null: it cannot say), its CPU time advances while `working`. Returns when `active` was
   *  last published true→false, µs after the engine stopped working. */
  function releaseAfterStop(busyNow: (() => boolean | null) | undefined, working: { on: boolean }): number | null {
    const clock = new FakeClock();
    let cpuUs = 0;
    const published: boolean[] = [];
    const peers = (): readonly AlivePeer[] => {
      const bytes = encodeEmptySegment();
      encodeSlot(bytes, 0, { pid: ENGINE, weight: 1, active: published.at(-1) ?? false, heartbeatUs: clock.wallUs() });
      encodeSlot(bytes, 1, { pid: 777, weight: 1, active: true, heartbeatUs: clock.wallUs() });
      const decoded = decodeSegment(bytes);
      return resolvePeers(decoded, judgeOneShot(decoded.slots, clock.wallUs()));
    };
    const gate = new ProcessGate({
      clock,
      control: { suspend: () => true, resume: () => true },
      activity: { workUs: () => (working.on ? (cpuUs += 5_000) : cpuUs), ...(busyNow === undefined ? {} : { busyNow }) },
      peers,
    });
    const member = { slot: 0, set: (fields: { active?: boolean }) => (fields.active !== undefined && published.push(fields.active), true) } as unknown as RegistryMember;
    gate.add(ENGINE, member);
    for (let t = 0; t < 1_000_000; t += 10_000) {
      gate.step();
      clock.advance(10_000);
    }
    expect(published.at(-1)).toBe(true);
    working.on = false;
    for (let t = 0; t < 3_000_000; t += 10_000) {
      gate.step();
      if (published.at(-1) === false) return t;
      clock.advance(10_000);
    }
    return null;
  }

  it('an engine that says it has nothing in flight clears active within the 150 ms hysteresis, one known only by CPU time after 2 s', () => {
    const working = { on: true };
    const known = releaseAfterStop(() => working.on, working);
    expect(known).not.toBeNull();
    expect(known).toBeGreaterThanOrEqual(150_000);
    expect(known).toBeLessThanOrEqual(160_000);
    const cpuOnly = releaseAfterStop(undefined, { on: true });
    expect(cpuOnly).toBeGreaterThanOrEqual(2_000_000);
    // An engine that cannot say right now (null) falls back on the CPU rule too.
    const silent = { on: true };
    expect(releaseAfterStop(() => (silent.on ? true : null), silent)).toBeGreaterThanOrEqual(2_000_000);
  });
});
