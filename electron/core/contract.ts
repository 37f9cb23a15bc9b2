/**
 * The one contract between the core and whoever shows it: the Electron preload (over IPC), the
 * browser bridge (over HTTP + server-sent events) and the renderer. Types only, plus the channel
 * and route names and the payload schemas both transports run: nothing here imports Node, Electron
 * or the DOM (valibot is plain functions), so every side compiles against the same file.
 */
import * as v from 'valibot';
import { MAX_WEIGHT, MIN_WEIGHT } from './registry/codec.js';
import { GPU_KEY_MAX, GPU_KEY_PATTERN } from './registry/abi.js';
import { describeValue, examine, got, isRecord, pathText, strictRecord, TRUE_OR_FALSE, wholeNumber } from './schema.js';
import type { EngineKind, Priority } from './engines/profiles.js';
import type { Profile, ProfileInput, ProfilePatch } from './engines/profiles.js';
import type { EngineState } from './engines/supervisor.js';
import type { PlacementPlan, PlannerSnapshot, Verdict } from './planner/types.js';
import type { MemoryNeeds } from './planner/memory.js';
import type { PlannerPolicy, PressureLevel } from './planner/policy.js';
import type { DeviceHealth, TelemetrySource } from './telemetry/types.js';
import type { ExecutableKind } from './engines/executables.js';
import type { ModelSource } from './models/local-models.js';

export type { EngineKind, EngineState, ExecutableKind, ModelSource, MemoryNeeds, PlacementPlan, PressureLevel, Priority, Profile, ProfileInput, ProfilePatch, Verdict };

export const CONTRACT_VERSION = 1;

/** Who a model id belongs to (`/v1/models`' `owned_by`): a profile (its name: one model) or a
 *  capability (the profiles that serve it, loaded on demand). */
export type ModelOwner = 'profile' | 'capability';

/**
 * The model ids the gateway takes, in the order `/v1/models` lists them: every profile by its name
 * (unique, letter case aside), then every capability that no profile's name or id (exactly as
 * written) shadows: a request naming a profile's name or id reaches that profile before any
 * capability (the gateway's resolveModel). Pure: the dashboard's "Use it" and the gateway share it.
 */
export function modelIdsOf(profiles: readonly Pick<Profile, 'id' | 'name' | 'capabilities'>[]): { id: string; owner: ModelOwner }[] {
  const shadowing = new Set(profiles.flatMap((p) => [p.name, p.id]));
  const capabilities = [...new Set(profiles.flatMap((p) => p.capabilities))].filter((c) => !shadowing.has(c));
  return [...profiles.map((p) => ({ id: p.name, owner: 'profile' as const })), ...capabilities.map((c) => ({ id: c, owner: 'capability' as const }))];
}

/** One registry peer as the dashboard shows it (managed by us or not). */
export interface PeerRow {
  slot: number;
  pid: number;
  name: string;
  weight: number;
  /** Resolved share of the device, 0–100 (0 when idle). */
  sharePct: number;
  busyPct: number;
  active: boolean;
  heartbeatAgeMs: number;
  /** The engine GPU Share started that holds this slot; null for a foreign peer. */
  engineId: string | null;
  /** The engine's kind, or 'peer' for a process GPU Share did not start. */
  kind: EngineKind | 'peer';
}

/** One window of the TDM schedule, in µs from the start of the period. */
export interface ScheduleWindowView {
  slot: number;
  startUs: number;
  lengthUs: number;
  /** The peer's plain share w/Σw (its window's length follows its window share, floored at 10 %). */
  share: number;
  /** `period − window length`: the longest this peer waits for its window. */
  stallBoundUs: number;
}

export interface ScheduleView {
  periodUs: number;
  windows: ScheduleWindowView[];
}

/** The device memory split the GPU view stacks; every figure in bytes. */
export interface VramView {
  totalBytes: number;
  /** Per managed engine (engine id → bytes, measured or its envelope). */
  engines: { engineId: string; name: string; slot: number | null; bytes: number }[];
  unmanagedExternalBytes: number;
  leaseBytes: number;
  reserveBytes: number;
  freeBytes: number;
  /** Whether the per-engine figures are the driver's (KNOWN) or the envelopes (ESTIMATED). */
  attribution: 'KNOWN' | 'ESTIMATED' | 'UNKNOWN';
}

