/**
 * The planner's vocabulary: what it is asked, what it looks at, and what it answers. Plans are
 * records (data), and rejections are structured reasons with byte figures, not sentences.
 */
import type { DeviceHealth } from '../telemetry/types.js';
import type { MemoryNeeds, PeakParts } from './memory.js';
import type { ModelProblem, ModelProblemCode } from './model-problem.js';
import type { PressureLevel, Priority } from './policy.js';

/**
 * The verdict, and what the caller does next.
 */
export type Verdict =
  /** It fits now: take the lease and load. */
  | 'ADMIT'
  /** It fits once the listed idle engines are stopped: stop them (gracefully), then take the
   *  lease and load. */
  | 'ADMIT_AFTER_EVICTION'
  /** Not now, but possibly soon (leases will materialise, busy engines will finish, telemetry
   *  will come back, pressure will ease): keep the request queued and plan again on the next
   *  change. */
  | 'QUEUE'
  /** It cannot fit on this device (or the device is under critical external pressure): tell the
   *  user what it needs and what is in the way; do not retry without a change. */
  | 'REJECT_CAPACITY'
  /** The device has failed, or the model file cannot be loaded (missing, not GGUF, truncated):
   *  do not place it; fix the device or the file. */
  | 'REJECT_HEALTH'
  /** An operator control forbids it (draining, lab paused, capability not allowed). */
  | 'REJECT_POLICY';

export const VERDICTS: readonly Verdict[] = ['ADMIT', 'ADMIT_AFTER_EVICTION', 'QUEUE', 'REJECT_CAPACITY', 'REJECT_HEALTH', 'REJECT_POLICY'];

export type Attribution =
  /** Per-process figures from the driver account for every managed engine. */
  | 'KNOWN'
  /** No per-process figures: the engines' envelopes stand in for their use. */
  | 'ESTIMATED'
  /** Telemetry stale or missing: nothing is schedulable. */
  | 'UNKNOWN';

export type ReasonCode =
  | 'FITS'
  | 'FITS_AFTER_EVICTION'
  | 'WAIT_FOR_LEASES'
  | 'WAIT_FOR_BUSY_ENGINES'
  | 'TELEMETRY_STALE'
  | 'TELEMETRY_MISSING'
  | 'PRESSURE_DEFERS_BACKGROUND'
  | 'PRESSURE_RELIEVED_BY_EVICTION'
  | 'EXTERNAL_GPU_PRESSURE'
  | 'INSUFFICIENT_CAPACITY'
  | 'EXCEEDS_DEVICE'
  | 'DEVICE_FAILED'
  /** The model file cannot be loaded (REJECT_HEALTH): fix or replace the file. */
  | ModelProblemCode
  /** The engine's executable is missing or cannot be run (REJECT_HEALTH): install it, or pick
   *  another in the profile. */
  | 'ENGINE_EXECUTABLE_MISSING'
  | 'DRAINING'
  | 'LAB_PAUSED'
  | 'CAPABILITY_NOT_ALLOWED'
  /** A warning beside the verdict: the context asked for is above the one the model was trained
   *  for (the model may answer poorly past it); the plan is made as asked. */
  | 'CONTEXT_ABOVE_TRAINED';

/** Reasons that say something beside the verdict without deciding it. */
export const WARNING_CODES: readonly ReasonCode[] = ['CONTEXT_ABOVE_TRAINED'];

/** A reason: a code and the figures behind it (bytes, levels, names), never prose. */
export interface Reason {
  code: ReasonCode;
  requestedBytes?: number;
  schedulableBytes?: number;
  freeableBytes?: number;
  pendingBytes?: number;
  capacityBytes?: number;
  unmanagedExternalBytes?: number;
  /** How old the sample is (clock-derived: in the record, not in the fingerprint). */
  sampleAgeUs?: number;
  /** The policy's limit on a sample's age. */
  staleAfterUs?: number;
  /** TELEMETRY_STALE: the latest query of the device failed (the figures are the last good ones). */
  queryFailed?: boolean;
  /** CONTEXT_ABOVE_TRAINED: the context asked for and the model's trained context, in tokens. */
  contextSize?: number;
  trainContextSize?: number;
  /** The tracked (physical) level. */
  pressure?: PressureLevel;
  /** The level once the plan's evictions (or every permitted eviction, for a rejection) are done. */
  pressureAfterEvictions?: PressureLevel;
  /** Physical use left once those evictions are done. */
  usedAfterEvictionsBytes?: number;
  capability?: string;
  health?: DeviceHealth;
  fileBytes?: number;
  neededBytes?: number;
  /** ENGINE_EXECUTABLE_MISSING: the executable (its path, or the name not found on PATH) and why. */
  executable?: string;
  executableProblem?: ExecutableProblemCode;
}

