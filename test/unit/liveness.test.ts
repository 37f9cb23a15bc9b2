import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { decodeSegment, encodeEmptySegment, encodeSlot } from '../../electron/core/registry/codec.js';
import { DEAD_AFTER_US, LivenessWatcher, isAliveOneShot, oneShotAgeUs } from '../../electron/core/registry/liveness.js';

const HOUR_US = 3_600_000_000;

/** A registry with one peer whose heartbeat the test controls. */
function segmentWith(heartbeatUs: number, pid = 100, bootUs = 1): ReturnType<typeof decodeSegment> {
  const bytes = encodeEmptySegment();
  encodeSlot(bytes, 0, { pid, bootUs, heartbeatUs, active: true });
  return decodeSegment(bytes);
}

describe('one-shot liveness', () => {
  it('is alive up to 3 s of age and dead past it', () => {
    const now = 1_800_000_000_000_000;
    expect(isAliveOneShot(now - DEAD_AFTER_US, now)).toBe(true);
    expect(isAliveOneShot(now - DEAD_AFTER_US - 1, now)).toBe(false);
  });

  it('treats a heartbeat slightly ahead as fresh and more than 3 s ahead as stale', () => {
    const now = 1_800_000_000_000_000;
    expect(oneShotAgeUs(now + 2_000_000, now)).toBe(0);
    expect(isAliveOneShot(now + 2_000_000, now)).toBe(true);
    expect(oneShotAgeUs(now + 3_000_001, now)).toBeNull();
    expect(isAliveOneShot(now + HOUR_US, now)).toBe(false);
  });
});

describe('watching reader, fake clock', () => {
  it('a wall-clock step of ±1 h kills nobody whose heartbeat keeps changing', () => {
    const clock = new FakeClock();
    const watcher = new LivenessWatcher();
    for (let tick = 0; tick < 60; tick++) {
      if (tick === 20) clock.stepWall(+HOUR_US);
      if (tick === 40) clock.stepWall(-2 * HOUR_US);
      clock.advance(500_000);
      // The peer heartbeats with the same (stepped) wall clock every 500 ms.
      const judged = watcher.observe(segmentWith(clock.wallUs()).slots, clock.wallUs(), clock.monoUs());
      expect(judged.get(0)?.alive, `tick ${tick}`).toBe(true);
      expect(judged.get(0)?.ageUs).toBe(0);
    }
  });

  it('a peer whose heartbeat stops dies 3 s later on the monotonic clock, whatever the wall clock does', () => {
    for (const step of [+HOUR_US, -HOUR_US]) {
      const clock = new FakeClock();
      const watcher = new LivenessWatcher();
      const last = clock.wallUs();
      expect(watcher.observe(segmentWith(last).slots, clock.wallUs(), clock.monoUs()).get(0)?.alive).toBe(true);
      clock.advance(1_000_000);
      clock.stepWall(step); // the stopped heartbeat now looks an hour old, or an hour ahead
      expect(watcher.observe(segmentWith(last).slots, clock.wallUs(), clock.monoUs()).get(0)?.alive).toBe(true);
      clock.advance(2_000_000);
      expect(watcher.observe(segmentWith(last).slots, clock.wallUs(), clock.monoUs()).get(0)).toEqual({ alive: true, ageUs: 3_000_000 });
      clock.advance(1);
      expect(watcher.observe(segmentWith(last).slots, clock.wallUs(), clock.monoUs()).get(0)?.alive).toBe(false);
    }
  });

  it('keeps no dead peer alive: a heartbeat stuck an hour in the future is dead from the first read on', () => {
    const clock = new FakeClock();
    const watcher = new LivenessWatcher();
    const stuck = clock.wallUs() + HOUR_US;
    for (let tick = 0; tick < 20; tick++) {
      expect(watcher.observe(segmentWith(stuck).slots, clock.wallUs(), clock.monoUs()).get(0)?.alive).toBe(false);
      clock.advance(500_000);
    }
    // Even after the wall clock catches up with it, an unchanging heartbeat stays dead.
    clock.stepWall(HOUR_US);
    expect(watcher.observe(segmentWith(stuck).slots, clock.wallUs(), clock.monoUs()).get(0)?.alive).toBe(false);
  });

  it('a dead slot comes back when its heartbeat changes, and a new identity starts from the wall clock', () => {
    const clock = new FakeClock();
    const watcher = new LivenessWatcher();
    const old = clock.wallUs() - 10_000_000;
    expect(watcher.observe(segmentWith(old).slots, clock.wallUs(), clock.monoUs()).get(0)?.alive).toBe(false);
    clock.advance(500_000);
    expect(watcher.observe(segmentWith(old + 1).slots, clock.wallUs(), clock.monoUs()).get(0)?.alive).toBe(true);
    // Another process claimed the slot: judged afresh on the wall clock (its heartbeat is 1 s old).
    const claimedHeartbeat = clock.wallUs() - 1_000_000;
    const judge = (): ReturnType<LivenessWatcher['observe']> => watcher.observe(segmentWith(claimedHeartbeat, 200, 2).slots, clock.wallUs(), clock.monoUs());
    expect(judge().get(0)).toEqual({ alive: true, ageUs: 1_000_000 });
    clock.advance(2_000_000);
    expect(judge().get(0)).toEqual({ alive: true, ageUs: 3_000_000 });
    clock.advance(1);
    expect(judge().get(0)?.alive).toBe(false);
  });

  it('forgets a slot that was freed', () => {
    const clock = new FakeClock();
    const watcher = new LivenessWatcher();
    watcher.observe(segmentWith(clock.wallUs()).slots, clock.wallUs(), clock.monoUs());
    expect(watcher.observe([], clock.wallUs(), clock.monoUs()).size).toBe(0);
  });
});
