import { describe, expect, it } from 'vitest';
import { deviceFigures } from './device-figures.js';
import type { DeviceHistoryPoint } from '../../../electron/core/contract.js';

const GiB = 1024 ** 3;
const point = (atUs: number, fields: Partial<DeviceHistoryPoint> = {}): DeviceHistoryPoint => ({ atUs, utilizationPct: 40, temperatureC: 61, powerW: 215.4, usedBytes: 6 * GiB, ...fields });

describe('device figures', () => {
  it('gives each figure its latest value, its history and its range', () => {
    const figures = deviceFigures({ history: [point(0, { utilizationPct: 10 }), point(500_000)], vram: { totalBytes: 24 * GiB } as never }, 'VRAM');
    expect(figures.map((f) => [f.key, f.label, f.now.text])).toEqual([
      ['utilization', 'Utilisation', '40 %'],
      ['temperature', 'Temperature', '61 °C'],
      ['power', 'Power', '215 W'],
      ['memory', 'VRAM in use', '6.00 GiB'],
    ]);
    expect(figures[0]?.points).toEqual([{ t: 0, v: 10 }, { t: 500_000, v: 40 }]);
    expect(figures[0]?.range).toEqual({ min: 0, max: 100 });
    expect(figures[3]?.range).toEqual({ min: 0, max: 24 * GiB });
  });

  it('says "not available" for a figure the device does not report, and keeps its gaps as gaps', () => {
    const figures = deviceFigures({ history: [point(0, { temperatureC: null, powerW: null }), point(500_000, { temperatureC: null, powerW: null, usedBytes: null })], vram: null }, 'Memory');
    const byKey = Object.fromEntries(figures.map((f) => [f.key, f]));
    expect(byKey['temperature']?.now.text).toBe('not available');
    expect(byKey['power']?.points.every((p) => p.v === null)).toBe(true);
    expect(byKey['memory']?.label).toBe('Memory in use');
    expect(byKey['memory']?.now.text).toBe('not available');
    expect(deviceFigures({ history: [], vram: null }, 'VRAM')[0]?.now.text).toBe('—');
  });
});
