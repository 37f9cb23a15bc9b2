/**
 * plan(request, snapshot, policy) → PlacementPlan. Pure and deterministic: it reads nothing but
 * its arguments, logs nothing and acts on nothing; the same function serves dry-runs and real
 * loads. Accounting (docs/planner.md):
 *
 *   physical_used      = max(observed_used, attributed_managed_resident)
 *   unmanaged_external = max(0, observed_used − attributed_managed_resident)
 *   future_lease       = Σ max(0, reserved − materialized)          (unexpired leases only)
 *   schedulable        = max(0, total − physical_used − future_lease − dynamic_reserve)
 *   requirement        = peak + max(128 MiB, 10 % of peak)
 *
 * Pressure (ELEVATED/HIGH hold back background and lab loads, CRITICAL every load) and fit are
 * both judged on the use that remains after the plan's own evictions; pressure that stopping every
 * permitted idle engine cannot relieve is external (EXTERNAL_GPU_PRESSURE).
 */
import { fingerprint } from './fingerprint.js';
import { memoryNeeds } from './memory.js';
import { PRIORITY_RANK, dynamicReserveBytes, requirementBytes, type PlannerPolicy, type PressureLevel, type Priority } from './policy.js';
import { levelAfterEvictions, pressureHoldsBack } from './pressure.js';
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

// Checks that build their message (and the field's name) only when they fail: plan() runs on the
// planner's hot path, and a template string per field per plan was a third of its garbage.
const isBytes = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= 0;
const isTime = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);
const isWhole = (value: unknown): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 0;
const isWeight = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value > 0;
const isPriority = (value: unknown): value is Priority => value === 'interactive' || value === 'background' || value === 'lab';

function bytesError(field: string, value: unknown): PlannerInputError {
  return typeof value !== 'number' || !Number.isFinite(value)
    ? new PlannerInputError(field, `must be a finite number of bytes, got ${String(value)}`)
    : new PlannerInputError(field, `must not be negative, got ${value}`);
}
const timeError = (field: string, value: unknown): PlannerInputError => new PlannerInputError(field, `must be a finite time in µs, got ${String(value)}`);
const weightError = (field: string, value: unknown): PlannerInputError => new PlannerInputError(field, `must be a finite number > 0, got ${String(value)}`);

