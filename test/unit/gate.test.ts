/** The cooperative gate with a fake clock and an in-memory registry: no sleeping, no processes. */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { decodeSegment, encodeEmptySegment, encodeSlot } from '../../electron/core/registry/codec.js';
import { judgeOneShot } from '../../electron/core/registry/liveness.js';
import { resolvePeers } from '../../electron/core/registry/view.js';
import { CooperativeGate, LAST_STEP_FIT, PREPARE_US, TEAM_LAST_STEP_FIT, TEAM_WHOLE_STEP_MAX_US, START_LEAD_US, VIEW_MAX_AGE_US, WAIT_REREAD_US, decideGate, lastStepFit, type GateDecision, type GateRegistry, type Sleep } from '../../electron/core/pacer/gate.js';

/** A registry in memory: each gate publishes into its own slot; peers() reads them all. */
class MemoryRegistry {
  readonly slots = new Map<number, { weight: number; active: boolean; busyPpm: number }>();
  constructor(private readonly clock: FakeClock) {}

  join(slot: number, weight: number, active = false): GateRegistry {
    this.slots.set(slot, { weight, active, busyPpm: 0 });
    return {
      peers: () => this.peers(),
      selfSlot: () => slot,
      publish: ({ active: isActive, busyPpm }) => {
        const record = this.slots.get(slot);
        if (record) Object.assign(record, { active: isActive, busyPpm });
      },
    };
  }

  peers(): ReturnType<typeof resolvePeers> {
    const bytes = encodeEmptySegment();
    for (const [slot, r] of this.slots) encodeSlot(bytes, slot, { pid: 100 + slot, weight: r.weight, active: r.active, busyPpm: r.busyPpm, heartbeatUs: this.clock.wallUs() });
    const decoded = decodeSegment(bytes);
    return resolvePeers(decoded, judgeOneShot(decoded.slots, this.clock.wallUs()));
  }
}

/** A sleep that records what was asked (and whether precisely) and moves the fake clock instead
 *  of waiting. */
function fakeSleep(clock: FakeClock): { sleep: Sleep; slept: number[]; precise: boolean[] } {
  const slept: number[] = [];
  const precise: boolean[] = [];
  return {
    slept,
    precise,
    sleep: (us, isPrecise = true) => {
      slept.push(us);
      precise.push(isPrecise);
      clock.advance(us);
      return Promise.resolve();
    },
  };
}

/** A wall time at the start of a 120 ms period (2:1 → slot 0 owns [0, 80), slot 1 [80, 120)). */
function atPeriodStart(clock: FakeClock, periodUs: number): void {
  clock.stepWall(periodUs - (clock.wallUs() % periodUs));
}

