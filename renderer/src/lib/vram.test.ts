import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { memoryNoun, physicalUseFraction, planBars, policyRuleLines, pressureMarks, pressureMarkWords, stack, vramBar, type StackedBar } from './vram.js';
import { POLICY_M10_V1, POLICY_M10_V1_MAX_RESERVE } from '../../../electron/core/planner/policy.js';
import { GiB, placementPlan, vramView } from '../test/fixtures.js';

const sum = (bar: StackedBar): number => bar.segments.reduce((acc, s) => acc + s.bytes, 0);
const fractions = (bar: StackedBar): number => bar.segments.reduce((acc, s) => acc + s.fraction, 0);

describe('vramBar', () => {
  it('stacks engines in slot order, then external, leases, reserve, free', () => {
    const bar = vramBar(
      vramView({
        engines: [
          { engineId: 'b', name: 'coder', slot: 3, bytes: 4 * GiB },
          { engineId: 'a', name: 'chat', slot: 1, bytes: 6 * GiB },
        ],
        unmanagedExternalBytes: 2 * GiB,
        leaseBytes: 1 * GiB,
        reserveBytes: 1 * GiB,
        freeBytes: 10 * GiB,
      }),
    );
    expect(bar.segments.map((s) => [s.kind, s.label, s.bytes / GiB])).toEqual([
      ['engine', 'chat', 6],
      ['engine', 'coder', 4],
      ['external', 'other processes (not started by GPU Share)', 2],
      ['lease', 'promised to loads in progress', 1],
      ['reserve', 'reserve (kept free for the driver)', 1],
      ['free', 'free to schedule', 10],
    ]);
    expect(bar.segments[0]?.slot).toBe(1);
    expect(sum(bar)).toBe(24 * GiB);
    expect(bar.overshootBytes).toBe(0);
  });

  it('names the memory no figure accounts for', () => {
    const bar = vramBar(vramView({ freeBytes: 10 * GiB }));
    const gap = bar.segments.find((s) => s.kind === 'unaccounted');
    expect(gap?.bytes).toBeCloseTo(3.8 * GiB, 0);
    expect(bar.segments.map((s) => s.kind)).toEqual(['engine', 'external', 'lease', 'unaccounted', 'reserve', 'free']);
    expect(sum(bar)).toBeCloseTo(24 * GiB, 0);
  });

  it('closes a rounding gap with free space instead of a sliver', () => {
    const bar = vramBar(vramView({ freeBytes: 13.8 * GiB - 1000 }));
    expect(bar.segments.some((s) => s.kind === 'unaccounted')).toBe(false);
    expect(sum(bar)).toBeCloseTo(24 * GiB, 3);
  });

  it('gives back free space first, then reserve, when the figures overshoot', () => {
    const bar = vramBar(vramView({ freeBytes: 15 * GiB }));
    expect(bar.overshootBytes).toBeCloseTo(1.2 * GiB, 0);
    expect(bar.segments.find((s) => s.kind === 'free')?.bytes).toBeCloseTo(13.8 * GiB, 0);
    expect(bar.segments.find((s) => s.kind === 'reserve')?.bytes).toBeCloseTo(1.2 * GiB, 0);
  });

  it('always sums to the total, whatever the figures', () => {
    const figure = fc.oneof(fc.double({ min: -1e10, max: 1e11, noNaN: true }), fc.constant(Number.NaN), fc.constant(Number.POSITIVE_INFINITY));
    fc.assert(
      // Totals from 1 MiB (no device is smaller) to 200 GB; parts anything, even NaN or negative.
      fc.property(fc.double({ min: 2 ** 20, max: 2e11, noNaN: true }), fc.array(figure, { maxLength: 5 }), figure, figure, figure, figure, (total, engines, external, lease, reserve, free) => {
        const bar = vramBar({
          totalBytes: total,
          engines: engines.map((bytes, i) => ({ engineId: `e${i}`, name: `e${i}`, slot: i, bytes })),
          unmanagedExternalBytes: external,
          leaseBytes: lease,
          reserveBytes: reserve,
          freeBytes: free,
          attribution: 'KNOWN',
        });
        // Within a thousandth of a byte.
        expect(Math.abs(sum(bar) - total)).toBeLessThan(1e-3);
        expect(Math.abs(fractions(bar) - 1)).toBeLessThan(1e-9);
        expect(bar.segments.every((s) => Number.isFinite(s.bytes) && s.bytes > 0)).toBe(true);
      }),
    );
  });

  it('is empty for an unknown total', () => {
    expect(vramBar(vramView({ totalBytes: 0 })).segments).toEqual([]);
    expect(stack(Number.NaN, []).segments).toEqual([]);
  });
});

