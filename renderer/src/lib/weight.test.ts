import { describe, expect, it } from 'vitest';
import { createThrottle, isWeightKey, parseWeightInput, positionToWeight, SLIDER_STEPS, stepWeight, weightToPosition, WEIGHT_MARKS, type Timers } from './weight.js';
import { WEIGHT_PRESETS } from '../../../electron/core/contract.js';

/** Timers stepped by hand: nothing sleeps. */
class ManualTimers implements Timers {
  time = 0;
  private queue: { at: number; callback: () => void; id: number }[] = [];
  private nextId = 1;
  now(): number {
    return this.time;
  }
  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.queue.push({ at: this.time + ms, callback, id });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.queue = this.queue.filter((t) => t.id !== handle);
  }
  advance(ms: number): void {
    const until = this.time + ms;
    for (;;) {
      const due = this.queue.filter((t) => t.at <= until).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      this.queue = this.queue.filter((t) => t !== due);
      this.time = due.at;
      due.callback();
    }
    this.time = until;
  }
}

describe('log-scale slider', () => {
  it('spans the contract\'s whole range, 0.01 to 100, with 1 in the middle', () => {
    expect(positionToWeight(0)).toBe(0.01);
    expect(positionToWeight(SLIDER_STEPS)).toBe(100);
    expect(positionToWeight(SLIDER_STEPS / 2)).toBe(1);
    expect(positionToWeight(SLIDER_STEPS / 4)).toBe(0.1);
    // Every weight the number field takes has its own place on the track: 50 no longer pins it.
    expect(weightToPosition(50)).toBeLessThan(SLIDER_STEPS);
    expect(weightToPosition(10)).toBeLessThan(weightToPosition(50));
    expect(weightToPosition(0.02)).toBeGreaterThan(0);
  });

  it('marks 0.25, 0.5, 1, 2 and 4, the tray\'s presets, where a drag lands on them', () => {
    expect(WEIGHT_MARKS).toEqual([0.25, 0.5, 1, 2, 4]);
    expect(WEIGHT_MARKS).toBe(WEIGHT_PRESETS);
    for (const mark of WEIGHT_MARKS) expect(positionToWeight(weightToPosition(mark))).toBe(mark);
  });

  it('gives equal travel to equal ratios', () => {
    const travel = (a: number, b: number): number => weightToPosition(b) - weightToPosition(a);
    expect(Math.abs(travel(0.5, 1) - travel(1, 2))).toBeLessThanOrEqual(1);
    expect(Math.abs(travel(2, 4) - travel(4, 8))).toBeLessThanOrEqual(1);
  });

  it('round-trips and pins out-of-range weights to the ends', () => {
    for (let p = 0; p <= SLIDER_STEPS; p += 50) {
      const w = positionToWeight(p);
      expect(Math.abs(weightToPosition(w) - p)).toBeLessThanOrEqual(12);
    }
    expect(weightToPosition(0.01)).toBe(0);
    expect(weightToPosition(100)).toBe(SLIDER_STEPS);
    expect(weightToPosition(0)).toBe(0);
    expect(weightToPosition(1000)).toBe(SLIDER_STEPS);
    expect(positionToWeight(Number.NaN)).toBe(0.01);
  });
});