/** Every number the planner reads, checked: NaN, negative or missing is an error, never a verdict. */
export function validateInputs(request: PlanRequest, snapshot: PlannerSnapshot): void {
  if (request === null || typeof request !== 'object') throw new PlannerInputError('request', 'is missing');
  if (snapshot === null || typeof snapshot !== 'object') throw new PlannerInputError('snapshot', 'is missing');
  if (!isBytes(request.peakBytes)) throw bytesError('request.peakBytes', request.peakBytes);
  if (request.peakBytes === 0) throw new PlannerInputError('request.peakBytes', 'must be greater than 0');
  if (request.peakParts !== undefined) {
    for (const part of ['weightsBytes', 'kvCacheBytes', 'computeBytes'] as const) {
      if (!isBytes(request.peakParts[part])) throw bytesError(`request.peakParts.${part}`, request.peakParts[part]);
    }
  }
  if (!isWhole(request.contextSize)) throw new PlannerInputError('request.contextSize', `must be a whole number ≥ 0, got ${String(request.contextSize)}`);
  if (request.trainContextSize !== undefined && request.trainContextSize !== null && !isWhole(request.trainContextSize)) {
    throw new PlannerInputError('request.trainContextSize', `must be a whole number ≥ 0 or null, got ${String(request.trainContextSize)}`);
  }
  if (!isWhole(request.gpuLayers)) throw new PlannerInputError('request.gpuLayers', `must be a whole number ≥ 0, got ${String(request.gpuLayers)}`);
  if (!isPriority(request.priority)) throw new PlannerInputError('request.priority', `must be interactive, background or lab, got ${String(request.priority)}`);
  if (!isWeight(request.weight)) throw weightError('request.weight', request.weight);
  if (!isTime(snapshot.nowUs)) throw timeError('snapshot.nowUs', snapshot.nowUs);
  if (typeof snapshot.node !== 'string') throw new PlannerInputError('snapshot.node', `must be the host name, got ${String(snapshot.node)}`);
  const accelerator = snapshot.accelerator as PlannerSnapshot['accelerator'] | null | undefined;
  if (accelerator === null || typeof accelerator !== 'object' || typeof accelerator.key !== 'string' || (accelerator.name !== null && typeof accelerator.name !== 'string')) {
    throw new PlannerInputError('snapshot.accelerator', 'must name the device: { key, name (null when unknown) }');
  }
  if (!isWhole(snapshot.queueDepth)) throw new PlannerInputError('snapshot.queueDepth', `must be a whole number ≥ 0, got ${String(snapshot.queueDepth)}`);
  const device = snapshot.device;
  if (device !== null) {
    if (device === undefined) throw new PlannerInputError('snapshot.device', 'is missing (use null for "no telemetry")');
    if (!isBytes(device.totalBytes)) throw bytesError('device.totalBytes', device.totalBytes);
    if (!isBytes(device.observedUsedBytes)) throw bytesError('device.observedUsedBytes', device.observedUsedBytes);
    if (!isTime(device.sampledAtUs)) throw timeError('device.sampledAtUs', device.sampledAtUs);
    if (device.queryFailedAtUs !== undefined && !isTime(device.queryFailedAtUs)) throw timeError('device.queryFailedAtUs', device.queryFailedAtUs);
    const processes = device.processes;
    if (processes !== null) {
      for (let i = 0; i < processes.length; i++) {
        const used = processes[i]?.usedBytes;
        if (!isBytes(used)) throw bytesError(`device.processes[${i}].usedBytes`, used);
      }
    }
  }
  if (!Array.isArray(snapshot.residents)) throw new PlannerInputError('snapshot.residents', 'must be a list');
  if (!Array.isArray(snapshot.leases)) throw new PlannerInputError('snapshot.leases', 'must be a list');
  for (let i = 0; i < snapshot.residents.length; i++) {
    const r = snapshot.residents[i] as ManagedResident;
    if (!isBytes(r.envelopeBytes)) throw bytesError(`residents[${i}].envelopeBytes`, r.envelopeBytes);
    if (!isTime(r.idleSinceUs)) throw timeError(`residents[${i}].idleSinceUs`, r.idleSinceUs);
    if (!isPriority(r.priority)) throw new PlannerInputError(`residents[${i}].priority`, `unknown priority ${String(r.priority)}`);
    if (!isWeight(r.weight)) throw weightError(`residents[${i}].weight`, r.weight);
  }
  for (let i = 0; i < snapshot.leases.length; i++) {
    const l = snapshot.leases[i] as Lease;
    if (!isBytes(l.reservedBytes)) throw bytesError(`leases[${i}].reservedBytes`, l.reservedBytes);
    if (!isBytes(l.materializedBytes)) throw bytesError(`leases[${i}].materializedBytes`, l.materializedBytes);
    if (!isTime(l.expiresAtUs)) throw timeError(`leases[${i}].expiresAtUs`, l.expiresAtUs);
  }
}

/** An expired lease is never counted (`no_stale_gpu_lease`). */
export function liveLeases(leases: readonly Lease[], nowUs: number): Lease[] {
  return leases.filter((lease) => lease.expiresAtUs > nowUs);
}

const compareIds = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const byId = (a: { id: string }, b: { id: string }): number => compareIds(a.id, b.id);
const byPid = (a: { pid: number; usedBytes: number }, b: { pid: number; usedBytes: number }): number => a.pid - b.pid || a.usedBytes - b.usedBytes;

/** Sorts a short list in place (insertion sort: the lists here have tens of items, and unlike
 *  Array#sort it allocates nothing). */
function sortInPlace<T>(items: T[], compare: (a: T, b: T) => number): T[] {
  for (let i = 1; i < items.length; i++) {
    const item = items[i] as T;
    let j = i - 1;
    while (j >= 0 && compare(items[j] as T, item) > 0) {
      items[j + 1] = items[j] as T;
      j--;
    }
    items[j + 1] = item;
  }
  return items;
}

interface Accounting {
  attribution: Attribution;
  breakdown: Breakdown;
  sampleAgeUs: number | null;
  /** The residents sorted by id, and what each is taken to use (per-process figure, or its
   *  envelope), index for index. */
  residents: ManagedResident[];
  usedBytes: number[];
  /** The unexpired leases, sorted by id. */
  leases: Lease[];
}