/** Why an engine's executable cannot be run: not found on PATH, no such file, not a regular file,
 *  or not executable by this user. */
export type ExecutableProblemCode = 'NOT_ON_PATH' | 'MISSING' | 'NOT_A_FILE' | 'NOT_EXECUTABLE';

export interface ExecutableProblem {
  code: 'ENGINE_EXECUTABLE_MISSING';
  executable: string;
  problem: ExecutableProblemCode;
}

export interface PlanRequest {
  /** What the client asked for (`chat`, `code`, …). */
  capability: string;
  /** The profile being planned, by its name (its model id), for the history to say which model
   *  it was; absent for a dry-run of a bare model file (`gpu-share plan`). A label only: not fed
   *  to the fingerprint (the model, its context and the engine are, through the fields below). */
  profileName?: string;
  /** A stable identity of the model (a hash of path, size and mtime): shapes and hashes only. */
  modelKey: string;
  contextSize: number;
  /** The context the model was trained for (its GGUF's context_length); absent or null when not
   *  known (a command engine, an unreadable file). Above it the plan warns (CONTEXT_ABOVE_TRAINED). */
  trainContextSize?: number | null;
  gpuLayers: number;
  engineKind: string;
  priority: Priority;
  /** The envelope's peak: measured on an earlier load, or estimated from the GGUF. */
  peakBytes: number;
  peakSource: 'MEASURED' | 'ESTIMATED';
  /** The estimate's parts of the peak (weights, KV cache, compute buffers); absent when the peak
   *  was measured (an earlier load's), which has none. Not fed to the fingerprint: they split
   *  peakBytes, which is, and come from the model and context, which are. */
  peakParts?: PeakParts;
  /** The weight the engine joins the registry with (its share of the GPU's time). */
  weight: number;
  /** Set when the model file cannot be loaded at all: the plan is REJECT_HEALTH with its code. */
  modelProblem?: ModelProblem;
  /** Set when the engine's executable is missing or cannot be run: REJECT_HEALTH,
   *  ENGINE_EXECUTABLE_MISSING naming it. */
  executableProblem?: ExecutableProblem;
}

export interface DeviceState {
  key: string;
  name: string;
  totalBytes: number;
  observedUsedBytes: number;
  /** Per-process use from the driver; null when it cannot attribute memory to processes. */
  processes: readonly { pid: number; usedBytes: number }[] | null;
  health: DeviceHealth;
  /** When these figures were read (their age is judged against the policy's limit). */
  sampledAtUs: number;
  /** When the latest query of the device failed, if it did: the figures are then the last good
   *  ones, not live, and nothing is schedulable whatever their age (TELEMETRY_STALE). */
  queryFailedAtUs?: number;
}

/** An engine GPU Share started and manages on this device. */
export interface ManagedResident {
  id: string;
  pid: number;
  priority: Priority;
  pinned: boolean;
  /** Serving or loading right now: never evicted. */
  busy: boolean;
  /** When it last finished work (wall µs); longest idle is evicted first. */
  idleSinceUs: number;
  /** Its envelope's peak: stands in for its use when the driver cannot attribute memory. */
  envelopeBytes: number;
  /** Its weight in the registry. */
  weight: number;
}

/** Memory promised to a load in progress. */
export interface Lease {
  id: string;
  reservedBytes: number;
  /** What the loading process already uses (it grows towards reservedBytes). */
  materializedBytes: number;
  expiresAtUs: number;
}

export interface OperatorControls {
  draining: boolean;
  labPaused: boolean;
  /** null: every capability is allowed. */
  allowedCapabilities: readonly string[] | null;
}