describe('keyboard steps', () => {
  it('steps ×1.1 with the arrows, at two significant figures', () => {
    expect(stepWeight(1, 'ArrowUp')).toBe(1.1);
    expect(stepWeight(1, 'ArrowRight')).toBe(1.1);
    expect(stepWeight(1, 'ArrowDown')).toBe(0.91);
    expect(stepWeight(1.1, 'ArrowLeft')).toBe(1);
    expect(stepWeight(2, 'ArrowUp')).toBe(2.2);
    expect(stepWeight(10, 'ArrowDown')).toBe(9.1);
    expect(stepWeight(100, 'ArrowUp')).toBe(100);
    expect(stepWeight(0.01, 'ArrowDown')).toBe(0.01);
    // Out of range or not a number: from the nearest end, or from 1.
    expect(stepWeight(500, 'ArrowDown')).toBe(91);
    expect(stepWeight(Number.NaN, 'ArrowUp')).toBe(1.1);
  });

  it('never stands still and never jumps: every arrow press moves by 4–15 % (two significant figures), end to end', () => {
    for (const key of ['ArrowUp', 'ArrowDown'] as const) {
      let w = key === 'ArrowUp' ? 0.01 : 100;
      let presses = 0;
      while (key === 'ArrowUp' ? w < 100 : w > 0.01) {
        const next = stepWeight(w, key);
        const ratio = key === 'ArrowUp' ? next / w : w / next;
        if (next !== 100 && next !== 0.01) {
          expect(ratio, `${w} → ${next}`).toBeGreaterThan(1.04);
          expect(ratio, `${w} → ${next}`).toBeLessThan(1.15);
        }
        w = next;
        presses++;
      }
      // Four decades at ~×1.1 a press: about 97 presses, never a runaway.
      expect(presses).toBeGreaterThan(80);
      expect(presses).toBeLessThan(110);
    }
  });

  it('doubles, halves and jumps to the ends', () => {
    expect(stepWeight(1.5, 'PageUp')).toBe(3);
    expect(stepWeight(1.5, 'PageDown')).toBe(0.75);
    expect(stepWeight(80, 'PageUp')).toBe(100);
    expect(stepWeight(0.015, 'PageDown')).toBe(0.01);
    expect(stepWeight(3, 'Home')).toBe(0.01);
    expect(stepWeight(3, 'End')).toBe(100);
    expect(isWeightKey('ArrowUp')).toBe(true);
    expect(isWeightKey('a')).toBe(false);
  });
});

describe('number field', () => {
  it('accepts the contract range and explains the rest', () => {
    expect(parseWeightInput(' 2.5 ')).toEqual({ ok: true, weight: 2.5 });
    expect(parseWeightInput('0,5')).toEqual({ ok: true, weight: 0.5 });
    expect(parseWeightInput('0.01')).toEqual({ ok: true, weight: 0.01 });
    expect(parseWeightInput('100')).toEqual({ ok: true, weight: 100 });
    expect(parseWeightInput('0')).toMatchObject({ ok: false, message: expect.stringContaining('0.01 to 100') });
    expect(parseWeightInput('101')).toMatchObject({ ok: false });
    expect(parseWeightInput('abc')).toMatchObject({ ok: false, message: expect.stringContaining('not a number') });
    expect(parseWeightInput('')).toMatchObject({ ok: false });
  });
});

describe('throttle', () => {
  it('sends the first value at once, at most one per interval, and always the last', () => {
    const timers = new ManualTimers();
    const sent: number[] = [];
    const throttle = createThrottle<number>((v) => sent.push(v), 100, timers);
    throttle.push(1);
    expect(sent).toEqual([1]);
    for (let i = 2; i <= 9; i++) {
      timers.advance(20);
      throttle.push(i);
    }
    // 160 ms of dragging: the trailing send at 100 ms took the value then (5)
    expect(sent).toEqual([1, 5]);
    timers.advance(100);
    expect(sent).toEqual([1, 5, 9]);
    timers.advance(1000);
    expect(sent).toEqual([1, 5, 9]);
  });

  it('flush sends the pending value at once and nothing twice', () => {
    const timers = new ManualTimers();
    const sent: number[] = [];
    const throttle = createThrottle<number>((v) => sent.push(v), 100, timers);
    throttle.push(1);
    timers.advance(10);
    throttle.push(2);
    throttle.flush();
    expect(sent).toEqual([1, 2]);
    timers.advance(500);
    throttle.flush();
    expect(sent).toEqual([1, 2]);
  });

  it('cancel drops the pending value', () => {
    const timers = new ManualTimers();
    const sent: number[] = [];
    const throttle = createThrottle<number>((v) => sent.push(v), 100, timers);
    throttle.push(1);
    throttle.push(2);
    throttle.cancel();
    timers.advance(500);
    expect(sent).toEqual([1]);
  });
});