describe('cooperative gate (fake clock)', () => {
  it('never sleeps when the caller is alone', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    const { sleep, slept } = fakeSleep(clock);
    const gate = new CooperativeGate(registry.join(0, 1), clock, sleep);
    for (let i = 0; i < 100; i++) {
      clock.advance(5_000);
      expect((await gate.afterStep(5_000)).kind).toBe('alone');
    }
    expect(slept).toEqual([]);
    expect(registry.slots.get(0)).toMatchObject({ active: true });
  });

  it('never sleeps while every other peer is idle', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(1, 5, false);
    const { sleep, slept } = fakeSleep(clock);
    const gate = new CooperativeGate(registry.join(0, 1), clock, sleep);
    for (let i = 0; i < 50; i++) {
      clock.advance(5_000);
      expect((await gate.afterStep(5_000)).kind).toBe('others-idle');
    }
    expect(slept).toEqual([]);
  });

  it('never sleeps inside its window, and sleeps exactly to the next window start outside it', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(1, 1, true);
    const { sleep, slept, precise } = fakeSleep(clock);
    const gate = new CooperativeGate(registry.join(0, 2, true), clock, sleep);
    atPeriodStart(clock, 120_000);
    clock.advance(10_000); // 10 ms into slot 0's window [0, 80)
    expect((await gate.afterStep(5_000)).kind).toBe('in-window');
    clock.advance(64_999); // 74.999 ms: still inside, and a 5 ms step ends before 80 ms
    expect((await gate.afterStep(5_000)).kind).toBe('in-window');
    clock.advance(5_001); // 80 ms: slot 1's window begins; ours is back at 120 ms
    const decision = await gate.afterStep(5_000);
    expect(decision).toMatchObject({ kind: 'wait', waitUs: 40_000 - START_LEAD_US });
    // Two naps: to PREPARE_US before the window (a fresh look at the registry there), then to its
    // start less the lead that the step's dispatch takes.
    expect(slept).toEqual([40_000 - START_LEAD_US - PREPARE_US, PREPARE_US]);
    // The first ends in a fresh read, not in a step: a timer alone will do (one wake-up, not two).
    expect(precise).toEqual([false, true]);
    expect(clock.wallUs() % 120_000).toBe(120_000 - START_LEAD_US); // woke exactly the lead before our window's start
    expect(gate.stats).toMatchObject({ steps: 3, sleeps: 1, sleptUs: 40_000 - START_LEAD_US, decisions: { 'in-window': 2, wait: 1 } });
  });

  it('decides again after a sleep that ended early', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(1, 1, true);
    const slept: number[] = [];
    // A timer that fires 1 ms early the first time.
    const early = (us: number): Promise<void> => {
      slept.push(us);
      clock.advance(slept.length === 1 ? us - 1_000 : us);
      return Promise.resolve();
    };
    const gate = new CooperativeGate(registry.join(0, 2, true), clock, early);
    atPeriodStart(clock, 120_000);
    clock.advance(80_000);
    await gate.afterStep(5_000);
    expect(slept).toEqual([40_000 - START_LEAD_US - PREPARE_US, PREPARE_US + 1_000]); // woke 1 ms early: the last nap takes the 3 ms left, no nap of its own
    expect(clock.wallUs() % 120_000).toBe(120_000 - START_LEAD_US);
  });

  it('decides again after a timer that fired early by more than the slack', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(1, 1, true);
    const slept: number[] = [];
    const precise: boolean[] = [];
    const early: Sleep = (us, isPrecise = true) => {
      slept.push(us);
      precise.push(isPrecise);
      clock.advance(slept.length === 1 ? us - 5_000 : us);
      return Promise.resolve();
    };
    const gate = new CooperativeGate(registry.join(0, 2, true), clock, early);
    atPeriodStart(clock, 120_000);
    clock.advance(80_000);
    await gate.afterStep(5_000);
    // 7 ms left after the first nap: another nap to 2 ms before the window, then the rest.
    expect(slept).toEqual([40_000 - START_LEAD_US - PREPARE_US, 5_000, PREPARE_US]);
    expect(precise).toEqual([false, false, true]);
    expect(clock.wallUs() % 120_000).toBe(120_000 - START_LEAD_US);
  });

  it('re-reads the registry at least every 50 ms while it waits: a peer gone idle gives its time at once', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    const other = registry.join(1, 9, true); // 1:9 → our window is the first 10 % of a 400 ms period
    const slept: number[] = [];
    const gate = new CooperativeGate(registry.join(0, 1, true), clock, (us) => {
      slept.push(us);
      clock.advance(us);
      // The other peer goes idle 60 ms into our wait.
      if (slept.reduce((a, b) => a + b, 0) >= 60_000) other.publish({ active: false, busyPpm: 0 });
      return Promise.resolve();
    });
    atPeriodStart(clock, 400_000);
    clock.advance(50_000); // past our window: the next one is 350 ms away
    const first = await gate.afterStep(5_000);
    expect(first).toMatchObject({ kind: 'wait' });
    expect(first.kind === 'wait' ? first.waitUs : 0).toBeGreaterThan(300_000);
    // Two 50 ms naps, then on: not the whole wait.
    expect(slept.every((us) => us <= WAIT_REREAD_US)).toBe(true);
    expect(slept.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(100_000);
  });

  it('the peer with the later window sleeps until it starts', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(0, 2, true);
    const { sleep, slept } = fakeSleep(clock);
    const gate = new CooperativeGate(registry.join(1, 1, true), clock, sleep);
    atPeriodStart(clock, 120_000);
    clock.advance(30_000);
    await gate.afterStep(5_000);
    expect(slept).toEqual([50_000 - START_LEAD_US - PREPARE_US, PREPARE_US]);
    expect(clock.wallUs() % 120_000).toBe(80_000 - START_LEAD_US);
  });

  it('a peer going idle releases its window within 2 s', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    const other = fakeSleep(clock);
    const otherGate = new CooperativeGate(registry.join(1, 1), clock, other.sleep);
    const { sleep, slept } = fakeSleep(clock);
    const gate = new CooperativeGate(registry.join(0, 1), clock, sleep);
    await otherGate.afterStep(5_000); // the other peer decodes once, then stops
    expect(registry.slots.get(1)?.active).toBe(true);
    // We keep decoding; the other one only runs its heartbeat refresh every 500 ms.
    let releasedAfterUs: number | null = null;
    const stoppedAt = clock.monoUs();
    let refreshedAt = stoppedAt;
    for (let t = 0; t < 3_000_000 && releasedAfterUs === null; t += 5_000) {
      clock.advance(5_000);
      if (clock.monoUs() - refreshedAt >= 500_000) {
        otherGate.refresh();
        refreshedAt = clock.monoUs();
      }
      const decision = await gate.afterStep(5_000);
      if (decision.kind === 'others-idle') releasedAfterUs = clock.monoUs() - stoppedAt;
    }
    expect(releasedAfterUs).not.toBeNull();
    expect(releasedAfterUs).toBeLessThanOrEqual(2_500_000 + VIEW_MAX_AGE_US); // 2 s activity window + one refresh + the age of our copy of the registry
    expect(registry.slots.get(1)?.active).toBe(false);
    expect(slept.length).toBeGreaterThan(0); // it was paced while the other was active
  });

  it('reads the registry at most once per VIEW_MAX_AGE_US while stepping, and at once when its own activity changes', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(1, 1, true);
    // Weight 8: our window is the first 320 ms of the period, with two peers (period 360 ms) and
    // with three (400 ms), so that every step below falls inside it.
    const own = registry.join(0, 8);
    let reads = 0;
    const counted: GateRegistry = { ...own, peers: () => (reads++, own.peers()) };
    const { sleep } = fakeSleep(clock);
    const gate = new CooperativeGate(counted, clock, sleep);
    atPeriodStart(clock, 3_600_000); // both periods start here
    // The first step publishes us active before it reads, so it already sees its window.
    clock.advance(1_000);
    expect((await gate.afterStep(1_000)).kind).toBe('in-window');
    expect(reads).toBe(1);
    // 1 ms steps for 60 ms inside our window: one read per VIEW_MAX_AGE_US, not one per step.
    for (let i = 0; i < 60; i++) {
      clock.advance(1_000);
      await gate.afterStep(1_000);
    }
    expect(reads).toBe(1 + Math.floor(60_000 / VIEW_MAX_AGE_US));
    // A new peer becomes active: the gate sees it within VIEW_MAX_AGE_US.
    registry.join(2, 1, true);
    const before = reads;
    let decision: GateDecision | null = null;
    for (let i = 0; i < VIEW_MAX_AGE_US / 1_000; i++) {
      clock.advance(1_000);
      decision = await gate.afterStep(1_000);
    }
    expect(reads).toBe(before + 1);
    expect(decision?.kind === 'in-window' ? decision.schedule.windows.length : 0).toBe(3);
  });

  it('publishes busy_ppm as the fraction of the last second spent in steps', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    const { sleep } = fakeSleep(clock);
    const gate = new CooperativeGate(registry.join(0, 1), clock, sleep);
    for (let i = 0; i < 200; i++) {
      clock.advance(10_000); // a 5 ms step every 10 ms: 50 % busy
      await gate.afterStep(5_000);
    }
    gate.refresh();
    expect(registry.slots.get(0)?.busyPpm).toBeCloseTo(500_000, -4);
  });
});