/** The device a plan is for, known even when its telemetry is not: the name is null then. */
export interface Accelerator {
  key: string;
  name: string | null;
}

export interface PlannerSnapshot {
  nowUs: number;
  /** The host name of the machine the plan is made on. */
  node: string;
  accelerator: Accelerator;
  /** null: no telemetry for the device at all. A sample however old is given as it is: the
   *  planner judges its age (TELEMETRY_STALE) against the policy. */
  device: DeviceState | null;
  /** Requests waiting in the gateway's line when the plan is made (0 where there is no gateway). */
  queueDepth: number;
  residents: readonly ManagedResident[];
  leases: readonly Lease[];
  pressure: PressureLevel;
  controls: OperatorControls;
}

export interface Breakdown {
  totalBytes: number;
  observedUsedBytes: number;
  managedResidentBytes: number;
  unmanagedExternalBytes: number;
  futureLeaseBytes: number;
  reserveBytes: number;
  schedulableBytes: number;
  requirementBytes: number;
  /** observed − attributed managed: may be negative (a driver that under-reports); diagnosis only. */
  invariantDeltaBytes: number;
  physicalUsedBytes: number;
}

export interface Eviction {
  id: string;
  pid: number;
  priority: Priority;
  freedBytes: number;
  idleForUs: number;
}

export interface PlacementPlan {
  verdict: Verdict;
  reasons: Reason[];
  policy: string;
  fingerprint: string;
  attribution: Attribution;
  breakdown: Breakdown;
  /** What the model needs, part by part (weights, KV cache, compute buffers, margin): its
   *  requirementBytes is breakdown.requirementBytes. */
  memory: MemoryNeeds;
  request: PlanRequest;
  node: string;
  accelerator: Accelerator;
  device: { key: string; name: string; health: DeviceHealth } | null;
  /** Eligible state: what the device could offer at planning time. `pressure` is the tracked
   *  (physical) level, the one the UI and /metrics show; `pressureAfterEvictions` the level the
   *  plan was judged by once its own evictions are done. */
  eligible: { pressure: PressureLevel; pressureAfterEvictions: PressureLevel; sampleAgeUs: number | null; staleAfterUs: number };
  /** The gateway's line when the plan was made, and the policy's limit on it. */
  queue: { depth: number; maxDepth: number };
  residents: { id: string; pid: number; priority: Priority; busy: boolean; pinned: boolean; weight: number; usedBytes: number }[];
  evictions: Eviction[];
  /** Schedulable bytes before, and what would be left after placing the request (after the
   *  evictions, with the schedulable figure worked out again on the use that remains); negative
   *  when it does not fit. */
  headroomBeforeBytes: number;
  headroomAfterBytes: number;
  plannedAtUs: number;
  /** Where the plan's inputs (controls, leases, residents, pressure, policy) came from, for a
   *  dry-run from the command line: the running serve or app for the data folder, or the folder's
   *  files. Absent for plans the core makes itself. Not in the fingerprint. */
  inputs?: PlanInputsSource;
  /** For a plan that did not admit the request here: another device that would, as advice
   *  (elsewhere.ts). Absent when none was looked for; null when no other device would. Not in
   *  the fingerprint: it describes the other devices, not this one. */
  elsewhere?: Elsewhere | null;
}

export type PlanInputsSource =
  /** Asked of the running serve or app for the data folder over its loopback API. */
  | { from: 'serve'; url: string; dataDir: string }
  /** Read from the data folder's files (no serve or app answered): settings, engine files; no
   *  leases or gateway line, and pressure from this one sample. `why`: why no serve was asked. */
  | { from: 'files'; dataDir: string; why: string };

/** Another device that would admit a request this device did not. */
export interface Elsewhere {
  key: string;
  name: string | null;
  /** Its place in discovery order (what `--gpu N` and the header's list count). */
  index: number;
  verdict: 'ADMIT' | 'ADMIT_AFTER_EVICTION';
  headroomAfterBytes: number;
}

/** Bad input (NaN, negative, missing numbers): never a verdict. */
export class PlannerInputError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = 'PlannerInputError';
  }
}
