/**
 * The GPU view's live figures: utilisation, temperature, power and memory in use, each with its
 * latest value and its history for a sparkline. A figure the device never reported reads "not
 * available" (and its sparkline draws nothing); a utilisation is drawn on 0–100 %, memory on 0 to
 * the device's total, the others on their own range. Pure.
 */
import type { DeviceHistoryPoint, DeviceView } from '../../../electron/core/contract.js';
import { gib, type Shown } from './format.js';
import type { SparkPoint } from './sparkline.js';

export interface LiveFigure {
  key: 'utilization' | 'temperature' | 'power' | 'memory';
  label: string;
  now: Shown;
  points: SparkPoint[];
  format: (value: number) => string;
  range: { min?: number; max?: number };
}

const NOT_AVAILABLE: Shown = { text: 'not available', title: 'the device or its driver does not report this figure' };

export function deviceFigures(device: Pick<DeviceView, 'history' | 'vram'>, memoryNoun: string): LiveFigure[] {
  const series = (value: (p: DeviceHistoryPoint) => number | null): SparkPoint[] => device.history.map((p) => ({ t: p.atUs, v: value(p) }));
  const latest = (value: (p: DeviceHistoryPoint) => number | null, format: (v: number) => string): Shown => {
    const newest = device.history.at(-1);
    if (newest === undefined) return { text: '—', title: 'no sample yet' };
    const v = value(newest);
    return v === null ? NOT_AVAILABLE : { text: format(v), title: null };
  };
  const figure = (key: LiveFigure['key'], label: string, value: (p: DeviceHistoryPoint) => number | null, format: (v: number) => string, range: LiveFigure['range']): LiveFigure => ({
    key,
    label,
    now: latest(value, format),
    points: series(value),
    format,
    range,
  });
  const totalBytes = device.vram?.totalBytes;
  return [
    figure('utilization', 'Utilisation', (p) => p.utilizationPct, (v) => `${Math.round(v)} %`, { min: 0, max: 100 }),
    figure('temperature', 'Temperature', (p) => p.temperatureC, (v) => `${Math.round(v)} °C`, {}),
    figure('power', 'Power', (p) => p.powerW, (v) => `${v.toFixed(v < 10 ? 1 : 0)} W`, { min: 0 }),
    figure('memory', `${memoryNoun} in use`, (p) => p.usedBytes, (v) => gib(v).text, totalBytes === undefined ? { min: 0 } : { min: 0, max: totalBytes }),
  ];
}
