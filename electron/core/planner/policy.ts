/**
 * Policy m10-v1: every number the planner uses lives here, in one versioned object (the reserve,
 * the envelope margin, the pressure thresholds and recovery hold, the telemetry staleness limit,
 * the lease TTL, the queue limits, the history size). A change of any of them is a new revision,
 * so that a plan's fingerprint and its policy name say exactly which rules decided it. The
 * revisions this build knows are in POLICY_REVISIONS; an operator may switch among them
 * (`PUT /api/policy {"revision": …}`).
 */
export const GiB = 1024 ** 3;
export const MiB = 1024 ** 2;

export type Priority = 'interactive' | 'background' | 'lab';
/** Higher rank = more important. A request may only evict engines of its rank or lower. */
export const PRIORITY_RANK: Readonly<Record<Priority, number>> = { interactive: 3, background: 2, lab: 1 };
export const PRIORITIES: readonly Priority[] = ['interactive', 'background', 'lab'];

export type PressureLevel = 'NORMAL' | 'ELEVATED' | 'HIGH' | 'CRITICAL';
export const PRESSURE_LEVELS: readonly PressureLevel[] = ['NORMAL', 'ELEVATED', 'HIGH', 'CRITICAL'];

export interface PressureThreshold {
  /** Enter the level at once when physical use / total reaches this. */
  enter: number;
  /** Leave it only after use / total has stayed below this for `recoveryHoldUs`. */
  exit: number;
}

export interface PlannerPolicy {
  readonly revision: string;
  /** dynamic_reserve = max(minBytes, fractionOfTotal · total) + runtimeMarginBytes ('add', m10-v1);
   *  'max' is the earlier reading, max(minBytes, fractionOfTotal · total, runtimeMarginBytes), in
   *  which a margin below minBytes never counts. */
  readonly reserve: { readonly minBytes: number; readonly fractionOfTotal: number; readonly runtimeMarginBytes: number; readonly margin: 'add' | 'max' };
  /** requirement = peak + max(minBytes, fraction · peak) */
  readonly envelopeMargin: { readonly minBytes: number; readonly fraction: number };
  readonly pressure: Readonly<Record<Exclude<PressureLevel, 'NORMAL'>, PressureThreshold>>;
  readonly recoveryHoldUs: number;
  /** Telemetry older than this is stale: attribution UNKNOWN, nothing schedulable. */
  readonly staleAfterUs: number;
  /** A lease not released by then no longer counts (the load died or hung). */
  readonly leaseTtlUs: number;
  /** The gateway's waiting line: how many requests may wait at once (more get 429), and how long
   *  a request whose plan says QUEUE waits for it to turn into a load, by priority. */
  readonly queue: { readonly maxDepth: number; readonly maxWaitUs: Readonly<Record<Priority, number>> };
  /** How many plans the history keeps. */
  readonly historySize: number;
}

export const POLICY_M10_V1: PlannerPolicy = Object.freeze({
  revision: 'm10-v1',
  reserve: Object.freeze({ minBytes: 1 * GiB, fractionOfTotal: 0.05, runtimeMarginBytes: 256 * MiB, margin: 'add' as const }),
  envelopeMargin: Object.freeze({ minBytes: 128 * MiB, fraction: 0.1 }),
  pressure: Object.freeze({
    ELEVATED: Object.freeze({ enter: 0.8, exit: 0.75 }),
    HIGH: Object.freeze({ enter: 0.9, exit: 0.85 }),
    CRITICAL: Object.freeze({ enter: 0.97, exit: 0.93 }),
  }),
  recoveryHoldUs: 30_000_000,
  staleAfterUs: 2_000_000,
  leaseTtlUs: 300_000_000,
  queue: Object.freeze({
    maxDepth: 32,
    maxWaitUs: Object.freeze({ interactive: 120_000_000, background: 600_000_000, lab: 1_800_000_000 }),
  }),
  historySize: 500,
});

