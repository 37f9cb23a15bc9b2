import { describe, expect, it } from 'vitest';
import { polylinePoints, sparkScale, sparklineLayout, toPixel, type SparkPoint } from './sparkline.js';

const box = { width: 102, height: 22, pad: 1 };
const pts = (values: (number | null)[], step = 10): SparkPoint[] => values.map((v, i) => ({ t: i * step, v }));

describe('sparkline layout', () => {
  it('maps time left to right and value bottom to top inside the padded box', () => {
    const scale = sparkScale(pts([0, 50, 100]), { ...box, min: 0, max: 100 });
    expect(scale).toEqual({ t0: 0, t1: 20, v0: 0, v1: 100 });
    expect(toPixel(scale, box, 0, 0)).toEqual({ x: 1, y: 21 });
    expect(toPixel(scale, box, 20, 100)).toEqual({ x: 101, y: 1 });
    expect(toPixel(scale, box, 10, 50)).toEqual({ x: 51, y: 11 });
    // Outside the range: clamped to the box, never drawn outside it.
    expect(toPixel(scale, box, 30, 250)).toEqual({ x: 101, y: 1 });
  });

  it('breaks the line where a value is not known, and never draws it as 0', () => {
    const layout = sparklineLayout(pts([10, 20, null, 30, null, null, 40]), { ...box, min: 0, max: 40 });
    expect(layout.runs.map((r) => r.length)).toEqual([2, 1, 1]);
    expect(layout.known).toBe(4);
    expect(layout.runs.flat().every((p) => p.y < 21)).toBe(true);
    expect(layout.last).toEqual({ x: 101, y: 1, v: 40 });
  });

  it('shows only the span that ends at the newest point, so sparse readings are not stretched', () => {
    const layout = sparklineLayout(pts([1, 2, 3, 4, 5], 1_000_000), { ...box, span: 2_000_000 });
    expect(layout.scale.t0).toBe(2_000_000);
    expect(layout.known).toBe(3);
    expect(layout.runs[0]?.[0]?.x).toBe(1);
    // The value range is the shown values' own when not given.
    expect([layout.scale.v0, layout.scale.v1]).toEqual([3, 5]);
  });

  it('puts a flat line in the middle, and has nothing to draw without a known value', () => {
    const flat = sparklineLayout(pts([7, 7, 7]), box);
    expect(flat.runs[0]?.every((p) => p.y === 11)).toBe(true);
    const none = sparklineLayout(pts([null, null]), box);
    expect(none).toMatchObject({ runs: [], last: null, known: 0 });
    expect(sparklineLayout([], box).runs).toEqual([]);
  });

  it('writes a run as polyline points', () => {
    expect(polylinePoints([{ x: 1, y: 2.345 }, { x: 3.5, y: 4 }])).toBe('1,2.35 3.5,4');
  });
});