/** One telemetry sample of a device, for its sparklines; null where the provider cannot say
 *  (no such sensor, or the device could not be read then). */
export interface DeviceHistoryPoint {
  /** Wall µs of the sample. */
  atUs: number;
  utilizationPct: number | null;
  temperatureC: number | null;
  powerW: number | null;
  usedBytes: number | null;
}

/** One reading of an engine's token rate (null: no figure for that interval). */
export interface RatePoint {
  atUs: number;
  value: number | null;
}

export interface DeviceView {
  key: string;
  name: string;
  source: TelemetrySource | null;
  health: DeviceHealth;
  pressure: PressureLevel;
  /** null when telemetry is missing or stale (then the reason says why). */
  vram: VramView | null;
  telemetryProblem: string | null;
  /** The last samples (about 30 s, one every 0.5 s), oldest first. */
  history: DeviceHistoryPoint[];
  peers: PeerRow[];
  /** null when fewer than one peer is active. */
  schedule: ScheduleView | null;
}

export interface EngineView {
  id: string;
  profileId: string;
  name: string;
  kind: EngineKind;
  priority: Priority;
  pinned: boolean;
  pid: number;
  state: EngineState;
  progressPct: number;
  port: number | null;
  exitCode: number | null;
  exitSignal: string | null;
  /** Wall µs when it exited (crashed or stopped); null while it runs. */
  exitedAtUs: number | null;
  /** Tokens decoded per second over the last ~2 s, from the engine's own /metrics; null when it
   *  has none (a plain command) or has not been read twice yet. */
  tokensPerSecond: number | null;
  /** Mean time from a request's arrival to its first token over the requests of the last reading
   *  (the latest ones' while none arrives), from the built-in engine's /metrics; null for engines
   *  whose /metrics do not report it (llama-server counts prompt time, not requests). */
  timeToFirstTokenMs: number | null;
  /** The last token rates read (one every 2 s, about 2 min), oldest first; empty unless running. */
  tokensHistory: RatePoint[];
  weight: number;
  gpuKey: string;
  slot: number | null;
  residentBytes: number | null;
  startedAtUs: number;
  busy: boolean;
  /** The last few log lines, newest last. */
  logTail: string[];
}

/** A profile whose last load failed (its model file is unusable, or its engine exited while
 *  loading): the gateway skips it until it is edited or launched again from the dashboard. */
export interface ProfileFailure {
  profileId: string;
  reason: string;
  /** Wall-clock µs of the failure. */
  atUs: number;
}

/** A profile's default launch device. `preferred`: the profile's own device, present now: it wins
 *  over the device selected in the dashboard's header. `only` / `most-free`: the device the core
 *  would choose; a device selected in the header comes first. */
export interface LaunchDefault {
  profileId: string;
  gpuKey: string;
  why: 'preferred' | 'only' | 'most-free';
}

export interface PolicyView {
  labPaused: boolean;
  draining: boolean;
  /** Default idle-unload minutes for profiles that do not set one; null = never. */
  idleUnloadMinutes: number | null;
  /** The planner policy's revision in force (with an operator's queue override when serve has one). */
  revision: string;
  /** The revisions this build knows: `PUT /api/policy {"revision": …}` switches among them. */
  revisions: string[];
  /** Every number of the revision in force: reserve, margins, thresholds, hold, staleness, lease
   *  TTL, queue limits, history size. */
  rules: Omit<PlannerPolicy, 'revision'>;
}

/** `GET /api/plan-inputs[?gpuKey=K]` (serve and the app; not over IPC): everything the planner
 *  reads for a device now, so that `gpu-share plan` plans with the same inputs as `/api/plan`. */
export interface PlanInputs {
  /** The data folder of the serve or app that answered. */
  dataDir: string;
  /** The policy revision in force (a name `policyByRevision` resolves). */
  policy: string;
  /** Every device, in discovery order (what `--gpu N` counts). */
  devices: { key: string; name: string | null }[];
  /** The planner's snapshot of the device asked for (the first by default). */
  snapshot: PlannerSnapshot;
}
export const PLAN_INPUTS_PATH = '/api/plan-inputs';

