/**
 * Memory pressure with hysteresis: it worsens at once (NORMAL → ELEVATED → HIGH → CRITICAL) and
 * recovers only after use has stayed below the current level's exit threshold for the policy's
 * recovery hold (30 s in m10-v1), on continuous evidence: a gap between two readings longer than
 * the policy's staleness limit (no sample, a failed query, an unknown figure) restarts the hold,
 * since nothing says what use was in between. Time comes from the caller, so tests step a fake
 * clock.
 */
import { PRESSURE_LEVELS, type PlannerPolicy, type PressureLevel, type Priority } from './policy.js';

const rank = (level: PressureLevel): number => PRESSURE_LEVELS.indexOf(level);

/** The level that `usedFraction` reaches by the enter thresholds. */
export function enteredLevel(usedFraction: number, policy: PlannerPolicy): PressureLevel {
  let level: PressureLevel = 'NORMAL';
  for (const candidate of ['ELEVATED', 'HIGH', 'CRITICAL'] as const) if (usedFraction >= policy.pressure[candidate].enter) level = candidate;
  return level;
}

/** The highest level whose exit threshold `usedFraction` still reaches (what we may recover to). */
export function heldLevel(usedFraction: number, policy: PlannerPolicy): PressureLevel {
  let level: PressureLevel = 'NORMAL';
  for (const candidate of ['ELEVATED', 'HIGH', 'CRITICAL'] as const) if (usedFraction >= policy.pressure[candidate].exit) level = candidate;
  return level;
}

/**
 * The level a plan is judged by once it has stopped `freedBytes` of our own idle engines: the
 * tracked (physical) level while it stops nothing; otherwise the level the remaining use would
 * hold by the exit thresholds, never above the tracked one. The exit thresholds, because this is a
 * recovery; without the recovery hold, because the evidence is our own stop rather than a
 * transient dip. The tracked level itself (what the UI and /metrics show) is not changed.
 */
export function levelAfterEvictions(tracked: PressureLevel, physicalUsedBytes: number, freedBytes: number, totalBytes: number, policy: PlannerPolicy): PressureLevel {
  if (freedBytes <= 0 || totalBytes <= 0 || tracked === 'NORMAL') return tracked;
  const remaining = heldLevel(Math.max(0, physicalUsedBytes - freedBytes) / totalBytes, policy);
  return rank(remaining) < rank(tracked) ? remaining : tracked;
}

/** Does pressure at `level` hold back a new load of this priority? CRITICAL holds back every
 *  load; ELEVATED and HIGH hold back background and lab ones. */
export function pressureHoldsBack(level: PressureLevel, priority: Priority): boolean {
  return level === 'CRITICAL' || (level !== 'NORMAL' && priority !== 'interactive');
}

export class PressureTracker {
  private current: PressureLevel = 'NORMAL';
  /** Since when use has been below the current level's exit threshold; null when it is not. */
  private belowSinceUs: number | null = null;
  /** The highest level held during the current below-exit stretch: we recover to it. */
  private heldDuringStretch: PressureLevel = 'NORMAL';
  /** When the last known reading came; null before the first. */
  private lastReadingUs: number | null = null;

  private readonly policyOf: () => PlannerPolicy;

  /** `policy`: a policy, or where to find the one in force (an operator may switch revisions). */
  constructor(policy: PlannerPolicy | (() => PlannerPolicy)) {
    this.policyOf = typeof policy === 'function' ? policy : () => policy;
  }

  private get policy(): PlannerPolicy {
    return this.policyOf();
  }

  get level(): PressureLevel {
    return this.current;
  }

  /** Feed one observation (physical use / total, in [0, 1]); returns the level. Unknown use
   *  (NaN) changes nothing, and is no evidence: it counts as part of a gap. */
  observe(usedFraction: number, nowUs: number): PressureLevel {
    if (!Number.isFinite(usedFraction)) return this.current;
    const previous = this.lastReadingUs;
    this.lastReadingUs = nowUs;
    // A gap in the evidence: the stretch below the exit threshold starts again from this reading.
    if (previous !== null && nowUs - previous > this.policy.staleAfterUs) {
      this.belowSinceUs = null;
      this.heldDuringStretch = 'NORMAL';
    }
    const entered = enteredLevel(usedFraction, this.policy);
    if (rank(entered) > rank(this.current)) {
      this.current = entered;
      this.belowSinceUs = null;
      return this.current;
    }
    if (this.current === 'NORMAL') return this.current;
    const held = heldLevel(usedFraction, this.policy);
    if (rank(held) >= rank(this.current)) {
      this.belowSinceUs = null; // still at or above this level's exit threshold
      return this.current;
    }
    if (this.belowSinceUs === null) {
      this.belowSinceUs = nowUs;
      this.heldDuringStretch = held;
    } else if (rank(held) > rank(this.heldDuringStretch)) {
      this.heldDuringStretch = held;
    }
    if (nowUs - this.belowSinceUs >= this.policy.recoveryHoldUs) {
      this.current = this.heldDuringStretch;
      this.belowSinceUs = null;
      this.heldDuringStretch = 'NORMAL';
    }
    return this.current;
  }
}
