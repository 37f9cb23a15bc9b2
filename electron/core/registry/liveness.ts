/**
 * Liveness is the heartbeat alone: pids may live in another pid namespace, so they are never
 * checked or signalled. A slot is dead when its heartbeat is more than 3 s old.
 *
 * - A one-shot reader uses `now − heartbeat_us` on the shared wall clock, and treats a heartbeat
 *   more than 3 s in the future as stale.
 * - A reader that has watched a slot judges age on its own monotonic clock, since it last saw the
 *   heartbeat value change: a wall-clock step then kills nobody whose heartbeat keeps changing,
 *   and keeps no dead peer alive.
 */
import type { SlotRecord } from './codec.js';

export const DEAD_AFTER_US = 3_000_000;

/** Wall-clock age of a heartbeat in µs, or null when it cannot be trusted (more than 3 s in the
 *  future). A heartbeat slightly in the future (clock granularity) counts as age 0. */
export function oneShotAgeUs(heartbeatUs: number, wallNowUs: number): number | null {
  const age = wallNowUs - heartbeatUs;
  if (!Number.isFinite(age) || age < -DEAD_AFTER_US) return null;
  return Math.max(0, age);
}

export function isAliveOneShot(heartbeatUs: number, wallNowUs: number): boolean {
  const age = oneShotAgeUs(heartbeatUs, wallNowUs);
  return age !== null && age <= DEAD_AFTER_US;
}

export interface Liveness {
  readonly alive: boolean;
  /** Heartbeat age in µs as this reader judges it; null when it was never trustworthy. */
  readonly ageUs: number | null;
}

interface Watched {
  identity: string;
  heartbeatUs: number;
  /** Monotonic µs at which the heartbeat was last seen to change (or the equivalent moment for a
   *  slot first seen with a heartbeat of some age). null: never seen alive. */
  changedAtMonoUs: number | null;
}

/** A reader that watches the registry over time. One instance per reader; feed it every read. */
export class LivenessWatcher {
  private readonly watched = new Map<number, Watched>();

  /** Judge every slot of one read. Slots not in `slots` are forgotten. */
  observe(slots: readonly SlotRecord[], wallNowUs: number, monoNowUs: number): Map<number, Liveness> {
    const result = new Map<number, Liveness>();
    const seen = new Set<number>();
    for (const record of slots) {
      seen.add(record.slot);
      result.set(record.slot, this.judge(record, wallNowUs, monoNowUs));
    }
    for (const slot of this.watched.keys()) if (!seen.has(slot)) this.watched.delete(slot);
    return result;
  }

  private judge(record: SlotRecord, wallNowUs: number, monoNowUs: number): Liveness {
    const identity = `${record.pid}:${record.bootUs}`;
    const known = this.watched.get(record.slot);
    if (known === undefined || known.identity !== identity) {
      // First sight of this peer: all we have is the wall clock.
      const age = oneShotAgeUs(record.heartbeatUs, wallNowUs);
      const changedAtMonoUs = age === null || age > DEAD_AFTER_US ? null : monoNowUs - age;
      this.watched.set(record.slot, { identity, heartbeatUs: record.heartbeatUs, changedAtMonoUs });
      return age === null ? { alive: false, ageUs: null } : { alive: age <= DEAD_AFTER_US, ageUs: age };
    }
    if (known.heartbeatUs !== record.heartbeatUs) {
      known.heartbeatUs = record.heartbeatUs;
      known.changedAtMonoUs = monoNowUs;
    }
    if (known.changedAtMonoUs === null) return { alive: false, ageUs: null };
    const ageUs = Math.max(0, monoNowUs - known.changedAtMonoUs);
    return { alive: ageUs <= DEAD_AFTER_US, ageUs };
  }
}

/** One-shot judgement of every slot of one read. */
export function judgeOneShot(slots: readonly SlotRecord[], wallNowUs: number): Map<number, Liveness> {
  const result = new Map<number, Liveness>();
  for (const record of slots) {
    const ageUs = oneShotAgeUs(record.heartbeatUs, wallNowUs);
    result.set(record.slot, { alive: ageUs !== null && ageUs <= DEAD_AFTER_US, ageUs });
  }
  return result;
}