/**
 * m10-v1 with the reserve as builds before this one counted it: max(1 GiB, 5 %, 256 MiB), in which
 * the 256 MiB runtime margin never counts. Kept so that an operator can plan as those builds did
 * (to compare, or to undo the margin on a device where 256 MiB matters); every other number is
 * m10-v1's.
 */
export const POLICY_M10_V1_MAX_RESERVE: PlannerPolicy = Object.freeze({
  ...POLICY_M10_V1,
  revision: 'm10-v1-max-reserve',
  reserve: Object.freeze({ ...POLICY_M10_V1.reserve, margin: 'max' as const }),
});

/** The revisions this build knows, by name; the first is the default. */
export const POLICY_REVISIONS: readonly PlannerPolicy[] = Object.freeze([POLICY_M10_V1, POLICY_M10_V1_MAX_RESERVE]);
export const DEFAULT_POLICY = POLICY_M10_V1;

/** A revision this build knows, by its plain name (no override); undefined otherwise. */
export function revisionNamed(name: string): PlannerPolicy | undefined {
  return POLICY_REVISIONS.find((p) => p.revision === name);
}

/** The revisions this build knows, for messages. */
export const KNOWN_REVISIONS_TEXT = POLICY_REVISIONS.map((p) => p.revision).join(', ');

/**
 * The policy a revision name stands for: a known revision, with an operator's queue override
 * (`+queue.maxDepth=N`, withQueueDepth) when it carries one. null for a name this build does not
 * know (a newer build's revision, a typo): the caller says so rather than guess its numbers.
 */
export function policyByRevision(revision: string): PlannerPolicy | null {
  const match = /^(.*?)(?:\+queue\.maxDepth=(\d{1,9}))?$/.exec(revision);
  if (match === null) return null;
  const base = revisionNamed(match[1] ?? '');
  if (base === undefined) return null;
  if (match[2] === undefined) return base;
  const depth = Number(match[2]);
  if (!Number.isInteger(depth) || depth < 1 || depth === base.queue.maxDepth) return null;
  return withQueueDepth(base, depth);
}

/** The same policy under another known revision, keeping an operator's queue override. */
export function switchRevision(current: PlannerPolicy, to: PlannerPolicy): PlannerPolicy {
  const base = POLICY_REVISIONS.find((p) => current.revision === p.revision || current.revision.startsWith(`${p.revision}+`));
  return base !== undefined && current.queue.maxDepth !== base.queue.maxDepth ? withQueueDepth(to, current.queue.maxDepth) : to;
}

export function dynamicReserveBytes(totalBytes: number, policy: PlannerPolicy): number {
  const { minBytes, fractionOfTotal, runtimeMarginBytes, margin } = policy.reserve;
  const share = Math.max(minBytes, Math.round(fractionOfTotal * totalBytes));
  return margin === 'add' ? share + runtimeMarginBytes : Math.max(share, runtimeMarginBytes);
}

export function requirementBytes(measuredPeakBytes: number, policy: PlannerPolicy): number {
  const { minBytes, fraction } = policy.envelopeMargin;
  return measuredPeakBytes + Math.max(minBytes, Math.round(fraction * measuredPeakBytes));
}

/** The policy with an operator's override of the gateway queue's depth (`serve --queue-limit N`).
 *  The override is part of the revision (`m10-v1+queue.maxDepth=N`), so every plan made under it
 *  says so, and its fingerprint differs from one made under the plain policy. */
export function withQueueDepth(policy: PlannerPolicy, maxDepth: number): PlannerPolicy {
  if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new RangeError(`queue.maxDepth must be a whole number ≥ 1, got ${maxDepth}`);
  if (maxDepth === policy.queue.maxDepth) return policy;
  return Object.freeze({
    ...policy,
    revision: `${policy.revision}+queue.maxDepth=${maxDepth}`,
    queue: Object.freeze({ ...policy.queue, maxDepth }),
  });
}
