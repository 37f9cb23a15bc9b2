import { describe, expect, it } from 'vitest';
import { ageSeconds, bytes, clockTime, durationUs, fractionPct, GIB, gib, integer, MIB, pct, text, UNKNOWN_TEXT, weight } from './format.js';

const BAD: (number | null | undefined)[] = [Number.NaN, Number.POSITIVE_INFINITY, null, undefined];

describe('format', () => {
  it('writes bytes as GiB with two decimals and the exact bytes in the title', () => {
    expect(gib(6.2 * GIB)).toEqual({ text: '6.20 GiB', title: '6,657,199,309 bytes' });
    expect(gib(0).text).toBe('0.00 GiB');
    expect(gib(512 * MIB).text).toBe('0.50 GiB');
    expect(gib(-1.5 * GIB).text).toBe('−1.50 GiB');
    expect(gib(-1).text).toBe('0.00 GiB');
  });

  it('picks the unit by magnitude for small sizes', () => {
    expect(bytes(512).text).toBe('512 B');
    expect(bytes(1536).text).toBe('1.5 KiB');
    expect(bytes(300 * MIB).text).toBe('300.0 MiB');
    expect(bytes(3 * GIB).text).toBe('3.00 GiB');
  });

  it('writes percentages with a unit, clamped to 0–100', () => {
    expect(pct(42).text).toBe('42 %');
    expect(pct(33.333, 1).text).toBe('33.3 %');
    expect(pct(120).text).toBe('100 %');
    expect(fractionPct(0.25).text).toBe('25 %');
  });

  it('writes durations in the unit that reads best', () => {
    expect(durationUs(850).text).toBe('850 µs');
    expect(durationUs(2500).text).toBe('2.5 ms');
    expect(durationUs(120_000).text).toBe('120 ms');
    expect(durationUs(1_500_000).text).toBe('1.5 s');
    expect(durationUs(180e6).text).toBe('3 min');
    expect(ageSeconds(1234).text).toBe('1.2 s');
  });

  it('writes weights as typed, not as their f32', () => {
    expect(weight(Math.fround(0.1)).text).toBe('0.1');
    expect(weight(Math.fround(1.5)).text).toBe('1.5');
    expect(integer(12345, 'pid').text).toBe('12,345 pid');
  });

  it('shows "—" with a reason for anything unknown, never NaN or undefined', () => {
    for (const value of BAD) {
      for (const shown of [gib(value, 'why'), bytes(value, 'why'), pct(value, 0, 'why'), fractionPct(value, 0, 'why'), durationUs(value, 'why'), ageSeconds(value, 'why'), weight(value, 'why'), integer(value, '', 'why'), clockTime(value, 'why')]) {
        expect(shown).toEqual({ text: UNKNOWN_TEXT, title: 'why' });
      }
    }
    expect(ageSeconds(-5).text).toBe(UNKNOWN_TEXT);
    expect(text('', 'no name')).toEqual({ text: UNKNOWN_TEXT, title: 'no name' });
    expect(text(null, 'no name').title).toBe('no name');
    for (const shown of [gib(1), pct(1), durationUs(1), weight(1), clockTime(1_700_000_000_000_000)]) {
      expect(shown.text).not.toMatch(/NaN|undefined|Infinity/);
    }
  });

  it('writes a time of day', () => {
    expect(clockTime(1_700_000_000_000_000).text).toMatch(/^\d\d:\d\d:\d\d$/);
  });
});
