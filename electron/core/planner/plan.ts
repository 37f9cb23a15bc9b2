/**
 * plan(request, snapshot, policy) → PlacementPlan. Pure and deterministic: it reads nothing but
 * its arguments, logs nothing and acts on nothing; the same function serves dry-runs and real
 * loads. Accounting (DESIGN.md):
 *
 *   physical_used      = max(observed_used, attributed_managed_resident)
 *   unmanaged_external = max(0, observed_used − attributed_managed_resident)
 *   future_lease       = Σ max(0, reserved − materialized)          (unexpired leases only)
 *   schedulable        = max(0, total − physical_used − future_lease − dynamic_reserve)
 *   requirement        = peak + max(128 MiB, 10 % of peak)
 */
import { fingerprint } from './fingerprint.js';
import { PRIORITY_RANK, dynamicReserveBytes, requirementBytes, type PlannerPolicy } from './policy.js';
import {
  PlannerInputError,
  type Attribution,
  type Breakdown,
  type Eviction,
  type Lease,
  type ManagedResident,
  type PlacementPlan,
  type PlanRequest,
  type PlannerSnapshot,
  type Reason,
  type Verdict,
} from './types.js';

function checkBytes(field: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new PlannerInputError(field, `must be a finite number of bytes, got ${String(value)}`);
  if (value < 0) throw new PlannerInputError(field, `must not be negative, got ${value}`);
}

function checkTime(field: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new PlannerInputError(field, `must be a finite time in µs, got ${String(value)}`);
}

/** Every number the planner reads, checked: NaN, negative or missing is an error, never a verdict. */
export function validateInputs(request: PlanRequest, snapshot: PlannerSnapshot): void {
  if (request === null || typeof request !== 'object') throw new PlannerInputError('request', 'is missing');
  if (snapshot === null || typeof snapshot !== 'object') throw new PlannerInputError('snapshot', 'is missing');
  checkBytes('request.peakBytes', request.peakBytes);
  if (request.peakBytes === 0) throw new PlannerInputError('request.peakBytes', 'must be greater than 0');
  for (const field of ['contextSize', 'gpuLayers'] as const) {
    const value = request[field];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw new PlannerInputError(`request.${field}`, `must be a whole number ≥ 0, got ${String(value)}`);
  }
  if (!(request.priority in PRIORITY_RANK)) throw new PlannerInputError('request.priority', `must be interactive, background or lab, got ${String(request.priority)}`);
  checkTime('snapshot.nowUs', snapshot.nowUs);
  const device = snapshot.device;
  if (device !== null) {
    if (device === undefined) throw new PlannerInputError('snapshot.device', 'is missing (use null for "no telemetry")');
    checkBytes('device.totalBytes', device.totalBytes);
    checkBytes('device.observedUsedBytes', device.observedUsedBytes);
    checkTime('device.sampledAtUs', device.sampledAtUs);
    device.processes?.forEach((p, i) => checkBytes(`device.processes[${i}].usedBytes`, p.usedBytes));
  }
  if (!Array.isArray(snapshot.residents)) throw new PlannerInputError('snapshot.residents', 'must be a list');
  if (!Array.isArray(snapshot.leases)) throw new PlannerInputError('snapshot.leases', 'must be a list');
  snapshot.residents.forEach((r, i) => {
    checkBytes(`residents[${i}].envelopeBytes`, r.envelopeBytes);
    checkTime(`residents[${i}].idleSinceUs`, r.idleSinceUs);
    if (!(r.priority in PRIORITY_RANK)) throw new PlannerInputError(`residents[${i}].priority`, `unknown priority ${String(r.priority)}`);
  });
  snapshot.leases.forEach((l, i) => {
    checkBytes(`leases[${i}].reservedBytes`, l.reservedBytes);
    checkBytes(`leases[${i}].materializedBytes`, l.materializedBytes);
    checkTime(`leases[${i}].expiresAtUs`, l.expiresAtUs);
  });
}

/** An expired lease is never counted (`no_stale_gpu_lease`). */
export function liveLeases(leases: readonly Lease[], nowUs: number): Lease[] {
  return leases.filter((lease) => lease.expiresAtUs > nowUs);
}

