/** The last N plans (500 in m10-v1), newest last. */
import type { PlacementPlan, Verdict } from './types.js';

export class PlanHistory {
  private readonly plans: PlacementPlan[] = [];

  constructor(private readonly size: number) {}

  add(plan: PlacementPlan): void {
    this.plans.push(plan);
    if (this.plans.length > this.size) this.plans.splice(0, this.plans.length - this.size);
  }

  list(filter?: { verdict?: Verdict }): PlacementPlan[] {
    return filter?.verdict ? this.plans.filter((p) => p.verdict === filter.verdict) : [...this.plans];
  }

  get length(): number {
    return this.plans.length;
  }

  countsByVerdict(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const p of this.plans) counts[p.verdict] = (counts[p.verdict] ?? 0) + 1;
    return counts;
  }
}
