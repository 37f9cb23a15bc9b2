/** Pressure hysteresis with a fake clock: worsens at once, recovers after 30 s below the exit. */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { POLICY_M10_V1, type PressureLevel } from '../../electron/core/planner/policy.js';
import { PressureTracker, levelAfterEvictions, pressureHoldsBack } from '../../electron/core/planner/pressure.js';

describe('PressureTracker', () => {
  it('worsens at once through every level', () => {
    const clock = new FakeClock();
    const tracker = new PressureTracker(POLICY_M10_V1);
    expect(tracker.observe(0.5, clock.monoUs())).toBe('NORMAL');
    expect(tracker.observe(0.8, clock.monoUs())).toBe('ELEVATED');
    expect(tracker.observe(0.9, clock.monoUs())).toBe('HIGH');
    expect(tracker.observe(0.97, clock.monoUs())).toBe('CRITICAL');
    expect(new PressureTracker(POLICY_M10_V1).observe(0.99, 0)).toBe('CRITICAL');
  });

  it('recovers only after 30 s below the exit threshold, and a blip restarts the hold', () => {
    const clock = new FakeClock();
    const tracker = new PressureTracker(POLICY_M10_V1);
    tracker.observe(0.95, clock.monoUs()); // HIGH
    // Between exit (0.85) and enter (0.90): stays HIGH however long.
    for (let i = 0; i < 100; i++) {
      clock.advance(1_000_000);
      expect(tracker.observe(0.87, clock.monoUs())).toBe('HIGH');
    }
    // Below HIGH's exit, still above ELEVATED's: 29.9 s is not enough.
    for (let t = 0; t < 29_900_000; t += 100_000) {
      expect(tracker.observe(0.8, clock.monoUs())).toBe('HIGH');
      clock.advance(100_000);
    }
    expect(tracker.observe(0.86, clock.monoUs())).toBe('HIGH'); // a blip at 0.86 restarts the hold
    // Samples every 0.5 s from here on: continuous evidence.
    const feed = (fraction: number, forUs: number): PressureLevel => {
      let level = tracker.level;
      for (let t = 0; t < forUs; t += 500_000) {
        clock.advance(500_000);
        level = tracker.observe(fraction, clock.monoUs());
      }
      return level;
    };
    // The hold counts from the first reading below: 30 s after it, the 61st reading recovers.
    expect(feed(0.8, 30_000_000)).toBe('HIGH');
    expect(feed(0.8, 500_000)).toBe('ELEVATED'); // 30 s below 0.85: one level down
    expect(feed(0.8, 30_000_000)).toBe('ELEVATED'); // 0.80 still holds ELEVATED (exit 0.75)
    expect(feed(0.5, 30_000_000)).toBe('ELEVATED');
    expect(feed(0.5, 500_000)).toBe('NORMAL');
  });

  it('does not recover across a gap: two samples 30 s apart with nothing between are no evidence', () => {
    const clock = new FakeClock();
    const tracker = new PressureTracker(POLICY_M10_V1);
    expect(tracker.observe(0.99, clock.monoUs())).toBe('CRITICAL');
    expect(tracker.observe(0.5, clock.monoUs())).toBe('CRITICAL'); // below every exit: the hold starts
    clock.advance(30_000_000);
    // The next sample, 30 s later: the gap (longer than the 2 s staleness limit) restarts the hold.
    expect(tracker.observe(0.5, clock.monoUs())).toBe('CRITICAL');
    // Unknown readings in between (failed queries) are no evidence either.
    for (let t = 0; t < 29_000_000; t += 500_000) {
      clock.advance(500_000);
      tracker.observe(Number.NaN, clock.monoUs());
    }
    clock.advance(1_000_000);
    expect(tracker.observe(0.5, clock.monoUs())).toBe('CRITICAL');
    // 30 s of continuous samples, each within the limit of the one before: it recovers.
    for (let t = 0; t < 29_500_000; t += 500_000) {
      clock.advance(500_000);
      expect(tracker.observe(0.5, clock.monoUs())).toBe('CRITICAL');
    }
    clock.advance(500_000);
    expect(tracker.observe(0.5, clock.monoUs())).toBe('NORMAL');
  });

  it('a gap of exactly the staleness limit is still continuous; one microsecond more is not', () => {
    const clock = new FakeClock();
    const tracker = new PressureTracker(POLICY_M10_V1);
    tracker.observe(0.95, clock.monoUs()); // HIGH
    // Readings 2 s apart, from 2 s to 32 s: 30 s from the first below the threshold.
    for (let t = 0; t < 32_000_000; t += 2_000_000) {
      clock.advance(2_000_000);
      tracker.observe(0.5, clock.monoUs());
    }
    expect(tracker.level).toBe('NORMAL');
    tracker.observe(0.95, clock.monoUs());
    for (let t = 0; t < 40_000_000; t += 2_000_001) {
      clock.advance(2_000_001);
      expect(tracker.observe(0.5, clock.monoUs())).toBe('HIGH');
    }
  });

  it('ignores an unknown reading', () => {
    const tracker = new PressureTracker(POLICY_M10_V1);
    tracker.observe(0.92, 0);
    expect(tracker.observe(Number.NaN, 1)).toBe('HIGH');
  });
});

describe('the level a plan is judged by after its evictions', () => {
  const GiB = 1024 ** 3;
  it.each([
    // tracked, used, freed → level (24 GiB; exit thresholds 75 / 85 / 93 %)
    ['CRITICAL', 23.5, 0, 'CRITICAL'], // nothing stopped: the tracked level, hysteresis and all
    ['CRITICAL', 23.5, 11.75, 'NORMAL'], // 11.75 GiB left: 49 %
    ['CRITICAL', 23.5, 4.75, 'ELEVATED'], // 18.75 GiB: 78 %
    ['CRITICAL', 23.5, 2.5, 'HIGH'], // 21 GiB: 87.5 %
    ['CRITICAL', 23.5, 0.5, 'CRITICAL'], // 23 GiB: 95.8 %, above CRITICAL's exit
    ['HIGH', 21, 1, 'ELEVATED'], // 20 GiB: 83 %, under HIGH's exit
    ['ELEVATED', 23, 0.5, 'ELEVATED'], // never above the tracked level
  ] as const)('%s at %d GiB, %d GiB stopped', (tracked, used, freed, expected) => {
    expect(levelAfterEvictions(tracked, used * GiB, freed * GiB, 24 * GiB, POLICY_M10_V1)).toBe(expected);
  });

  it('holds back every load at CRITICAL, background and lab ones at ELEVATED and HIGH', () => {
    expect(['interactive', 'background', 'lab'].map((p) => pressureHoldsBack('CRITICAL', p as 'lab'))).toEqual([true, true, true]);
    for (const level of ['ELEVATED', 'HIGH'] as const) expect(['interactive', 'background', 'lab'].map((p) => pressureHoldsBack(level, p as 'lab'))).toEqual([false, true, true]);
    expect(['interactive', 'background', 'lab'].map((p) => pressureHoldsBack('NORMAL', p as 'lab'))).toEqual([false, false, false]);
  });
});