export interface AppState {
  contractVersion: typeof CONTRACT_VERSION;
  /** Wall-clock µs when the state was taken (registry time, the same clock as the schedule). */
  wallUs: number;
  devices: DeviceView[];
  engines: EngineView[];
  profiles: Profile[];
  /** Where Launch would put each profile (by the core's rule, device-pinning.ts), so that the
   *  dashboard needs no rule of its own: see LaunchDefault. */
  launchDefaults: LaunchDefault[];
  /** Profiles whose last load failed, with why. */
  profileFailures: ProfileFailure[];
  /** Data files found unusable at start and set aside (settings, profiles): what and where kept. */
  dataProblems: string[];
  policy: PolicyView;
  /** Newest first. */
  plans: PlacementPlan[];
  gateway: { queueDepth: number; queueLimit: number };
  /** The loopback API; the token goes only to those who hold it already (the HTTP state needs it)
   *  or to the app's own window (IPC), whose Settings shows it. */
  api: { port: number | null; dataDir: string; token: string };
}

/** What the core pushes, in order; `state` arrives a few times a second and on every change. */
export type AppEvent =
  | { type: 'state'; state: AppState }
  | { type: 'engine'; engine: EngineView }
  | { type: 'progress'; engineId: string; pct: number }
  | { type: 'log'; engineId: string; stream: 'stdout' | 'stderr'; line: string }
  | { type: 'plan'; plan: PlacementPlan }
  | { type: 'aged-out'; gpuKey: string; slot: number; name: string; pid: number }
  /** A managed engine's window overshoots since its last report (µs past its window's end). */
  | { type: 'pacer'; engineId: string; overshootsUs: number[] };

export type AppEventType = AppEvent['type'];
export const APP_EVENT_TYPES: readonly AppEventType[] = ['state', 'engine', 'progress', 'log', 'plan', 'aged-out', 'pacer'];

export interface LaunchOutcome {
  plan: PlacementPlan;
  /** The engine, loading, when the plan admitted it; null otherwise. */
  engine: EngineView | null;
}

/** The context a new profile, `plan` and `launch --model` use unless told otherwise: the model's
 *  trained context, capped (a 128k-token context would ask for tens of GiB of KV cache). */
export const DEFAULT_CONTEXT_CAP = 8192;
export function defaultContextSize(trainContextSize: number | null): number {
  return trainContextSize === null || trainContextSize <= 0 ? DEFAULT_CONTEXT_CAP : Math.min(trainContextSize, DEFAULT_CONTEXT_CAP);
}

export interface ModelEstimateView {
  modelPath: string;
  fileBytes: number;
  /** The context the figures are for (the request's, or the model's default). */
  contextSize: number;
  kvCacheType: KvCacheType;
  /** The model's trained context (null when the file does not say) and the default it gives. */
  trainContextSize: number | null;
  defaultContextSize: number;
  /** Weights, and the KV cache and compute buffers at `contextSize`; peak = their sum (or the
   *  measured peak of an earlier load, then modelBytes and contextBytes are null). */
  modelBytes: number | null;
  contextBytes: number | null;
  peakBytes: number;
  peakSource: 'MEASURED' | 'ESTIMATED';
  /** The same figures as the planner counts them: weights, KV cache at `contextSize`, compute
   *  buffers, margin and the requirement (a plan's `memory` for the same model and context). */
  memory: MemoryNeeds;
}

/** An engine executable on this machine: found on PATH or in a usual install place, or added by
 *  the local user (`gpu-share executables --add`). Over HTTP a profile may name only these. */
export interface ExecutableView {
  path: string;
  /** What its name says it is; null for an added one with another name. */
  kind: ExecutableKind | null;
  source: 'PATH' | 'usual place' | 'added';
  /** The line of `--version` that names its version; null when it printed none (or did not
   *  answer within a few seconds). */
  version: string | null;
}

/** Whether a model on this machine fits its device now: the planner's verdict for it at its
 *  default context on the device a launch would pick. */
export interface LocalModelFit {
  verdict: Verdict;
  gpuKey: string;
  contextSize: number;
  requirementBytes: number;
  /** The plan's first reason, in words. */
  reason: string;
}