interface Accounting {
  attribution: Attribution;
  breakdown: Breakdown;
  /** Bytes each resident is taken to use (per-process figure, or its envelope). */
  usedBy: Map<string, number>;
  sampleAgeUs: number | null;
}

export function account(request: PlanRequest, snapshot: PlannerSnapshot, policy: PlannerPolicy): Accounting {
  const device = snapshot.device;
  const requirement = requirementBytes(request.peakBytes, policy);
  const sampleAgeUs = device === null ? null : snapshot.nowUs - device.sampledAtUs;
  const stale = device === null || (sampleAgeUs ?? 0) > policy.staleAfterUs;
  const processes = device?.processes ?? null;
  const attribution: Attribution = stale ? 'UNKNOWN' : processes !== null ? 'KNOWN' : 'ESTIMATED';
  const byPid = new Map<number, number>();
  if (processes !== null) for (const p of processes) byPid.set(p.pid, (byPid.get(p.pid) ?? 0) + p.usedBytes);
  const usedBy = new Map<string, number>();
  for (const resident of snapshot.residents) {
    // A managed engine the driver does not list uses nothing on the device (yet).
    usedBy.set(resident.id, attribution === 'KNOWN' ? (byPid.get(resident.pid) ?? 0) : resident.envelopeBytes);
  }
  const total = device?.totalBytes ?? 0;
  const observed = device?.observedUsedBytes ?? 0;
  const managed = [...usedBy.values()].reduce((a, b) => a + b, 0);
  const futureLease = liveLeases(snapshot.leases, snapshot.nowUs).reduce((sum, l) => sum + Math.max(0, l.reservedBytes - l.materializedBytes), 0);
  const reserve = dynamicReserveBytes(total, policy);
  const physicalUsed = Math.max(observed, managed);
  const schedulable = attribution === 'UNKNOWN' ? 0 : Math.max(0, total - physicalUsed - futureLease - reserve);
  return {
    attribution,
    usedBy,
    sampleAgeUs,
    breakdown: {
      totalBytes: total,
      observedUsedBytes: observed,
      managedResidentBytes: managed,
      unmanagedExternalBytes: Math.max(0, observed - managed),
      futureLeaseBytes: futureLease,
      reserveBytes: reserve,
      schedulableBytes: schedulable,
      requirementBytes: requirement,
      invariantDeltaBytes: observed - managed,
      physicalUsedBytes: physicalUsed,
    },
  };
}

/** Idle managed engines the request may evict, in eviction order: lowest priority, longest idle,
 *  then id. Never a busy one, a pinned one, or one of higher priority than the request. */
