import { describe, expect, it } from 'vitest';
import { breakdownModel } from './memory-breakdown.js';
import type { MemoryNeeds } from '../../../electron/core/contract.js';

const GiB = 1024 ** 3;
const estimated: MemoryNeeds = { contextSize: 4096, weightsBytes: 2 * GiB, kvCacheBytes: 0.5 * GiB, computeBytes: 0.25 * GiB, peakBytes: 2.75 * GiB, peakSource: 'ESTIMATED', marginBytes: 0.5 * GiB, requirementBytes: 3.25 * GiB };

describe('memory breakdown', () => {
  it('labels weights, the KV cache at the context, compute buffers and margin, adding up to the requirement', () => {
    const model = breakdownModel(estimated);
    expect(model.rows.map((r) => [r.part, r.label, r.shown.text])).toEqual([
      ['weights', 'weights', '2.00 GiB'],
      ['kvCache', 'KV cache at 4,096 tokens', '512.0 MiB'],
      ['compute', 'compute buffers', '256.0 MiB'],
      ['margin', 'margin', '512.0 MiB'],
    ]);
    expect(model.counted.reduce((sum, r) => sum + (r.bytes ?? 0), 0)).toBe(estimated.requirementBytes);
    expect(model.counted.reduce((sum, r) => sum + r.fraction, 0)).toBeCloseTo(1, 10);
    expect(model.requirement.text).toBe('3.25 GiB');
    expect(model.source).toBe('estimated from the model file');
  });

  it('shows parts a measured peak does not have as "not known", and the measured peak in their place', () => {
    const model = breakdownModel({ ...estimated, weightsBytes: null, kvCacheBytes: null, computeBytes: null, peakSource: 'MEASURED' });
    expect(model.rows.filter((r) => r.bytes === null).map((r) => r.shown.text)).toEqual(['not known', 'not known', 'not known']);
    expect(model.rows.find((r) => r.part === 'peak')?.bytes).toBe(estimated.peakBytes);
    expect(model.counted.reduce((sum, r) => sum + (r.bytes ?? 0), 0)).toBe(estimated.requirementBytes);
    expect(model.source).toBe('peak measured on an earlier load');
  });
});