/** A GGUF file another tool keeps on this machine (Ollama, LM Studio, the Hugging Face cache,
 *  llama.cpp's cache, ~/models, a folder the user added). */
export interface LocalModelView {
  /** The name its tool gives it (Ollama's `llama3.2:3b`, `org/repo/file` for Hugging Face). */
  name: string;
  source: ModelSource;
  path: string;
  sizeBytes: number;
  /** From its GGUF header: llama.cpp's name of its file type (`Q4_K_M`), its trained context and
   *  architecture; null when the header does not say (or has not been read yet). */
  quantization: string | null;
  trainContextSize: number | null;
  architecture: string | null;
  /** false until its header has been read (a long list is read over a few calls: ask again). */
  read: boolean;
  /** Why it cannot be used (its header is not a usable model's); null when it can. */
  problem: string | null;
  /** null until it has been estimated (or when it cannot be used). */
  fit: LocalModelFit | null;
  /** Why its fit is not known: its estimate failed for a reason outside the file, a few times
   *  (it is tried again in a minute); null otherwise. */
  fitProblem: string | null;
}

export interface LocalModelPlace {
  dir: string;
  source: ModelSource;
  /** Whether the folder exists (a missing one means that tool keeps nothing here). */
  found: boolean;
  models: number;
  problem: string | null;
}

export interface LocalModelList {
  models: LocalModelView[];
  places: LocalModelPlace[];
  /** The walk stopped at its limits (depth, entries, files): some files are not listed. */
  truncated: boolean;
  /** Models whose header or fit is not known yet: ask again for them. */
  pending: number;
  /** How long this answer took. */
  elapsedMs: number;
}

/**
 * Error codes, and what the caller does next.
 */
export type ApiErrorCode =
  /** A field is missing or wrong: fix the named field and send again. */
  | 'BAD_REQUEST'
  /** No token or a wrong one: get the token from the dashboard URL or the settings. */
  | 'UNAUTHORIZED'
  /** Refused before any handler ran (wrong Host, not loopback), or something only the local user
   *  may do (a command profile, an executable not found on this machine, loader environment over
   *  HTTP): do not retry; do it on this machine (the message says how). */
  | 'FORBIDDEN'
  /** No such engine, profile or route. */
  | 'NOT_FOUND'
  /** The request conflicts with the current state (a profile id taken, an engine not running). */
  | 'CONFLICT'
  /** Body over the limit: send less. */
  | 'TOO_LARGE'
  /** The gateway's queue is full: retry after the Retry-After header. */
  | 'QUEUE_FULL'
  /** The planner did not admit the model: the error carries the plan's verdict and reasons. */
  | 'NOT_ADMITTED'
  /** The engine stopped while serving the request (stopped or killed by the user, or crashed):
   *  send the request again; the gateway loads an engine anew if needed. */
  | 'ENGINE_GONE'
  /** A bug or an unexpected failure on our side: report it. */
  | 'INTERNAL';

export interface ApiErrorBody {
  error: { code: ApiErrorCode; message: string; field?: string; verdict?: Verdict; reasons?: string[] };
}

/** Thrown by both bridges (and the core) with a code the caller acts on. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    readonly details: Omit<ApiErrorBody['error'], 'code' | 'message'> = {},
  ) {
    super(message);
  }

  toBody(): ApiErrorBody {
    return { error: { code: this.code, message: this.message, ...this.details } };
  }
}

export const API_ERROR_CODES: readonly ApiErrorCode[] = ['BAD_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'NOT_FOUND', 'CONFLICT', 'TOO_LARGE', 'QUEUE_FULL', 'NOT_ADMITTED', 'ENGINE_GONE', 'INTERNAL'];

/**
 * An ApiError back from whatever carried it: an ApiError itself, an `{error:{code,message,…}}`
 * body (HTTP), or the flat `{name:'ApiError',code,message,…}` object the Electron preload rejects
 * with (contextBridge keeps only the message of an Error, so the preload rejects with plain data).
 * null when the value is none of these.
 */