export function account(request: PlanRequest, snapshot: PlannerSnapshot, policy: PlannerPolicy): Accounting {
  const device = snapshot.device;
  const requirement = requirementBytes(request.peakBytes, policy);
  const sampleAgeUs = device === null ? null : snapshot.nowUs - device.sampledAtUs;
  // Figures whose latest query failed are not live, however young. A sample stamped further in the
  // future than the limit is stale too: the wall clock stepped back.
  const stale = sampleAgeUs === null || device?.queryFailedAtUs !== undefined || sampleAgeUs > policy.staleAfterUs || sampleAgeUs < -policy.staleAfterUs;
  const processes = device?.processes ?? null;
  const attribution: Attribution = stale ? 'UNKNOWN' : processes !== null ? 'KNOWN' : 'ESTIMATED';
  const residents = sortInPlace(snapshot.residents.slice(), byId);
  const usedBytes: number[] = [];
  let managed = 0;
  for (const resident of residents) {
    let used = resident.envelopeBytes;
    if (attribution === 'KNOWN' && processes !== null) {
      // A managed engine the driver does not list uses nothing on the device (yet).
      used = 0;
      for (const p of processes) if (p.pid === resident.pid) used += p.usedBytes;
    }
    usedBytes.push(used);
    managed += used;
  }
  const total = device?.totalBytes ?? 0;
  const observed = device?.observedUsedBytes ?? 0;
  const leases = sortInPlace(liveLeases(snapshot.leases, snapshot.nowUs), byId);
  let futureLease = 0;
  for (const l of leases) futureLease += Math.max(0, l.reservedBytes - l.materializedBytes);
  const reserve = dynamicReserveBytes(total, policy);
  const physicalUsed = Math.max(observed, managed);
  const schedulable = attribution === 'UNKNOWN' ? 0 : Math.max(0, total - physicalUsed - futureLease - reserve);
  return {
    attribution,
    sampleAgeUs,
    residents,
    usedBytes,
    leases,
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

/** What is schedulable once `freedBytes` of our engines are stopped: the same formula on the use
 *  that remains (not `schedulable + freed`, which overstates it when use is above what the reserve
 *  allows). Evicting an engine frees what it uses; the unmanaged part of an observed figure stays. */
export function schedulableAfter(acc: Pick<Accounting, 'attribution' | 'breakdown'>, freedBytes: number): number {
  const b = acc.breakdown;
  if (acc.attribution === 'UNKNOWN') return 0;
  return Math.max(0, b.totalBytes - (b.physicalUsedBytes - freedBytes) - b.futureLeaseBytes - b.reserveBytes);
}

const byEvictionOrder = (a: ManagedResident, b: ManagedResident): number => PRIORITY_RANK[a.priority] - PRIORITY_RANK[b.priority] || a.idleSinceUs - b.idleSinceUs || compareIds(a.id, b.id);

/** Idle managed engines the request may evict, in eviction order: lowest priority, longest idle,
 *  then id. Never a busy one, a pinned one, or one of higher priority than the request. */
export function evictionCandidates(request: PlanRequest, residents: readonly ManagedResident[]): ManagedResident[] {
  const rank = PRIORITY_RANK[request.priority];
  return sortInPlace(
    residents.filter((r) => !r.busy && !r.pinned && PRIORITY_RANK[r.priority] <= rank),
    byEvictionOrder,
  );
}

interface Decision {
  verdict: Verdict;
  reasons: Reason[];
  evictions: Eviction[];
  freedBytes: number;
  /** The pressure level the plan was judged by, after its evictions. */
  pressureAfter: PressureLevel;
}

const NO_EVICTIONS: readonly Eviction[] = Object.freeze([]);

function decide(request: PlanRequest, snapshot: PlannerSnapshot, policy: PlannerPolicy, acc: Accounting): Decision {
  const b = acc.breakdown;
  const requested = b.requirementBytes;
  const { controls, device } = snapshot;
  const tracked = snapshot.pressure;
  const only = (verdict: Verdict, reason: Reason): Decision => ({ verdict, reasons: [reason], evictions: NO_EVICTIONS as Eviction[], freedBytes: 0, pressureAfter: tracked });
  if (controls.draining) return only('REJECT_POLICY', { code: 'DRAINING' });
  if (controls.labPaused && request.priority === 'lab') return only('REJECT_POLICY', { code: 'LAB_PAUSED' });
  if (controls.allowedCapabilities !== null && !controls.allowedCapabilities.includes(request.capability)) {
    return only('REJECT_POLICY', { code: 'CAPABILITY_NOT_ALLOWED', capability: request.capability });
  }
  if (device !== null && device.health === 'FAILED') return only('REJECT_HEALTH', { code: 'DEVICE_FAILED', health: device.health });
  if (request.modelProblem !== undefined) return only('REJECT_HEALTH', { ...request.modelProblem });
  if (request.executableProblem !== undefined) {
    const { executable, problem } = request.executableProblem;
    return only('REJECT_HEALTH', { code: 'ENGINE_EXECUTABLE_MISSING', executable, executableProblem: problem });
  }
  if (acc.attribution === 'UNKNOWN') {
    // A telemetry gap is no fact about the model: it waits (QUEUE) and is planned again when
    // figures return, never rejected for a device of 0 bytes.
    return only(
      'QUEUE',
      device === null
        ? { code: 'TELEMETRY_MISSING', requestedBytes: requested }
        : {
            code: 'TELEMETRY_STALE',
            requestedBytes: requested,
            sampleAgeUs: acc.sampleAgeUs ?? 0,
            staleAfterUs: policy.staleAfterUs,
            ...(device.queryFailedAtUs === undefined ? {} : { queryFailed: true }),
          },
    );
  }
  const capacity = b.totalBytes - b.reserveBytes;
  if (requested > capacity) return only('REJECT_CAPACITY', { code: 'EXCEEDS_DEVICE', requestedBytes: requested, capacityBytes: capacity });

  // Fit and pressure are both judged on the use that remains after the plan's own evictions: idle
  // engines of ours that cause the pressure are stopped rather than holding everything back.
  const levelAfter = (freed: number): PressureLevel => levelAfterEvictions(tracked, b.physicalUsedBytes, freed, b.totalBytes, policy);
  const admissible = (freed: number): boolean => requested <= schedulableAfter(acc, freed) && !pressureHoldsBack(levelAfter(freed), request.priority);
  if (admissible(0)) return only('ADMIT', { code: 'FITS', requestedBytes: requested, schedulableBytes: b.schedulableBytes });

  const evictions: Eviction[] = [];
  let freed = 0;
  const rank = PRIORITY_RANK[request.priority];
  for (let i = 0; i < acc.residents.length; i++) {
    const r = acc.residents[i] as ManagedResident;
    if (r.busy || r.pinned || PRIORITY_RANK[r.priority] > rank) continue;
    // Collected here in id order; put in eviction order below.
    evictions.push({ id: r.id, pid: r.pid, priority: r.priority, freedBytes: acc.usedBytes[i] ?? 0, idleForUs: Math.max(0, snapshot.nowUs - r.idleSinceUs) });
  }
  const idleSince = (e: Eviction): number => snapshot.nowUs - e.idleForUs;
  sortInPlace(evictions, (x, y) => PRIORITY_RANK[x.priority] - PRIORITY_RANK[y.priority] || idleSince(x) - idleSince(y) || compareIds(x.id, y.id));
  let taken = 0;
  for (const eviction of evictions) {
    // An engine that uses nothing on the device frees nothing: stopping it helps no one.
    if (eviction.freedBytes <= 0) continue;
    evictions[taken++] = eviction;
    freed += eviction.freedBytes;
    if (admissible(freed)) {
      evictions.length = taken;
      const after = levelAfter(freed);
      const reasons: Reason[] = [{ code: 'FITS_AFTER_EVICTION', requestedBytes: requested, schedulableBytes: b.schedulableBytes, freeableBytes: freed }];
      if (pressureHoldsBack(tracked, request.priority)) {
        reasons.push({ code: 'PRESSURE_RELIEVED_BY_EVICTION', pressure: tracked, pressureAfterEvictions: after, usedAfterEvictionsBytes: b.physicalUsedBytes - freed });
      }
      return { verdict: 'ADMIT_AFTER_EVICTION', reasons, evictions, freedBytes: freed, pressureAfter: after };
    }
  }

  // Not admissible even with every permitted eviction (`freed` is all they would free).
  const freeable = freed;
  const after = levelAfter(freeable);
  const usedAfter = b.physicalUsedBytes - freeable;
  if (pressureHoldsBack(after, request.priority)) {
    // Pressure our evictions cannot relieve is external by definition.
    if (after === 'CRITICAL') {
      return only('REJECT_CAPACITY', {
        code: 'EXTERNAL_GPU_PRESSURE',
        pressure: tracked,
        pressureAfterEvictions: after,
        requestedBytes: requested,
        freeableBytes: freeable,
        usedAfterEvictionsBytes: usedAfter,
        unmanagedExternalBytes: b.unmanagedExternalBytes,
      });
    }
    return only('QUEUE', { code: 'PRESSURE_DEFERS_BACKGROUND', pressure: tracked, pressureAfterEvictions: after, requestedBytes: requested, freeableBytes: freeable, usedAfterEvictionsBytes: usedAfter });
  }
  // Would it fit once leases settle and busy engines (that it may evict) finish?
  let busyFreeable = 0;
  for (let i = 0; i < acc.residents.length; i++) {
    const r = acc.residents[i] as ManagedResident;
    if (r.busy && !r.pinned && PRIORITY_RANK[r.priority] <= rank) busyFreeable += acc.usedBytes[i] ?? 0;
  }
  const pending = b.futureLeaseBytes + busyFreeable;
  const withoutLeases = (freedBytes: number): number => Math.max(0, b.totalBytes - (b.physicalUsedBytes - freedBytes) - b.reserveBytes);
  if (requested <= withoutLeases(freeable + busyFreeable)) {
    const code = b.futureLeaseBytes > 0 && requested <= withoutLeases(freeable) ? 'WAIT_FOR_LEASES' : 'WAIT_FOR_BUSY_ENGINES';
    return only('QUEUE', { code, requestedBytes: requested, schedulableBytes: b.schedulableBytes, freeableBytes: freeable, pendingBytes: pending });
  }
  return only('REJECT_CAPACITY', { code: 'INSUFFICIENT_CAPACITY', requestedBytes: requested, schedulableBytes: b.schedulableBytes, freeableBytes: freeable, unmanagedExternalBytes: b.unmanagedExternalBytes });
}

/** Warnings beside the verdict (they decide nothing): a context above the model's trained one. */
function withWarnings(request: PlanRequest, decision: Decision): Decision {
  const trained = request.trainContextSize;
  if (trained === undefined || trained === null || trained <= 0 || request.contextSize <= trained || request.modelProblem !== undefined) return decision;
  return { ...decision, reasons: [...decision.reasons, { code: 'CONTEXT_ABOVE_TRAINED', contextSize: request.contextSize, trainContextSize: trained }] };
}

/**
 * Every input and result field, fed in a fixed order (so key order in the caller's objects does
 * not matter), lists sorted (so their order does not either), and nothing derived from the clock:
 * not now, the sample's time or age, how long an engine has been idle, or when a lease expires.
 * Those stay in the record. Whether the sample is fresh, which leases are live and the order of
 * the evictions do depend on them, and they are in the hash through the result (verdict, reasons,
 * the live leases, the evictions).
 */
function fingerprintPlan(request: PlanRequest, snapshot: PlannerSnapshot, policy: PlannerPolicy, acc: Accounting, decision: Decision): string {
  const f = fingerprint();
  const r = request;
  f.str(policy.revision).str(r.capability).str(r.modelKey).num(r.contextSize).num(r.gpuLayers).str(r.engineKind).str(r.priority).num(r.peakBytes).str(r.peakSource).num(r.weight);
  if (r.trainContextSize !== undefined && r.trainContextSize !== null) f.num(r.trainContextSize);
  // Only when present, so that the fingerprints of plans for usable models stay as they were.
  if (r.modelProblem !== undefined) f.str(r.modelProblem.code).num(r.modelProblem.fileBytes).num(r.modelProblem.neededBytes);
  if (r.executableProblem !== undefined) f.str(r.executableProblem.code).str(r.executableProblem.executable).str(r.executableProblem.problem);
  f.str(snapshot.node).str(snapshot.accelerator.key).str(snapshot.accelerator.name).num(snapshot.queueDepth).str(snapshot.pressure);
  const c = snapshot.controls;
  f.bool(c.draining).bool(c.labPaused);
  if (c.allowedCapabilities === null) f.str(null);
  else {
    const allowed = sortInPlace(c.allowedCapabilities.slice(), compareIds);
    f.list(allowed.length);
    for (const name of allowed) f.str(name);
  }
  const d = snapshot.device;
  if (d === null) f.str(null);
  else {
    f.str(d.key).str(d.name).num(d.totalBytes).num(d.observedUsedBytes).str(d.health);
    if (d.processes === null) f.str(null);
    else {
      const processes = sortInPlace(d.processes.slice(), byPid);
      f.list(processes.length);
      for (const p of processes) f.num(p.pid).num(p.usedBytes);
    }
  }
  f.list(acc.residents.length);
  for (const x of acc.residents) f.str(x.id).num(x.pid).str(x.priority).bool(x.pinned).bool(x.busy).num(x.envelopeBytes).num(x.weight);
  f.list(acc.leases.length);
  for (const x of acc.leases) f.str(x.id).num(x.reservedBytes).num(x.materializedBytes);
  f.str(decision.verdict).str(acc.attribution).list(decision.reasons.length);
  for (const x of decision.reasons) {
    f.str(x.code).num(x.requestedBytes).num(x.schedulableBytes).num(x.freeableBytes).num(x.pendingBytes).num(x.capacityBytes).num(x.unmanagedExternalBytes);
    f.num(x.staleAfterUs).num(x.usedAfterEvictionsBytes).str(x.pressure).str(x.pressureAfterEvictions).str(x.capability).str(x.health);
    if (x.fileBytes !== undefined || x.neededBytes !== undefined) f.num(x.fileBytes).num(x.neededBytes);
    if (x.queryFailed !== undefined) f.bool(x.queryFailed);
    if (x.contextSize !== undefined || x.trainContextSize !== undefined) f.num(x.contextSize).num(x.trainContextSize);
  }
  f.list(decision.evictions.length);
  for (const e of decision.evictions) f.str(e.id).num(e.pid).str(e.priority).num(e.freedBytes);
  return f.digest();
}

export function plan(request: PlanRequest, snapshot: PlannerSnapshot, policy: PlannerPolicy): PlacementPlan {
  validateInputs(request, snapshot);
  const acc = account(request, snapshot, policy);
  const decision = withWarnings(request, decide(request, snapshot, policy, acc));
  const b = acc.breakdown;
  const residents: PlacementPlan['residents'] = [];
  for (let i = 0; i < acc.residents.length; i++) {
    const r = acc.residents[i] as ManagedResident;
    residents.push({ id: r.id, pid: r.pid, priority: r.priority, busy: r.busy, pinned: r.pinned, weight: r.weight, usedBytes: acc.usedBytes[i] ?? 0 });
  }
  const device = snapshot.device;
  return {
    verdict: decision.verdict,
    reasons: decision.reasons,
    policy: policy.revision,
    fingerprint: fingerprintPlan(request, snapshot, policy, acc, decision),
    attribution: acc.attribution,
    breakdown: b,
    memory: memoryNeeds({ peakBytes: request.peakBytes, peakSource: request.peakSource, parts: request.peakParts ?? null }, request.contextSize, policy),
    request: { ...request },
    node: snapshot.node,
    accelerator: { key: snapshot.accelerator.key, name: snapshot.accelerator.name },
    device: device === null ? null : { key: device.key, name: device.name, health: device.health },
    eligible: { pressure: snapshot.pressure, pressureAfterEvictions: decision.pressureAfter, sampleAgeUs: acc.sampleAgeUs, staleAfterUs: policy.staleAfterUs },
    queue: { depth: snapshot.queueDepth, maxDepth: policy.queue.maxDepth },
    residents,
    evictions: decision.evictions === NO_EVICTIONS ? [] : decision.evictions,
    headroomBeforeBytes: b.schedulableBytes,
    headroomAfterBytes: schedulableAfter(acc, decision.freedBytes) - b.requirementBytes,
    plannedAtUs: snapshot.nowUs,
  };
}
