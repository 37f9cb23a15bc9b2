/**
 * A model's memory needs as the breakdown shows them: one labelled row per part the planner counts
 * (weights, KV cache at the context, compute buffers, margin) adding up to the requirement. The
 * figures are the contract's (MemoryNeeds, from the planner's estimate), never worked out here; a
 * part the estimate does not know (a measured peak has no parts) reads "not known", and the
 * measured peak stands in their place so that the rows still add up. Pure.
 */
import type { MemoryNeeds } from '../../../electron/core/contract.js';
import { bytes, integer, type Shown } from './format.js';

export type BreakdownPart = 'weights' | 'kvCache' | 'compute' | 'peak' | 'margin';

export interface BreakdownRow {
  part: BreakdownPart;
  label: string;
  /** The label where room is short (a model card's one line). */
  short: string;
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
  // Sizes in the unit that suits each (a small model's weights are MiB, not "0.00 GiB"), the exact
  // byte count in the tooltip.
  const shownBytes = (n: number): Shown => ({ text: bytes(n).text, title: `${Math.round(n).toLocaleString('en-US')} bytes` });
  const row = (part: BreakdownPart, label: string, short: string, figure: number | null, meaning: string): BreakdownRow => ({
    part,
    label,
    short,
    bytes: figure,
    shown: figure === null ? { text: NOT_KNOWN, title: why } : shownBytes(figure),
    fraction: figure === null ? 0 : Math.max(0, figure) / total,
    meaning,
  });
  const context = integer(m.contextSize, 'tokens').text;
  const parts = [
    row('weights', 'weights', 'weights', m.weightsBytes, 'the model’s tensors'),
    row('kvCache', `KV cache at ${context}`, 'KV cache', m.kvCacheBytes, 'keys and values of every token of the context'),
    row('compute', 'compute buffers', 'compute', m.computeBytes, 'scratch memory for evaluating a batch'),
  ];
  const known = parts.every((p) => p.bytes !== null);
  const rows = known
    ? parts
    : [...parts, m.peakSource === 'MEASURED' ? row('peak', 'measured peak', 'measured peak', m.peakBytes, 'what an earlier load of this model at this context used at most') : row('peak', 'peak', 'peak', m.peakBytes, 'the figure planned with until a load measures it')];
  rows.push(row('margin', 'margin', 'margin', m.marginBytes, 'the planner’s safety margin on top of the peak (its policy’s envelope margin)'));
  return {
    rows,
    counted: rows.filter((r) => r.bytes !== null),
    requirement: { ...shownBytes(m.requirementBytes), bytes: m.requirementBytes },
    peak: { ...shownBytes(m.peakBytes), bytes: m.peakBytes },
    source: m.peakSource === 'MEASURED' ? 'peak measured on an earlier load' : known ? 'estimated from the model file' : 'estimated',
  };
}