export function apiErrorFrom(value: unknown): ApiError | null {
  if (value instanceof ApiError) return value;
  if (!isRecord(value)) return null;
  const inner = isRecord(value['error']) ? value['error'] : value['name'] === 'ApiError' ? value : null;
  if (inner === null) return null;
  const code = inner['code'];
  const message = inner['message'];
  if (typeof code !== 'string' || !(API_ERROR_CODES as readonly string[]).includes(code) || typeof message !== 'string') return null;
  const details: Omit<ApiErrorBody['error'], 'code' | 'message'> = {};
  if (typeof inner['field'] === 'string') details.field = inner['field'];
  const verdict = inner['verdict'];
  if (typeof verdict === 'string' && (VERDICT_NAMES as readonly string[]).includes(verdict)) details.verdict = verdict as Verdict;
  const reasons = inner['reasons'];
  if (Array.isArray(reasons) && reasons.every((reason) => typeof reason === 'string')) details.reasons = reasons;
  return new ApiError(code as ApiErrorCode, message, details);
}

const VERDICT_NAMES: readonly Verdict[] = ['ADMIT', 'ADMIT_AFTER_EVICTION', 'QUEUE', 'REJECT_CAPACITY', 'REJECT_HEALTH', 'REJECT_POLICY'];

/** Everything a dashboard can do; implemented by the core, the IPC bridge and the HTTP bridge. */
export interface GpuShareApi {
  getState(): Promise<AppState>;
  /** Events as they happen; returns the unsubscribe. */
  subscribe(listener: (event: AppEvent) => void): () => void;
  /** Dry-run plan for a profile (nothing starts). */
  plan(request: LaunchRequest): Promise<PlacementPlan>;
  /** Plan and start; resolves once the engine is spawned (loading) or the plan refused it. */
  launch(request: LaunchRequest): Promise<LaunchOutcome>;
  stopEngine(engineId: string): Promise<EngineView>;
  killEngine(engineId: string): Promise<EngineView>;
  /** A managed engine's weight (0.01–100); reaches the registry within one heartbeat and is kept
   *  in its profile. */
  setWeight(engineId: string, weight: number): Promise<EngineView>;
  listProfiles(): Promise<Profile[]>;
  createProfile(input: ProfileInput): Promise<Profile>;
  updateProfile(id: string, patch: ProfilePatch): Promise<Profile>;
  deleteProfile(id: string): Promise<void>;
  /** The planner's figure for a model file at a context size, for the add-model form. */
  estimateModel(modelPath: string, options?: EstimateOptions): Promise<ModelEstimateView>;
  setPolicy(patch: PolicyPatch): Promise<PolicyView>;
  listPlans(): Promise<PlacementPlan[]>;
  /** The engine executables on this machine, with their versions. */
  listExecutables(): Promise<ExecutableView[]>;
  /** The GGUF files other tools keep on this machine, with what their headers say and whether
   *  each fits now. */
  listLocalModels(): Promise<LocalModelList>;
}

export type ApiMethod = Exclude<keyof GpuShareApi, 'subscribe'>;

/** IPC: one invoke channel per method, one push channel for events. */
export const IPC_INVOKE_PREFIX = 'gpu-share:';
export const IPC_EVENT_CHANNEL = 'gpu-share:event';
export const API_METHODS: readonly ApiMethod[] = [
  'getState',
  'plan',
  'launch',
  'stopEngine',
  'killEngine',
  'setWeight',
  'listProfiles',
  'createProfile',
  'updateProfile',
  'deleteProfile',
  'estimateModel',
  'setPolicy',
  'listPlans',
  'listExecutables',
  'listLocalModels',
];
export const ipcChannel = (method: ApiMethod): string => `${IPC_INVOKE_PREFIX}${method}`;