describe('decideGate', () => {
  it('lets a caller without a slot through', () => {
    expect(decideGate([], null, 0)).toEqual({ kind: 'alone' });
  });

  it('records how far past its window the last step of a window ran', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(1, 1, true);
    const { sleep } = fakeSleep(clock);
    const gate = new CooperativeGate(registry.join(0, 2, true), clock, sleep);
    atPeriodStart(clock, 120_000);
    // 2:1 → our window is [0, 80 ms). Steps of 7 ms up to 70 ms; the one started there (10 ms
    // left, expected to take 7) takes 12 and ends at 82 ms.
    for (let t = 7_000; t <= 70_000; t += 7_000) {
      clock.advance(7_000);
      await gate.afterStep(7_000);
    }
    clock.advance(12_000);
    await gate.afterStep(12_000);
    expect(gate.overshoot.take()).toEqual([2_000]);
    expect(gate.overshoot.take()).toEqual([]);
  });

  it('a step of which less than half fits in what is left of the window waits for the next window; one longer than a whole window goes', () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(0, 2, true);
    registry.join(1, 1, true);
    const peers = registry.peers();
    atPeriodStart(clock, 120_000);
    const start = clock.wallUs();
    expect(LAST_STEP_FIT).toBe(0.5);
    // Slot 0 owns [0, 80 ms) of each 120 ms period: at 75 ms, 5 ms are left.
    const at75 = start + 75_000;
    expect(decideGate(peers, 0, at75).kind).toBe('in-window');
    expect(decideGate(peers, 0, at75, { nextStepUs: 4_000 }).kind).toBe('in-window');
    // 6 ms: 5 of it fit, it goes and runs 1 ms past the end; 10 ms: half fits, it goes.
    expect(decideGate(peers, 0, at75, { nextStepUs: 6_000 }).kind).toBe('in-window');
    expect(decideGate(peers, 0, at75, { nextStepUs: 10_000 }).kind).toBe('in-window');
    // 10.002 ms: less than half fits, it waits for the next window (45 ms away).
    expect(decideGate(peers, 0, at75, { nextStepUs: 10_002 })).toMatchObject({ kind: 'wait', waitUs: 45_000 });
    // A step longer than the window would never fit: it starts when it can.
    expect(decideGate(peers, 0, at75, { nextStepUs: 90_000 }).kind).toBe('in-window');
    // Slot 1 owns [80, 120): at 118 ms, a 3 ms step goes (2 of it fit), a 5 ms one waits for the next 80 ms.
    expect(decideGate(peers, 1, start + 118_000, { nextStepUs: 3_000 }).kind).toBe('in-window');
    expect(decideGate(peers, 1, start + 118_000, { nextStepUs: 5_000 })).toMatchObject({ kind: 'wait', waitUs: 82_000 });
    // With a lead (the cooperative gate's), that wait ends the lead before the window.
    expect(decideGate(peers, 1, start + 118_000, { nextStepUs: 5_000, leadUs: START_LEAD_US })).toMatchObject({ kind: 'wait', waitUs: 82_000 - START_LEAD_US });
  });

  it("a team's short step goes only when all of it fits in what is left of the window; a long one when half does", () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(0, 2, true);
    registry.join(1, 1, true);
    const peers = registry.peers();
    atPeriodStart(clock, 120_000);
    // 1.5 ms left of slot 0's [0, 80 ms).
    const at785 = clock.wallUs() + 78_500;
    const team = (nextStepUs: number): GateDecision => decideGate(peers, 0, at785, { nextStepUs, cpuTeam: true });
    expect(team(1_000).kind).toBe('in-window');
    expect(team(1_500).kind).toBe('in-window');
    // A 1.8 ms step: half a step's rule lets it go, a team's waits for the next window (41.5 ms away).
    expect(decideGate(peers, 0, at785, { nextStepUs: 1_800 }).kind).toBe('in-window');
    expect(team(1_800)).toMatchObject({ kind: 'wait', waitUs: 41_500 });
    // Longer than TEAM_WHOLE_STEP_MAX_US: half of it fitting is enough again.
    expect(team(3_000).kind).toBe('in-window');
    expect(team(3_002)).toMatchObject({ kind: 'wait', waitUs: 41_500 });
  });

  it('asks all of a short step of a team to fit, half of a long one, and half of anyone else\'s', () => {
    expect(TEAM_LAST_STEP_FIT).toBe(1);
    expect(lastStepFit(true, 700)).toBe(TEAM_LAST_STEP_FIT);
    expect(lastStepFit(true, TEAM_WHOLE_STEP_MAX_US)).toBe(TEAM_LAST_STEP_FIT);
    expect(lastStepFit(true, TEAM_WHOLE_STEP_MAX_US + 1)).toBe(LAST_STEP_FIT);
    expect(lastStepFit(false, 700)).toBe(LAST_STEP_FIT);
  });

  it("a gate told its engine decodes with a team holds a short step that would run past the window's end", async () => {
    const run = async (cpuTeam: boolean): Promise<GateDecision> => {
      const clock = new FakeClock();
      const registry = new MemoryRegistry(clock);
      registry.join(1, 1, true);
      const { sleep } = fakeSleep(clock);
      const gate = new CooperativeGate(registry.join(0, 2, true), clock, sleep);
      gate.cpuTeam = cpuTeam;
      atPeriodStart(clock, 120_000);
      // 1.3 ms steps in slot 0's [0, 80 ms): after 61 of them, at 79.3 ms, 0.7 ms are left for
      // the next: more than half of it fits, not all.
      let decision: GateDecision = await gate.afterStep(1_300);
      for (let step = 1; step <= 61; step++) {
        clock.advance(1_300);
        decision = await gate.afterStep(1_300);
      }
      return decision;
    };
    expect((await run(false)).kind).toBe('in-window');
    expect((await run(true)).kind).toBe('wait');
  });

  it("with a lead, lets a window's first step go that long before the window, for its dispatch, and no earlier", () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(0, 2, true);
    registry.join(1, 1, true);
    const peers = registry.peers();
    atPeriodStart(clock, 120_000);
    const start = clock.wallUs();
    // Slot 1's window starts at 80 ms.
    const lead = START_LEAD_US;
    expect(decideGate(peers, 1, start + 80_000 - lead - 1, { nextStepUs: 3_000, leadUs: lead })).toMatchObject({ kind: 'wait', waitUs: 1 });
    // Within the lead, even a step that the fit rule would hold: the whole window is ahead of it.
    expect(decideGate(peers, 1, start + 80_000 - lead, { nextStepUs: 3_000, leadUs: lead }).kind).toBe('in-window');
    expect(decideGate(peers, 1, start + 80_000 - 1, { nextStepUs: 39_000, leadUs: lead }).kind).toBe('in-window');
    // Slot 0's window ended at 80 ms: it waits for its next one, less the lead, and goes within it.
    expect(decideGate(peers, 0, start + 80_000, { nextStepUs: 3_000, leadUs: lead })).toMatchObject({ kind: 'wait', waitUs: 40_000 - lead });
    expect(decideGate(peers, 0, start + 120_000 - lead, { nextStepUs: 3_000, leadUs: lead }).kind).toBe('in-window');
    // Without one (the process gate's: a continued engine runs at once), nothing goes early.
    expect(decideGate(peers, 1, start + 80_000 - 1, { nextStepUs: 3_000 })).toMatchObject({ kind: 'wait', waitUs: 1 });
  });

  it('expects the median of the last steps: the slow first steps of a window do not end it early', async () => {
    const clock = new FakeClock();
    const registry = new MemoryRegistry(clock);
    registry.join(1, 1, true);
    const { sleep } = fakeSleep(clock);
    const gate = new CooperativeGate(registry.join(0, 2, true), clock, sleep);
    atPeriodStart(clock, 120_000);
    // Three slow steps (3 ms) then 1 ms ones: the window is used to within a step of its end.
    const steps = [3_000, 3_000, 3_000, ...Array<number>(200).fill(1_000)];
    let lastInWindow = 0;
    for (const step of steps) {
      clock.advance(step);
      const decision = await gate.afterStep(step);
      const position = clock.wallUs() % 120_000;
      if (decision.kind !== 'wait' && position < 80_000) lastInWindow = Math.max(lastInWindow, position);
      if (decision.kind === 'wait') break;
    }
    expect(lastInWindow).toBeGreaterThanOrEqual(78_000);
    expect(gate.overshoot.take()).toEqual([0]);
  });
});