export function evictionCandidates(request: PlanRequest, residents: readonly ManagedResident[]): ManagedResident[] {
  const rank = PRIORITY_RANK[request.priority];
  return residents
    .filter((r) => !r.busy && !r.pinned && PRIORITY_RANK[r.priority] <= rank)
    .sort((a, b) => PRIORITY_RANK[a.priority] - PRIORITY_RANK[b.priority] || a.idleSinceUs - b.idleSinceUs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

interface Decision {
  verdict: Verdict;
  reasons: Reason[];
  evictions: Eviction[];
}

function decide(request: PlanRequest, snapshot: PlannerSnapshot, acc: Accounting): Decision {
  const b = acc.breakdown;
  const none: Eviction[] = [];
  const requested = b.requirementBytes;
  const { controls, device } = snapshot;
  if (controls.draining) return { verdict: 'REJECT_POLICY', reasons: [{ code: 'DRAINING' }], evictions: none };
  if (controls.labPaused && request.priority === 'lab') return { verdict: 'REJECT_POLICY', reasons: [{ code: 'LAB_PAUSED' }], evictions: none };
  if (controls.allowedCapabilities !== null && !controls.allowedCapabilities.includes(request.capability)) {
    return { verdict: 'REJECT_POLICY', reasons: [{ code: 'CAPABILITY_NOT_ALLOWED', capability: request.capability }], evictions: none };
  }
  if (device !== null && device.health === 'FAILED') return { verdict: 'REJECT_HEALTH', reasons: [{ code: 'DEVICE_FAILED', health: device.health }], evictions: none };
  if (request.modelProblem !== undefined) return { verdict: 'REJECT_HEALTH', reasons: [{ ...request.modelProblem }], evictions: none };
  if (acc.attribution === 'UNKNOWN') {
    const reason: Reason = device === null ? { code: 'TELEMETRY_MISSING', requestedBytes: requested } : { code: 'TELEMETRY_STALE', requestedBytes: requested, sampleAgeUs: acc.sampleAgeUs ?? 0 };
    return { verdict: 'QUEUE', reasons: [reason], evictions: none };
  }
  if (snapshot.pressure === 'CRITICAL') {
    return { verdict: 'REJECT_CAPACITY', reasons: [{ code: 'EXTERNAL_GPU_PRESSURE', pressure: 'CRITICAL', requestedBytes: requested, unmanagedExternalBytes: b.unmanagedExternalBytes }], evictions: none };
  }
  if ((snapshot.pressure === 'ELEVATED' || snapshot.pressure === 'HIGH') && request.priority !== 'interactive') {
    return { verdict: 'QUEUE', reasons: [{ code: 'PRESSURE_DEFERS_BACKGROUND', pressure: snapshot.pressure, requestedBytes: requested }], evictions: none };
  }
  const capacity = b.totalBytes - b.reserveBytes;
  if (requested > capacity) {
    return { verdict: 'REJECT_CAPACITY', reasons: [{ code: 'EXCEEDS_DEVICE', requestedBytes: requested, capacityBytes: capacity }], evictions: none };
  }
  if (requested <= b.schedulableBytes) {
    return { verdict: 'ADMIT', reasons: [{ code: 'FITS', requestedBytes: requested, schedulableBytes: b.schedulableBytes }], evictions: none };
  }
  // Evicting an engine frees what it uses; while physical use is set by an observed figure above
  // the managed sum, the unmanaged part stays.
  const evictions: Eviction[] = [];
  let freed = 0;
  for (const resident of evictionCandidates(request, snapshot.residents)) {
    if (b.schedulableBytes + freed >= requested) break;
    const bytes = acc.usedBy.get(resident.id) ?? 0;
    freed += bytes;
    evictions.push({ id: resident.id, pid: resident.pid, priority: resident.priority, freedBytes: bytes, idleForUs: Math.max(0, snapshot.nowUs - resident.idleSinceUs) });
  }
  const freeable = freed;
  if (b.schedulableBytes + freed >= requested && evictions.length > 0) {
    return { verdict: 'ADMIT_AFTER_EVICTION', reasons: [{ code: 'FITS_AFTER_EVICTION', requestedBytes: requested, schedulableBytes: b.schedulableBytes, freeableBytes: freed }], evictions };
  }
  // Would it fit once leases settle and busy engines (that it may evict) finish?
  const rank = PRIORITY_RANK[request.priority];
  const busyFreeable = snapshot.residents.filter((r) => r.busy && !r.pinned && PRIORITY_RANK[r.priority] <= rank).reduce((sum, r) => sum + (acc.usedBy.get(r.id) ?? 0), 0);
  const pending = b.futureLeaseBytes + busyFreeable;
  if (b.schedulableBytes + freeable + pending >= requested) {
    const code = b.futureLeaseBytes > 0 && b.schedulableBytes + freeable + b.futureLeaseBytes >= requested ? 'WAIT_FOR_LEASES' : 'WAIT_FOR_BUSY_ENGINES';
    return { verdict: 'QUEUE', reasons: [{ code, requestedBytes: requested, schedulableBytes: b.schedulableBytes, freeableBytes: freeable, pendingBytes: pending }], evictions: none };
  }
  return {
    verdict: 'REJECT_CAPACITY',
    reasons: [{ code: 'INSUFFICIENT_CAPACITY', requestedBytes: requested, schedulableBytes: b.schedulableBytes, freeableBytes: freeable, unmanagedExternalBytes: b.unmanagedExternalBytes }],
    evictions: none,
  };
}

const byId = (a: { id: string }, b: { id: string }): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** Every input and result field, fed in a fixed order (so key order in the caller's objects does
 *  not matter), lists sorted (so their order does not either). */
function fingerprintPlan(request: PlanRequest, snapshot: PlannerSnapshot, policy: PlannerPolicy, decision: Decision): string {
  const f = fingerprint();
  const r = request;
  f.str(policy.revision).str(r.capability).str(r.modelKey).num(r.contextSize).num(r.gpuLayers).str(r.engineKind).str(r.priority).num(r.peakBytes).str(r.peakSource);
  // Only when present, so that the fingerprints of plans for usable models stay as they were.
  if (r.modelProblem !== undefined) f.str(r.modelProblem.code).num(r.modelProblem.fileBytes).num(r.modelProblem.neededBytes);
  f.num(snapshot.nowUs).str(snapshot.pressure);
  const c = snapshot.controls;
  f.bool(c.draining).bool(c.labPaused);
  if (c.allowedCapabilities === null) f.str(null);
  else {
    const allowed = [...c.allowedCapabilities].sort();
    f.list(allowed.length);
    for (const name of allowed) f.str(name);
  }
  const d = snapshot.device;
  if (d === null) f.str(null);
  else {
    f.str(d.key).str(d.name).num(d.totalBytes).num(d.observedUsedBytes).str(d.health).num(d.sampledAtUs);
    if (d.processes === null) f.str(null);
    else {
      const processes = [...d.processes].sort((x, y) => x.pid - y.pid || x.usedBytes - y.usedBytes);
      f.list(processes.length);
      for (const p of processes) f.num(p.pid).num(p.usedBytes);
    }
  }
  const residents = [...snapshot.residents].sort(byId);
  f.list(residents.length);
  for (const x of residents) f.str(x.id).num(x.pid).str(x.priority).bool(x.pinned).bool(x.busy).num(x.idleSinceUs).num(x.envelopeBytes);
  const leases = [...snapshot.leases].sort(byId);
  f.list(leases.length);
  for (const x of leases) f.str(x.id).num(x.reservedBytes).num(x.materializedBytes).num(x.expiresAtUs);
  f.str(decision.verdict).list(decision.reasons.length);
  for (const x of decision.reasons) {
    f.str(x.code).num(x.requestedBytes).num(x.schedulableBytes).num(x.freeableBytes).num(x.pendingBytes).num(x.capacityBytes).num(x.unmanagedExternalBytes).num(x.sampleAgeUs);
    f.str(x.pressure).str(x.capability).str(x.health);
    if (x.fileBytes !== undefined || x.neededBytes !== undefined) f.num(x.fileBytes).num(x.neededBytes);
  }
  f.list(decision.evictions.length);
  for (const e of decision.evictions) f.str(e.id).num(e.pid).str(e.priority).num(e.freedBytes).num(e.idleForUs);
  return f.digest();
}

export function plan(request: PlanRequest, snapshot: PlannerSnapshot, policy: PlannerPolicy): PlacementPlan {
  validateInputs(request, snapshot);
  const acc = account(request, snapshot, policy);
  const { verdict, reasons, evictions } = decide(request, snapshot, acc);
  const freed = evictions.reduce((sum, e) => sum + e.freedBytes, 0);
  const b = acc.breakdown;
  const residents = [...snapshot.residents]
    .sort(byId)
    .map((r) => ({ id: r.id, pid: r.pid, priority: r.priority, busy: r.busy, pinned: r.pinned, usedBytes: acc.usedBy.get(r.id) ?? 0 }));
  const fingerprint = fingerprintPlan(request, snapshot, policy, { verdict, reasons, evictions });
  return {
    verdict,
    reasons,
    policy: policy.revision,
    fingerprint,
    attribution: acc.attribution,
    breakdown: b,
    request: { ...request },
    device: snapshot.device === null ? null : { key: snapshot.device.key, name: snapshot.device.name, health: snapshot.device.health },
    eligible: { pressure: snapshot.pressure, sampleAgeUs: acc.sampleAgeUs },
    residents,
    evictions,
    headroomBeforeBytes: b.schedulableBytes,
    headroomAfterBytes: b.schedulableBytes + freed - b.requirementBytes,
    plannedAtUs: snapshot.nowUs,
  };
}