/** HTTP: how each method maps onto the loopback API (paths under the server's origin). */
export interface HttpRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path; `:id` stands for the engine's or profile's id. */
  path: string;
}
export const HTTP_ROUTES: Readonly<Record<ApiMethod, HttpRoute>> = {
  getState: { method: 'GET', path: '/api/state' },
  plan: { method: 'POST', path: '/api/plan' },
  launch: { method: 'POST', path: '/api/engines' },
  stopEngine: { method: 'POST', path: '/api/engines/:id/stop' },
  killEngine: { method: 'POST', path: '/api/engines/:id/kill' },
  setWeight: { method: 'PUT', path: '/api/engines/:id/weight' },
  listProfiles: { method: 'GET', path: '/api/profiles' },
  createProfile: { method: 'POST', path: '/api/profiles' },
  updateProfile: { method: 'PUT', path: '/api/profiles/:id' },
  deleteProfile: { method: 'DELETE', path: '/api/profiles/:id' },
  estimateModel: { method: 'POST', path: '/api/estimate' },
  setPolicy: { method: 'PUT', path: '/api/policy' },
  listPlans: { method: 'GET', path: '/api/plans' },
  listExecutables: { method: 'GET', path: '/api/executables' },
  listLocalModels: { method: 'GET', path: '/api/local-models' },
};
export const HTTP_EVENTS_PATH = '/api/events';

/**
 * The dashboard's content security policy, for the app's window and for `serve`: nothing from
 * elsewhere, no inline script, nothing evaluated, framed or posted. Inline style is allowed (the
 * components set style attributes: a peer's colour, a bar's width), images may be data: URLs.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-src 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The default port: not llama-server's 8080, Ollama's 11434, LM Studio's 1234, vLLM's 8000,
 *  text-generation-webui's 5000/7860, nor Jan's 1337. */
export const DEFAULT_API_PORT = 7787;

// ---------------------------------------------------------------------------------------------
// Argument and body schemas, run by the core for every transport (IPC arguments are untrusted as
// well). What needs the world (a model file, a profile's existence) is checked in code after them.

/** The weights the API takes: the registry's range. */
export const WEIGHT_MIN = MIN_WEIGHT;
export const WEIGHT_MAX = MAX_WEIGHT;
/** The weights people pick: marked on the dashboard's slider, offered by the tray. */
export const WEIGHT_PRESETS: readonly number[] = [0.25, 0.5, 1, 2, 4];

export function badField(field: string, message: string): ApiError {
  return new ApiError('BAD_REQUEST', `${field}: ${message}`, { field });
}

/** The value `schema` makes of an argument or body; else BAD_REQUEST naming the offending path
 *  (`root` when the value itself is wrong: `body`, `id`, `options`). */
export function parseInput<TSchema extends v.GenericSchema>(schema: TSchema, value: unknown, root = 'body'): v.InferOutput<TSchema> {
  const checked = examine(schema, value);
  if (checked.ok) return checked.value;
  throw badField(checked.problem.keys.length === 0 ? root : pathText('', checked.problem.keys), checked.problem.message);
}

const unknownField = (known: string) => (): string => `unknown field (${known})`;

const text = (maxLength: number) =>
  v.pipe(v.string(got('must be a non-empty string')), v.minLength(1, got('must be a non-empty string')), v.maxLength(maxLength, `must be at most ${maxLength} characters`));

export const PROFILE_ID = text(40);
export const ENGINE_ID = v.pipe(text(80), v.regex(/^[a-z0-9-]+$/, (issue) => `not an engine id: ${describeValue(issue.input)}`));
export const MODEL_PATH = text(4096);
/** A device's registry key (GPU-…, cpu-0, …). */
export const GPU_KEY = v.pipe(text(GPU_KEY_MAX), v.regex(GPU_KEY_PATTERN, got('must be a registry key (A-Z, a-z, 0-9, ".", "_" and "-")')));
export const WEIGHT = v.pipe(
  v.number(got(`must be a number from ${WEIGHT_MIN} to ${WEIGHT_MAX}`)),
  v.finite(got(`must be a number from ${WEIGHT_MIN} to ${WEIGHT_MAX}`)),
  v.minValue(WEIGHT_MIN, got(`must be a number from ${WEIGHT_MIN} to ${WEIGHT_MAX}`)),
  v.maxValue(WEIGHT_MAX, got(`must be a number from ${WEIGHT_MIN} to ${WEIGHT_MAX}`)),
);
export const ENABLED = TRUE_OR_FALSE;
/** A profile body before the core checks it in depth (against the profile schema). */
export const OBJECT_BODY = v.custom<Record<string, unknown>>(isRecord, got('must be an object'));

/** `POST /api/plan`, `POST /api/engines`. Unknown fields are refused (a misspelt one would be
 *  ignored otherwise), here as in every body. */
