/** A model's memory needs, part by part: the planner's figures, the same in a plan and an estimate. */
import { describe, expect, it } from 'vitest';
import { describeMemoryNeeds } from '../../electron/core/planner/describe.js';
import { memoryNeeds } from '../../electron/core/planner/memory.js';
import { plan } from '../../electron/core/planner/plan.js';
import { GiB, MiB, POLICY_M10_V1, requirementBytes } from '../../electron/core/planner/policy.js';
import { PlannerInputError } from '../../electron/core/planner/types.js';
import { request, snapshot } from '../fixtures/planner-cases.js';

const parts = { weightsBytes: 3 * GiB, kvCacheBytes: 1 * GiB, computeBytes: 256 * MiB };
const peakBytes = parts.weightsBytes + parts.kvCacheBytes + parts.computeBytes;

describe('memory needs', () => {
  it('splits an estimated peak into weights, KV cache and compute buffers, and adds the policy margin to make the requirement', () => {
    const m = memoryNeeds({ peakBytes, peakSource: 'ESTIMATED', parts }, 8192, POLICY_M10_V1);
    expect(m).toEqual({ contextSize: 8192, ...parts, peakBytes, peakSource: 'ESTIMATED', marginBytes: Math.round(0.1 * peakBytes), requirementBytes: requirementBytes(peakBytes, POLICY_M10_V1) });
    expect(m.weightsBytes! + m.kvCacheBytes! + m.computeBytes! + m.marginBytes).toBe(m.requirementBytes);
    // A small model's margin is the policy's floor, 128 MiB.
    expect(memoryNeeds({ peakBytes: 90 * MiB, peakSource: 'ESTIMATED', parts: null }, 512, POLICY_M10_V1).marginBytes).toBe(128 * MiB);
  });

  it('says "not known" (null) for the parts of a measured peak, and of parts that do not add up to the peak', () => {
    const measured = memoryNeeds({ peakBytes: 5 * GiB, peakSource: 'MEASURED', parts: null }, 4096, POLICY_M10_V1);
    expect([measured.weightsBytes, measured.kvCacheBytes, measured.computeBytes]).toEqual([null, null, null]);
    expect(measured.peakBytes + measured.marginBytes).toBe(measured.requirementBytes);
    const foreign = memoryNeeds({ peakBytes: 5 * GiB, peakSource: 'ESTIMATED', parts }, 4096, POLICY_M10_V1);
    expect(foreign.weightsBytes).toBeNull();
    expect(describeMemoryNeeds(measured).join('\n')).toMatch(/weights\s+not known/);
  });

  it('is in every plan, its requirement the one the plan was decided on', () => {
    const estimated = plan(request({ peakBytes, peakParts: parts, contextSize: 8192 }), snapshot(), POLICY_M10_V1);
    expect(estimated.memory.kvCacheBytes).toBe(parts.kvCacheBytes);
    expect(estimated.memory.requirementBytes).toBe(estimated.breakdown.requirementBytes);
    expect(estimated.request.peakParts).toEqual(parts);
    const measured = plan(request({ peakBytes, peakSource: 'MEASURED' }), snapshot(), POLICY_M10_V1);
    expect(measured.memory.weightsBytes).toBeNull();
    expect(measured.memory.requirementBytes).toBe(measured.breakdown.requirementBytes);
    // The parts split the peak, which is fed to the fingerprint already.
    expect(estimated.fingerprint).toBe(plan(request({ peakBytes, contextSize: 8192 }), snapshot(), POLICY_M10_V1).fingerprint);
  });

  it('refuses parts that are not byte counts', () => {
    expect(() => plan(request({ peakBytes, peakParts: { ...parts, kvCacheBytes: Number.NaN } }), snapshot(), POLICY_M10_V1)).toThrow(PlannerInputError);
    expect(() => plan(request({ peakBytes, peakParts: { ...parts, weightsBytes: -1 } }), snapshot(), POLICY_M10_V1)).toThrow(/request\.peakParts\.weightsBytes/);
  });
});