describe('planBars', () => {
  it('moves the request into the free space', () => {
    const bars = planBars(placementPlan());
    expect(sum(bars.before)).toBeCloseTo(24 * GiB, 0);
    expect(sum(bars.after)).toBeCloseTo(24 * GiB, 0);
    expect(bars.after.segments.find((s) => s.kind === 'request')?.bytes).toBe(4 * GiB);
    expect(bars.after.segments.find((s) => s.kind === 'free')?.bytes).toBeCloseTo(9.8 * GiB, 0);
    expect(bars.shortBytes).toBe(0);
  });

  it('frees the evicted engines and says how short a rejected request is', () => {
    const evicting = planBars(
      placementPlan({ verdict: 'ADMIT_AFTER_EVICTION', evictions: [{ id: 'e', pid: 1, priority: 'lab', freedBytes: 3 * GiB, idleForUs: 60e6 }], headroomBeforeBytes: 2 * GiB, headroomAfterBytes: 1 * GiB }),
    );
    expect(evicting.freedBytes).toBe(3 * GiB);
    expect(evicting.after.segments.find((s) => s.key === 'managed')?.bytes).toBe(3 * GiB);
    const short = planBars(placementPlan({ verdict: 'REJECT_CAPACITY', headroomAfterBytes: -1.5 * GiB }));
    expect(short.shortBytes).toBe(1.5 * GiB);
    expect(short.after.segments.find((s) => s.kind === 'request')?.bytes).toBe(2.5 * GiB);
    expect(sum(short.after)).toBeCloseTo(24 * GiB, 0);
  });
});

describe('pressure', () => {
  it('marks the thresholds of the revision the core runs, from its numbers', () => {
    expect(pressureMarks(POLICY_M10_V1)).toEqual([
      { level: 'ELEVATED', fraction: 0.8 },
      { level: 'HIGH', fraction: 0.9 },
      { level: 'CRITICAL', fraction: 0.97 },
    ]);
    const other = { pressure: { ...POLICY_M10_V1.pressure, HIGH: { enter: 0.88, exit: 0.8 } } };
    expect(pressureMarks(other)[1]).toEqual({ level: 'HIGH', fraction: 0.88 });
  });

  it('says every number of the revision in words', () => {
    const lines = policyRuleLines(POLICY_M10_V1);
    expect(lines[0]).toBe('reserve: max(1 GiB, 5 % of total) + 256 MiB');
    expect(lines.join('\n')).toMatch(/recovery after 30 s of continuous samples below/);
    expect(lines.join('\n')).toMatch(/telemetry stale after 2 s · lease TTL 300 s · history 500 plans/);
    expect(lines.join('\n')).toMatch(/queue: 32 waiting at most; waits interactive 120 s, background 600 s, lab 1800 s/);
    expect(policyRuleLines(POLICY_M10_V1_MAX_RESERVE)[0]).toBe('reserve: max(1 GiB, 5 % of total, 256 MiB)');
  });

  it('measures physical use as engines plus external', () => {
    expect(physicalUseFraction(vramView())).toBeCloseTo(8 / 24, 9);
    expect(physicalUseFraction(vramView({ totalBytes: 0 }))).toBeNull();
  });
});

describe('words for the memory bar', () => {
  it('calls the host CPU\'s memory "Memory" and a GPU\'s "VRAM"', () => {
    expect(memoryNoun({ key: 'cpu-0', source: 'cpu' })).toBe('Memory');
    expect(memoryNoun({ key: 'cpu-0' })).toBe('Memory');
    expect(memoryNoun({ key: 'GPU-1234', source: 'nvml' })).toBe('VRAM');
    expect(memoryNoun(null)).toBe('VRAM');
  });

  it('gives every pressure mark a legend line', () => {
    const marks = pressureMarks(POLICY_M10_V1);
    expect(marks.map(pressureMarkWords)).toEqual(marks.map((m) => `${m.level} from ${Math.round(m.fraction * 100)} % in use`));
    expect(marks.map((m) => m.level)).toEqual(['ELEVATED', 'HIGH', 'CRITICAL']);
  });
});