export const LAUNCH_REQUEST = strictRecord(
  {
    profileId: PROFILE_ID,
    /** The device to plan and launch on (a key of /api/state's devices); absent: the profile's
     *  preferred device while present, else the one with the most free memory. */
    gpuKey: v.optional(GPU_KEY),
  },
  'an object',
  unknownField('profileId, gpuKey'),
);
export type LaunchRequest = v.InferOutput<typeof LAUNCH_REQUEST>;

/** `PUT /api/engines/:id/weight`. */
export const WEIGHT_REQUEST = strictRecord({ weight: WEIGHT }, 'an object', unknownField('weight'));

/** The KV cache element types llama.cpp takes (--cache-type-k/-v); f16 is its default. */
export type KvCacheType = 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q4_0' | 'q4_1' | 'iq4_nl' | 'q5_0' | 'q5_1';
/** Each KV cache type's ggml type number (ggml.h), for the estimator. */
export const KV_CACHE_GGML_TYPE: Readonly<Record<KvCacheType, number>> = { f32: 0, f16: 1, q4_0: 2, q4_1: 3, q5_0: 6, q5_1: 7, q8_0: 8, iq4_nl: 20, bf16: 30 };
export const KV_CACHE_TYPES = Object.keys(KV_CACHE_GGML_TYPE) as KvCacheType[];

const ESTIMATE_OPTION_FIELDS = {
  /** Tokens; the model's default context (defaultContextSize) when absent. */
  contextSize: v.nullish(wholeNumber(1, 10_000_000, 'a whole number of tokens from 1 to 10000000')),
  kvCacheType: v.nullish(v.picklist(KV_CACHE_TYPES, got(`must be one of ${KV_CACHE_TYPES.join(', ')}`))),
};
/** The estimate's options (IPC's second argument). */
export const ESTIMATE_OPTIONS = strictRecord(ESTIMATE_OPTION_FIELDS, 'an object', unknownField('contextSize, kvCacheType'));
export type EstimateOptions = v.InferOutput<typeof ESTIMATE_OPTIONS>;
/** `POST /api/estimate`: the model file and the options beside it. */
export const ESTIMATE_REQUEST = strictRecord({ modelPath: MODEL_PATH, ...ESTIMATE_OPTION_FIELDS }, 'an object', unknownField('modelPath, contextSize, kvCacheType'));

/** The default idle-unload minutes (the policy's, kept in the settings); null = never. */
export const IDLE_UNLOAD_MINUTES = v.nullable(wholeNumber(0, 100_000, 'a whole number of minutes (0–100000) or null'));

/** `PUT /api/policy`: the fields to change. */
export const POLICY_PATCH = strictRecord(
  {
    labPaused: v.optional(TRUE_OR_FALSE),
    draining: v.optional(TRUE_OR_FALSE),
    idleUnloadMinutes: v.optional(IDLE_UNLOAD_MINUTES),
    /** A policy revision this build knows (PolicyView.revisions); the core refuses others. */
    revision: v.optional(text(80)),
  },
  'an object',
  unknownField('labPaused, draining, idleUnloadMinutes, revision'),
);
export type PolicyPatch = v.InferOutput<typeof POLICY_PATCH>;

// ---------------------------------------------------------------------------------------------
// What only the desktop shell can do (absent in a browser): exposed by the preload beside the API.

export interface ShellExtras {
  /** The OS file picker, filtered to .gguf; null when cancelled. */
  pickModelFile(): Promise<string | null>;
  openDataFolder(): Promise<void>;
  getLaunchAtLogin(): Promise<boolean>;
  setLaunchAtLogin(enabled: boolean): Promise<boolean>;
}
export type ShellMethod = keyof ShellExtras;
export const SHELL_METHODS: readonly ShellMethod[] = ['pickModelFile', 'openDataFolder', 'getLaunchAtLogin', 'setLaunchAtLogin'];
export const shellChannel = (method: ShellMethod): string => `gpu-share-shell:${method}`;

/** The globals the preload defines in the renderer (contextBridge.exposeInMainWorld). */
export const PRELOAD_API_GLOBAL = 'gpuShare';
export const PRELOAD_SHELL_GLOBAL = 'gpuShareShell';
