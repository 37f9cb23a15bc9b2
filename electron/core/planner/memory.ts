/**
 * What a model needs on a device, part by part, as the planner counts it: weights, the KV cache at
 * the context asked for and the compute buffers make its peak; the envelope margin on top makes
 * the requirement the planner admits against. One object for every place that shows a model's
 * needs (Add a model, the Launch dialog, model cards, `gpu-share plan`), so they cannot disagree.
 *
 * The parts are known only when the peak is the GGUF estimate. A measured peak (an earlier load's)
 * has no parts: they are null ("not known"), never a split made up from the total.
 */
import { requirementBytes, type PlannerPolicy } from './policy.js';

/** The estimate's parts of a peak (their sum is the peak). */
export interface PeakParts {
  weightsBytes: number;
  kvCacheBytes: number;
  computeBytes: number;
}

export interface MemoryNeeds {
  /** The context the KV cache is sized for, in tokens. */
  contextSize: number;
  /** null: not known (the peak was measured, not estimated). */
  weightsBytes: number | null;
  kvCacheBytes: number | null;
  computeBytes: number | null;
  /** weights + KV cache + compute buffers when estimated; the measured peak otherwise. */
  peakBytes: number;
  peakSource: 'MEASURED' | 'ESTIMATED';
  /** The policy's envelope margin: max(its minimum, its fraction of the peak). */
  marginBytes: number;
  /** peak + margin: what must be free for the planner to admit the model. */
  requirementBytes: number;
}

export function memoryNeeds(peak: { peakBytes: number; peakSource: 'MEASURED' | 'ESTIMATED'; parts: PeakParts | null }, contextSize: number, policy: PlannerPolicy): MemoryNeeds {
  // Parts that do not add up to the peak are not this peak's parts (a stale or foreign figure).
  const parts = peak.parts !== null && peak.parts.weightsBytes + peak.parts.kvCacheBytes + peak.parts.computeBytes === peak.peakBytes ? peak.parts : null;
  const requirement = requirementBytes(peak.peakBytes, policy);
  return {
    contextSize,
    weightsBytes: parts?.weightsBytes ?? null,
    kvCacheBytes: parts?.kvCacheBytes ?? null,
    computeBytes: parts?.computeBytes ?? null,
    peakBytes: peak.peakBytes,
    peakSource: peak.peakSource,
    marginBytes: requirement - peak.peakBytes,
    requirementBytes: requirement,
  };
}
