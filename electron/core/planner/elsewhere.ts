/**
 * Advice for a request one device did not take: the other device that would. Pure: the plans of
 * the same request on the other devices come in, the advice goes out on the plan.
 */
import type { Elsewhere, PlacementPlan } from './types.js';

/** Plans worth advising on: not placed here for want of room, time or a working device (a policy
 *  control or a broken model file holds on every device alike). */
export function wantsElsewhere(plan: Pick<PlacementPlan, 'verdict' | 'reasons'>): boolean {
  if (plan.verdict === 'REJECT_CAPACITY' || plan.verdict === 'QUEUE') return true;
  return plan.verdict === 'REJECT_HEALTH' && plan.reasons.some((r) => r.code === 'DEVICE_FAILED');
}

/** The other device to name: one that admits it now, the most headroom left first; else one that
 *  admits it after stopping idle engines. null when none would. */
export function chooseElsewhere(plan: Pick<PlacementPlan, 'accelerator'>, others: readonly { index: number; plan: PlacementPlan }[]): Elsewhere | null {
  let best: Elsewhere | null = null;
  const rank = (verdict: Elsewhere['verdict']): number => (verdict === 'ADMIT' ? 1 : 0);
  for (const other of others) {
    const verdict = other.plan.verdict;
    if (other.plan.accelerator.key === plan.accelerator.key || (verdict !== 'ADMIT' && verdict !== 'ADMIT_AFTER_EVICTION')) continue;
    const candidate: Elsewhere = { key: other.plan.accelerator.key, name: other.plan.device?.name ?? other.plan.accelerator.name, index: other.index, verdict, headroomAfterBytes: other.plan.headroomAfterBytes };
    if (best === null || rank(verdict) > rank(best.verdict) || (rank(verdict) === rank(best.verdict) && candidate.headroomAfterBytes > best.headroomAfterBytes)) best = candidate;
  }
  return best;
}

/** The plan with its advice: unchanged when it needs none (admitted, or refused by policy). */
export function withElsewhere(plan: PlacementPlan, others: readonly { index: number; plan: PlacementPlan }[]): PlacementPlan {
  if (!wantsElsewhere(plan)) return plan;
  return { ...plan, elsewhere: chooseElsewhere(plan, others) };
}
