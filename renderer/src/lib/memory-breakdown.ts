/**
 * A model's memory needs as the breakdown shows them: one labelled row per part the planner counts
 * (weights, KV cache at the context, compute buffers, margin) adding up to the requirement. The
 * figures are the contract's (MemoryNeeds, from the planner's estimate), never worked out here; a
 * part the estimate does not know (a measured peak has no parts) reads "not known", and the
 * measured peak stands in their place so that the rows still add up. Pure.
 */
import type { MemoryNeeds } from '../../../electron/core/contract.js';
import { gib, integer, type Shown } from './format.js';

export type BreakdownPart = 'weights' | 'kvCache' | 'compute' | 'peak' | 'margin';

export interface BreakdownRow {
  part: BreakdownPart;
  label: string;
  /** null: not known. */
  bytes: number | null;
  shown: Shown;
  /** Its share of the requirement, 0–1, for the bar; 0 when not known. */
  fraction: number;
  /** What it is, for the tooltip. */
  meaning: string;
}

export interface BreakdownModel {
  rows: BreakdownRow[];
  /** The rows with a figure: they add up to the requirement. */
  counted: BreakdownRow[];
  requirement: Shown & { bytes: number };
  peak: Shown & { bytes: number };
  /** "estimated from the model file" or "peak measured on an earlier load". */
  source: string;
}

const NOT_KNOWN = 'not known';

export function breakdownModel(m: MemoryNeeds): BreakdownModel {
  const total = m.requirementBytes > 0 ? m.requirementBytes : 1;
  const why = m.peakSource === 'MEASURED' ? 'a peak measured on an earlier load has no parts' : 'no estimate from a model file splits this peak';
  const row = (part: BreakdownPart, label: string, bytes: number | null, meaning: string): BreakdownRow => ({
    part,
    label,
    bytes,
    shown: bytes === null ? { text: NOT_KNOWN, title: why } : gib(bytes),
    fraction: bytes === null ? 0 : Math.max(0, bytes) / total,
    meaning,
  });
  const context = integer(m.contextSize, 'tokens').text;
  const parts = [
    row('weights', 'weights', m.weightsBytes, 'the model’s tensors'),
    row('kvCache', `KV cache at ${context}`, m.kvCacheBytes, 'keys and values of every token of the context'),
    row('compute', 'compute buffers', m.computeBytes, 'scratch memory for evaluating a batch'),
  ];
  const known = parts.every((p) => p.bytes !== null);
  const rows = known
    ? parts
    : [...parts, m.peakSource === 'MEASURED' ? row('peak', 'measured peak', m.peakBytes, 'what an earlier load of this model at this context used at most') : row('peak', 'peak', m.peakBytes, 'the figure planned with until a load measures it')];
  rows.push(row('margin', 'margin', m.marginBytes, 'the planner’s safety margin on top of the peak (its policy’s envelope margin)'));
  return {
    rows,
    counted: rows.filter((r) => r.bytes !== null),
    requirement: { ...gib(m.requirementBytes), bytes: m.requirementBytes },
    peak: { ...gib(m.peakBytes), bytes: m.peakBytes },
    source: m.peakSource === 'MEASURED' ? 'peak measured on an earlier load' : known ? 'estimated from the model file' : 'estimated',
  };
}
