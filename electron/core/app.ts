/**
 * The composition root: builds the core (telemetry, registry observer, planner, supervisor,
 * profiles, settings) and offers it as the GpuShareApi. The Electron main process and
 * `gpu-share serve` both call `startCore`; the loopback API and the IPC bridge are thin layers over
 * the object it returns.
 */
import { hostname } from 'node:os';
import { join } from 'node:path';
import { systemClock, type Clock } from './clock.js';
import {
  ApiError,
  badField,
  CONTRACT_VERSION,
  defaultContextSize,
  MODEL_PATH,
  parseInput,
  type EstimateOptions,
  type ExecutableView,
  type LocalModelFit,
  type LocalModelList,
  type ProfileFailure,
  type AppEvent,
  type AppState,
  type DeviceHistoryPoint,
  type DeviceView,
  type LaunchDefault,
  type EngineView,
  type RatePoint,
  type LaunchOutcome,
  type LaunchRequest,
  type ModelEstimateView,
  type PeerRow,
  type PlanInputs,
  type PolicyPatch,
  type PolicyView,
  type Profile,
  type ProfileInput,
  type ProfilePatch,
  type VramView,
} from './contract.js';
import type { Core, CoreOptions, GatewayView } from './app-types.js';
import type { Settings } from './settings.js';
import { launchSpecFor } from './engines/launch-spec.js';
import { chooseLaunchDevice, pinningFor } from './engines/device-pinning.js';
import { lookUpVulkanDevice } from './engines/vulkan-lookup.js';
import { checkProfileEnv, DEFAULT_GPU_LAYERS, DEFAULT_WEIGHT_BY_PRIORITY, ProfileError, ProfileNameTakenError, ProfileNotFoundError, ProfileStore, type Profile as StoredProfile } from './engines/profiles.js';
import { ExecutableCatalog, executableView } from './engines/executables.js';
import { LocalAdditionsStore } from './engines/local-additions.js';
import { localOnlyHowTo, remoteProfileProblem } from './engines/remote-profile.js';
import { machineModelPlaces, namesModelFile, type FoundModel } from './models/local-models.js';
import { ModelCatalog, type CatalogPeak } from './models/model-catalog.js';
import { describeExecutableProblem, explainReason } from './planner/describe.js';
import { describeModelProblem, inspectModelFile } from './planner/model-file.js';
import { describeModelCheck } from './planner/model-problem.js';
import { spawnEngineProcess } from './engines/spawn.js';
import { removeEngineFile, residentFacts, writeEngineFile } from './engines/engine-files.js';
import { CrashLoopError, Supervisor, SupervisorError, type EngineStatus, type LaunchSpec, type SupervisorEvent } from './engines/supervisor.js';
import { describeCrashHold } from './engines/crash-loop.js';
import { buildSchedule, stallBoundUs } from './pacer/schedule.js';
import { engineFigures, parseEngineCounters, type CounterReading, type EngineFigures } from './engines/engine-figures.js';
import { RingBuffer } from './telemetry/ring.js';
import { EnvelopeStore } from './planner/envelopes.js';
import { childEstimator, modelPeak } from './planner/estimate.js';
import { memoryNeeds } from './planner/memory.js';
import { PlanHistory } from './planner/history.js';
import { LeaseBook } from './planner/leases.js';
import { DEFAULT_POLICY, dynamicReserveBytes, KNOWN_REVISIONS_TEXT, POLICY_REVISIONS, revisionNamed, switchRevision, type PlannerPolicy } from './planner/policy.js';
import { PressureTracker } from './planner/pressure.js';
import { snapshotFromSample, usedFraction } from './planner/snapshot.js';
import type { OperatorControls, PlacementPlan } from './planner/types.js';
import { SegmentCache } from './registry/segment-cache.js';
import { RegistrySegment, registryAccess, shareRegistries } from './registry/segment.js';
import { buildPeersView, type AlivePeer, type GpuPeersView } from './registry/view.js';
import { discoverTelemetry } from './telemetry/discovery.js';
import { engineTreesOf } from './telemetry/engine-trees.js';
import { TelemetrySampler } from './telemetry/sampler.js';
import type { DeviceSample, TelemetryProvider } from './telemetry/types.js';

/** State pushes per second to subscribers (the timeline draws from them). */
const STATE_INTERVAL_MS = 250;
/** Supervisor upkeep: busy/idle from the registry, idle unload. */
const TICK_INTERVAL_MS = 2_000;
const LOG_TAIL = 20;
/** How often the engines' own /metrics are read for their decode rate. */
const RATE_INTERVAL_MS = 2_000;
/** How many points the sparklines' histories keep: 30 s of device samples, 2 min of token rates. */
const HISTORY_POINTS = 60;
/** A peer last seen older than this that disappears aged out (rather than leaving cleanly). */
const AGED_OUT_AFTER_MS = 2_000;
/** How long one "On this machine" listing may spend reading headers (estimates run after it). */
const LOCAL_MODELS_BUDGET_MS = 800;

export async function startCore(options: CoreOptions): Promise<Core> {
  const clock = systemClock(() => options.helper.wallUs());
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const { provider, reason } = discoverTelemetry({ simFile: options.simFile, wallUs: () => clock.wallUs() });
  log(`telemetry: ${reason}`);
  if (options.settings.get().sharedRegistry) shareRegistries();
  if (registryAccess().shared) log('registry: shared registries: other users\' segments are accepted and ours are created for every local user (this trusts every local user)');
  const core = new GpuShareCore(options, clock, provider, log);
  core.start();
  return core;
}

/** A profile's model file, when it names one: a regular, readable GGUF file whose tensor data
 *  fits in it; else a 400 naming modelPath and why. */
async function checkModelFile(modelPath: string | null): Promise<void> {
  if (modelPath === null) return; // a command engine without a model file
  const check = await inspectModelFile(modelPath);
  if (!check.ok) throw badField('modelPath', `${modelPath}: ${describeModelCheck(check.problem, check.detail)}`);
}

/** Core errors → the contract's codes (what the caller does next). */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof ProfileNotFoundError) return new ApiError('NOT_FOUND', error.message);
  if (error instanceof ProfileNameTakenError) return new ApiError('CONFLICT', error.message, { field: 'name' });
  if (error instanceof ProfileError) return new ApiError('BAD_REQUEST', error.message, error.field === null ? {} : { field: error.field });
  if (error instanceof CrashLoopError) return new ApiError('NOT_ADMITTED', error.message, { reasons: [error.hold.kind === 'failed' ? 'ENGINE_FAILED' : 'ENGINE_BACKOFF'] });
  if (error instanceof SupervisorError) return new ApiError(error.message.startsWith('no engine') ? 'NOT_FOUND' : 'CONFLICT', error.message);
  if (error instanceof Error && (error.name === 'EstimateError' || error.name === 'PlannerInputError')) return new ApiError('BAD_REQUEST', error.message);
  if (error instanceof Error && error.name === 'ModelFileError') return new ApiError('BAD_REQUEST', `modelPath: ${error.message}`, { field: 'modelPath' });
  return new ApiError('INTERNAL', error instanceof Error ? error.message : String(error));
}

class GpuShareCore implements Core {
  readonly settings: CoreOptions['settings'];
  readonly dataDir: string;
  /** The policy in force: the one the core was started with, or the revision an operator chose. */
  private currentPolicy: PlannerPolicy;
  private readonly sampler: TelemetrySampler;
  private readonly pressure = new Map<string, PressureTracker>();
  private readonly segments: SegmentCache;
  /** Writable handles, only to free the slots of engines of ours that exited. */
  private readonly writers = new Map<string, RegistrySegment>();
  /** Engine id → its last token counter reading and the decode rate measured from it. */
  private readonly engineFigures = new Map<string, { reading: CounterReading | null; figures: EngineFigures | null; history: RingBuffer<RatePoint> }>();
  /** Each device's last HISTORY_POINTS samples, for the GPU view's sparklines. */
  private readonly deviceHistory = new Map<string, RingBuffer<DeviceHistoryPoint>>();
  private readonly profiles: ProfileStore;
  private readonly envelopes: EnvelopeStore;
  private readonly leases = new LeaseBook();
  private readonly history: PlanHistory;
  private readonly supervisor: Supervisor;
  private readonly listeners = new Set<(event: AppEvent) => void>();
  /** The device when telemetry has found none yet (the first found, else cpu-0). */
  private readonly gpuKey: string;
  /** Last alive peers per device, to tell who aged out. */
  private lastPeers = new Map<string, Map<number, { name: string; pid: number; ageMs: number }>>();
  private timers: NodeJS.Timeout[] = [];
  private apiPort: number | null = null;
  private gateway: GatewayView = { depth: 0, limit: 0, serving: () => false };
  private closed = false;
  /** Profiles whose last load failed (the gateway skips them), and the engines that got running. */
  private readonly failures = new Map<string, ProfileFailure>();
  private readonly ranOnce = new Set<string>();
  /** node-llama-cpp's GGUF parser runs in a child with a heap limit and a deadline. */
  private readonly estimator: ReturnType<typeof childEstimator>;
  /** What the local user added (executables, model folders), the executables found, the models. */
  private readonly additions: LocalAdditionsStore;
  private readonly executables: ExecutableCatalog;
  private readonly localModels: ModelCatalog;

  constructor(
    private readonly options: CoreOptions,
    private readonly clock: Clock,
    private readonly provider: TelemetryProvider,
    private readonly log: (line: string) => void,
  ) {
    this.settings = options.settings;
    this.dataDir = options.dataDir;
    this.estimator = childEstimator({ spawn: options.spawn ?? spawnEngineProcess, nodePath: options.launchers.nodePath });
    this.segments = new SegmentCache(clock, (key) => RegistrySegment.openForObserve(this.options.helper, key), (key, message) => this.log(`registry ${key}: ${message}`));
    this.currentPolicy = options.policy ?? DEFAULT_POLICY;
    const chosen = options.settings.get().policyRevision;
    if (chosen !== undefined) {
      const known = revisionNamed(chosen);
      if (known === undefined) log(`policy: the settings name revision ${JSON.stringify(chosen)}, which this build does not know (it knows ${KNOWN_REVISIONS_TEXT}); using ${this.currentPolicy.revision}`);
      else this.currentPolicy = switchRevision(this.currentPolicy, known);
    }
    this.history = new PlanHistory(this.policy.historySize);
    this.profiles = new ProfileStore({ dataDir: options.dataDir });
    if (this.profiles.loadProblem !== null) log(`profiles: ${this.profiles.loadProblem.message}; the file was kept as ${this.profiles.loadProblem.backup}`);
    for (const renamed of this.profiles.renamedOnLoad) log(`profiles: ${renamed.message}`);
    this.envelopes = new EnvelopeStore(join(options.dataDir, 'envelopes.json'));
    this.additions = new LocalAdditionsStore(options.dataDir);
    if (this.additions.loadProblem !== null) log(`local additions: ${this.additions.loadProblem}; nothing added on this machine is used until it is fixed`);
    this.executables = new ExecutableCatalog({ added: () => this.additions.current().executables });
    this.localModels = new ModelCatalog({
      places: () => machineModelPlaces(this.additions.current().modelFolders),
      inspect: (path) => inspectModelFile(path),
      // The estimator child stays up between estimates and leaves by itself once idle.
      peak: (path, contextSize) => modelPeak(this.envelopes, path, { contextSize, gpuLayers: DEFAULT_GPU_LAYERS, engineKind: 'builtin' }, { estimator: this.estimator }),
      fit: (model, peak, contextSize) => this.fitNow(model, peak, contextSize),
      nowMs: () => performance.now(),
      budgetMs: LOCAL_MODELS_BUDGET_MS,
      log: (line) => this.log(line),
    });
    this.sampler = new TelemetrySampler({
      provider,
      wallUs: () => clock.wallUs(),
      staleAfterUs: () => this.policy.staleAfterUs,
      onSample: (samples) => {
        for (const sample of samples) {
          this.pressureOf(sample.key).observe(usedFraction(sample), clock.monoUs());
          this.recordHistory(sample);
        }
      },
      // Our engines' memory is their process trees' (a llama-server under `gpu-share run` holds it,
      // not the supervisor whose pid we know). The first sample comes before the supervisor.
      engineTrees: () => engineTreesOf(this.runningEnginePids()),
    });
    this.sampler.tick();
    this.gpuKey = this.sampler.all()[0]?.key ?? 'cpu-0';
    const core = this;
    this.supervisor = new Supervisor({
      clock,
      // The policy in force at each plan (an operator may switch revisions).
      get policy(): PlannerPolicy {
        return core.policy;
      },
      leases: this.leases,
      envelopes: this.envelopes,
      // The latest sample however old: the planner tells a stale one (TELEMETRY_STALE, with its
      // age) from none at all (TELEMETRY_MISSING).
      snapshot: (gpuKey) =>
        snapshotFromSample({
          nowUs: clock.wallUs(),
          node: hostname(),
          gpuKey,
          sample: this.sampler.latest(gpuKey),
          pressure: this.pressureOf(gpuKey).level,
          controls: this.controls(),
          queueDepth: this.gateway.depth,
        }),
      spawn: options.spawn ?? spawnEngineProcess,
      launchers: options.launchers,
      gpuKey: this.gpuKey,
      deviceKeys: () => this.deviceKeys(),
      // A sample now: the sampler tracks and folds every running engine's tree, this one's too.
      residentBytes: (pid, gpuKey) => {
        this.sampler.tick();
        return this.sampler.latest(gpuKey)?.processes?.find((p) => p.pid === pid)?.usedBytes ?? null;
      },
      isActive: (engine) => this.peerOf(engine)?.record.active ?? null,
      inUse: (id) => this.gateway.serving(id),
      onEvent: (event) => this.onSupervisorEvent(event),
    });
  }

  get policy(): PlannerPolicy {
    return this.currentPolicy;
  }

  /** The pids of the engines that load or run now (none before the supervisor exists). */
  private runningEnginePids(): number[] {
    return (this.supervisor as Supervisor | undefined)?.list().filter((e) => e.state === 'loading' || e.state === 'running').map((e) => e.pid) ?? [];
  }

  start(): void {
    this.sampler.start();
    const every = (ms: number, work: () => void): void => {
      const timer = setInterval(work, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(STATE_INTERVAL_MS, () => {
      if (this.listeners.size === 0) return;
      this.emit({ type: 'state', state: this.snapshot() });
    });
    every(TICK_INTERVAL_MS, () => {
      void this.supervisor.tick().catch((error: unknown) => this.log(`supervisor: ${String(error)}`));
    });
    every(RATE_INTERVAL_MS, () => void this.sampleEngineFigures());
  }

  // -------------------------------------------------------------------------------------------
  // GpuShareApi

  async getState(): Promise<AppState> {
    return this.snapshot();
  }

  subscribe(listener: (event: AppEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async plan(request: LaunchRequest): Promise<PlacementPlan> {
    const spec = await this.specFor(request.profileId, request.gpuKey);
    const plan = this.supervisor.plan(spec);
    this.history.add(plan);
    this.emit({ type: 'plan', plan });
    return plan;
  }

  /** From the dashboard or the CLI: a failed profile is tried again. */
  async launch(request: LaunchRequest): Promise<LaunchOutcome> {
    this.failures.delete(request.profileId);
    // The user's own start: an engine held back for crashing gets its chance again.
    this.supervisor.resetCrashes(request.profileId);
    return this.launchOn(request.profileId, request.gpuKey);
  }

  async launchOnDemand(profileId: string): Promise<LaunchOutcome> {
    return this.launchOn(profileId, undefined);
  }

  /** `gpuKey`: the device asked for; undefined = the profile's preferred one, else the one with
   *  the most free memory. */
  private async launchOn(profileId: string, gpuKey: string | undefined): Promise<LaunchOutcome> {
    // An engine that keeps ending by itself: a 503 naming why, and nothing is started.
    const hold = this.supervisor.crashHoldOf(profileId);
    if (hold !== null) throw toApiError(new CrashLoopError(describeCrashHold(this.profiles.get(profileId)?.name ?? profileId, hold, this.clock.monoUs()), hold));
    let spec: LaunchSpec;
    try {
      spec = await this.specFor(profileId, gpuKey);
    } catch (error) {
      const apiError = toApiError(error);
      if (apiError.code !== 'NOT_FOUND') this.markFailed(profileId, apiError.message);
      throw apiError;
    }
    const outcome = await this.startEngine(spec);
    if (outcome.plan.verdict === 'REJECT_HEALTH' && spec.modelProblem !== undefined) this.markFailed(profileId, `model file ${spec.modelPath ?? ''}: ${describeModelProblem(spec.modelProblem)}`);
    else if (outcome.plan.verdict === 'REJECT_HEALTH' && spec.executableProblem !== undefined) this.markFailed(profileId, `ENGINE_EXECUTABLE_MISSING: ${spec.executableProblem.executable} ${describeExecutableProblem(spec.executableProblem.problem)}`);
    return outcome;
  }

  private async startEngine(unpinned: LaunchSpec): Promise<LaunchOutcome> {
    // Where its GPU is in Vulkan's order (the lister runs once, on the first launch on a GPU).
    const gpuKey = this.supervisor.deviceOf(unpinned);
    const spec: LaunchSpec = { ...unpinned, vulkan: await lookUpVulkanDevice(gpuKey, this.provider) };
    const pinning = pinningFor(spec.kind, gpuKey, spec.env, spec.vulkan);
    return new Promise<LaunchOutcome>((resolve, reject) => {
      let answered = false;
      const launching = this.supervisor.launch(spec, {
        onSpawned: (engine) => {
          answered = true;
          if (pinning.note !== null) this.log(`${spec.name}: ${pinning.note}`);
          const plan = this.history.list().at(-1);
          if (plan === undefined) reject(new ApiError('INTERNAL', 'launched without a plan'));
          else resolve({ plan, engine: this.engineView(engine) });
        },
      });
      launching.then(
        (result) => {
          if (!answered) resolve({ plan: result.plan, engine: null });
          else if (result.engine !== null && result.engine.state !== 'running') this.log(`${spec.name}: exited while starting (${result.engine.exitSignal ?? `exit code ${String(result.engine.exitCode)}`})`);
        },
        (error: unknown) => {
          if (!(error instanceof CrashLoopError)) this.markFailed(spec.profileId, `could not start: ${error instanceof Error ? error.message : String(error)}`);
          if (!answered) reject(toApiError(error));
          else this.log(`${spec.name}: launch failed: ${String(error)}`);
        },
      );
    });
  }

  async stopEngine(engineId: string): Promise<EngineView> {
    return this.engineView(await this.guard(() => this.supervisor.stop(engineId)));
  }

  async killEngine(engineId: string): Promise<EngineView> {
    return this.engineView(await this.guard(() => this.supervisor.kill(engineId)));
  }

  async setWeight(engineId: string, weight: number): Promise<EngineView> {
    const status = await this.guard(async () => this.supervisor.setWeight(engineId, weight));
    // The slider's value is the profile's from now on ("until the user moves the slider").
    if (this.profiles.get(status.profileId) !== undefined) this.profiles.update(status.profileId, { weight });
    return this.engineView(status);
  }

  async listProfiles(): Promise<Profile[]> {
    return this.profiles.list();
  }

  /** `from`: 'remote' for a request over HTTP, which may not choose what runs (remote-profile.ts). */
  async createProfile(input: ProfileInput, from: 'local' | 'remote' = 'local'): Promise<Profile> {
    return this.guard(async () => {
      const id = (input as { id?: unknown }).id;
      if (typeof id === 'string' && this.profiles.get(id) !== undefined) throw new ApiError('CONFLICT', `a profile "${id}" exists already`, { field: 'id' });
      const checked = this.profiles.checkNew(input);
      checkProfileEnv(checked);
      if (from === 'remote') this.checkRemote(null, checked);
      await checkModelFile(checked.modelPath);
      return this.profiles.create(input);
    });
  }

  async updateProfile(id: string, patch: ProfilePatch, from: 'local' | 'remote' = 'local'): Promise<Profile> {
    return this.guard(async () => {
      const current = this.profiles.get(id);
      if (current === undefined) throw new ProfileNotFoundError(id);
      const checked = this.profiles.checkUpdate(id, patch);
      checkProfileEnv(checked);
      if (from === 'remote') this.checkRemote(current, checked);
      // A changed model file is checked; an unchanged one that went bad shows at launch.
      if (checked.modelPath !== current.modelPath) await checkModelFile(checked.modelPath);
      const profile = this.profiles.update(id, patch);
      // Edited: the gateway may try it again.
      this.failures.delete(id);
      this.supervisor.resetCrashes(id);
      return profile;
    });
  }

  async deleteProfile(id: string): Promise<void> {
    if (!this.profiles.delete(id)) throw new ApiError('NOT_FOUND', `no profile "${id}"`);
  }

  async estimateModel(modelPath: string, options: EstimateOptions = {}): Promise<ModelEstimateView> {
    parseInput(MODEL_PATH, modelPath, 'modelPath');
    // Only model files: the path comes from a form, and nothing else is opened or described.
    if (!namesModelFile(modelPath)) throw badField('modelPath', 'must name a .gguf model file (or a blob of Ollama\'s store)');
    const check = await inspectModelFile(modelPath);
    if (!check.ok) throw badField('modelPath', describeModelCheck(check.problem, check.detail));
    const contextSize = options.contextSize ?? defaultContextSize(check.facts.trainContextSize);
    const kvCacheType = options.kvCacheType ?? 'f16';
    const peak = await this.guard(() => modelPeak(this.envelopes, modelPath, { contextSize, gpuLayers: DEFAULT_GPU_LAYERS, engineKind: 'builtin' }, { kvCacheType, estimator: this.estimator, checked: check.facts }));
    return {
      modelPath,
      fileBytes: check.facts.fileBytes,
      contextSize,
      kvCacheType,
      trainContextSize: check.facts.trainContextSize,
      defaultContextSize: defaultContextSize(check.facts.trainContextSize),
      modelBytes: peak.estimate?.modelBytes ?? null,
      contextBytes: peak.estimate?.contextBytes ?? null,
      peakBytes: peak.peakBytes,
      peakSource: peak.peakSource,
      memory: memoryNeeds(peak, contextSize, this.policy),
    };
  }

  async setPolicy(patch: PolicyPatch): Promise<PolicyView> {
    const next: Parameters<typeof this.settings.update>[0] = {};
    let known: PlannerPolicy | undefined;
    if (patch.revision !== undefined) {
      known = revisionNamed(patch.revision);
      if (known === undefined) throw badField('revision', `this build knows the revisions ${KNOWN_REVISIONS_TEXT}, not ${JSON.stringify(patch.revision)}`);
      next.policyRevision = known.revision;
    }
    if (patch.labPaused !== undefined) next.labPaused = patch.labPaused;
    if (patch.draining !== undefined) next.draining = patch.draining;
    if (patch.idleUnloadMinutes !== undefined) next.idleUnloadMinutes = patch.idleUnloadMinutes;
    this.settings.update(next);
    if (known !== undefined) {
      const before = this.currentPolicy.revision;
      this.currentPolicy = switchRevision(this.currentPolicy, known);
      // Every plan from now on carries the new revision (the plan history shows the switch).
      if (before !== this.currentPolicy.revision) this.log(`policy: revision ${before} → ${this.currentPolicy.revision}`);
    }
    const policy = this.policyView();
    this.emit({ type: 'state', state: this.snapshot() });
    return policy;
  }

  async listPlans(): Promise<PlacementPlan[]> {
    return this.history.list().reverse();
  }

  planInputs(gpuKey?: string): PlanInputs {
    const keys = this.deviceKeys();
    if (gpuKey !== undefined && !keys.includes(gpuKey)) throw badField('gpuKey', `no device "${gpuKey}" (devices: ${keys.join(', ')})`);
    const key = gpuKey ?? keys[0] ?? this.gpuKey;
    return {
      dataDir: this.dataDir,
      policy: this.policy.revision,
      devices: keys.map((k) => ({ key: k, name: this.sampler.latest(k)?.name ?? null })),
      snapshot: this.supervisor.plannerSnapshot(key),
    };
  }

  async listExecutables(): Promise<ExecutableView[]> {
    return (await this.executables.list()).map(executableView);
  }

  async listLocalModels(): Promise<LocalModelList> {
    return this.localModels.list();
  }

  // -------------------------------------------------------------------------------------------
  // Core

  peersView(gpuKey?: string): GpuPeersView {
    const key = gpuKey ?? this.deviceKeys()[0] ?? this.gpuKey;
    return buildPeersView(key, this.alivePeers(key), null);
  }

  attachGateway(gateway: GatewayView): void {
    this.gateway = gateway;
  }

  engineRequests(engineId: string, count: number): void {
    this.supervisor.setRequests(engineId, count);
  }

  setApiPort(port: number | null): void {
    this.apiPort = port;
  }

  engines(): EngineView[] {
    // One registry read per device for all of them.
    const peers = new Map<string, AlivePeer[]>();
    return this.supervisor.list().map((e) => {
      let mine = peers.get(e.gpuKey);
      if (mine === undefined) {
        mine = this.alivePeers(e.gpuKey);
        peers.set(e.gpuKey, mine);
      }
      return this.engineView(e, mine);
    });
  }

  profileList(): Profile[] {
    return this.profiles.list();
  }

  engineSecret(engineId: string): string | null {
    try {
      return this.supervisor.secretOf(engineId);
    } catch {
      return null;
    }
  }

  profileFailure(profileId: string): ProfileFailure | null {
    const failure = this.failures.get(profileId);
    return failure === undefined ? null : { ...failure };
  }

  snapshot(): AppState {
    const nowUs = this.clock.wallUs();
    const settings = this.settings.get();
    // One registry read per device for the whole state.
    const peersByKey = new Map(this.deviceKeys().map((key) => [key, this.alivePeers(key)]));
    const devices = [...peersByKey].map(([key, peers]) => this.deviceView(key, nowUs, peers));
    // One copy of the profiles for the state and the launch defaults (the state is taken 4 times a second).
    const profiles = this.profiles.list();
    return {
      contractVersion: CONTRACT_VERSION,
      wallUs: nowUs,
      devices,
      engines: this.supervisor.list().map((e) => this.engineView(e, peersByKey.get(e.gpuKey))),
      profiles,
      launchDefaults: this.launchDefaults(profiles, devices),
      dataProblems: [
        this.settings.loadProblem?.message,
        this.profiles.loadProblem === null ? undefined : `${this.profiles.loadProblem.message}; the file was kept as ${this.profiles.loadProblem.backup}`,
        // Until the next change writes the new names to the file.
        ...this.profiles.renamedOnLoad.map((r) => r.message),
      ].filter((m): m is string => m !== undefined),
      profileFailures: [...this.failures.values()].filter((f) => this.profiles.get(f.profileId) !== undefined).map((f) => ({ ...f })),
      policy: this.policyView(settings),
      plans: this.history.list().slice(-50).reverse(),
      gateway: { queueDepth: this.gateway.depth, queueLimit: this.gateway.limit },
      api: { port: this.apiPort, dataDir: this.dataDir, token: settings.apiToken },
    };
  }

  /** Each profile's default device for Launch, by the same rule as launchDevice (the header's
   *  selection, which only the dashboard knows, is applied there). */
  private launchDefaults(profiles: readonly StoredProfile[], devices: readonly DeviceView[]): LaunchDefault[] {
    const candidates = devices.map((d) => ({ key: d.key, freeBytes: d.vram?.freeBytes ?? null }));
    return profiles.flatMap((profile) => {
      const choice = chooseLaunchDevice({ preferred: profile.gpuKey, devices: candidates });
      if (choice === null || (choice.why !== 'preferred' && choice.why !== 'only' && choice.why !== 'most-free')) return [];
      return [{ profileId: profile.id, gpuKey: choice.key, why: choice.why }];
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    await this.supervisor.stopAll();
    this.estimator.close();
    this.sampler.close();
    this.segments.close();
    for (const segment of this.writers.values()) segment.close();
    this.writers.clear();
    this.listeners.clear();
  }

  // -------------------------------------------------------------------------------------------

  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw toApiError(error);
    }
  }

  private async specFor(profileId: string, gpuKey: string | undefined): Promise<LaunchSpec> {
    const profile = this.profiles.get(profileId);
    if (profile === undefined) throw new ApiError('NOT_FOUND', `no profile "${profileId}"`, { field: 'profileId' });
    // A profiles file edited by hand is held to the same rule as the API.
    checkProfileEnv(profile);
    const device = this.launchDevice(profile, gpuKey);
    const spec = await this.guard(() => launchSpecFor(profile, this.envelopes, { defaultIdleUnloadMinutes: this.settings.get().idleUnloadMinutes, estimator: this.estimator }));
    return { ...spec, gpuKey: device };
  }

  /** The device to launch a profile on: the one asked for (a device of this machine), else the
   *  profile's preferred one while present, else the one with the most free memory. */
  private launchDevice(profile: Pick<StoredProfile, 'id' | 'gpuKey'>, requested: string | undefined): string {
    const keys = this.deviceKeys();
    if (requested !== undefined && !keys.includes(requested)) throw badField('gpuKey', `no device "${requested}" (devices: ${keys.join(', ')})`);
    if (requested === undefined && profile.gpuKey !== null && !keys.includes(profile.gpuKey)) {
      this.log(`profile ${profile.id}: its preferred device ${profile.gpuKey} is not present; launching on another`);
    }
    const nowUs = this.clock.wallUs();
    const live = this.supervisor.list().filter((e) => e.state === 'running' || e.state === 'loading');
    const devices = keys.map((key) => {
      const sample = this.sampler.fresh(key, nowUs);
      const usable = sample !== null && sample.health !== 'FAILED';
      return { key, freeBytes: usable ? this.vramView(sample, live.filter((e) => e.gpuKey === key), []).freeBytes : null };
    });
    return chooseLaunchDevice({ requested, preferred: profile.gpuKey, devices })?.key ?? this.gpuKey;
  }

  /** A profile made or changed over HTTP may only pick an executable found on this machine (or
   *  added on it) and may not set loader environment; command profiles are local only. */
  private checkRemote(current: StoredProfile | null, next: StoredProfile): void {
    // Looked up only when the profile names a command it did not have (the catalog's isKnown).
    const problem = remoteProfileProblem(current, next, { has: (path) => this.executables.isKnown(path) });
    if (problem !== null) throw new ApiError('FORBIDDEN', `${problem.field}: ${problem.message}; ${localOnlyHowTo(this.dataDir)}`, { field: problem.field });
  }

  /** The planner's verdict now for a model on this machine at its default context, on the device
   *  a launch would pick; nothing is recorded (it is a look, not a plan anyone asked for). */
  private fitNow(model: FoundModel, peak: CatalogPeak, contextSize: number): LocalModelFit {
    const gpuKey = this.launchDevice({ id: 'on-this-machine', gpuKey: null }, undefined);
    const spec: LaunchSpec = {
      profileId: 'on-this-machine',
      name: model.name,
      kind: 'builtin',
      capability: 'chat',
      modelPath: model.path,
      modelKey: peak.modelKey,
      contextSize,
      gpuLayers: DEFAULT_GPU_LAYERS,
      threads: null,
      weight: DEFAULT_WEIGHT_BY_PRIORITY.interactive,
      priority: 'interactive',
      pinned: false,
      command: null,
      args: [],
      env: {},
      peakBytes: peak.peakBytes,
      peakSource: peak.peakSource,
      ...(peak.parts === null ? {} : { peakParts: peak.parts }),
      gpuKey,
    };
    const plan = this.supervisor.plan(spec);
    const first = plan.reasons[0];
    return { verdict: plan.verdict, gpuKey: plan.accelerator.key, contextSize, requirementBytes: plan.memory.requirementBytes, reason: first === undefined ? '' : explainReason(first) };
  }

  private markFailed(profileId: string, reason: string): void {
    if (this.profiles.get(profileId) === undefined) return;
    this.failures.set(profileId, { profileId, reason, atUs: this.clock.wallUs() });
    this.log(`profile ${profileId}: failed to load: ${reason} (skipped by the gateway until it is edited or launched again)`);
  }

  private controls(): OperatorControls {
    const settings = this.settings.get();
    return { draining: settings.draining, labPaused: settings.labPaused, allowedCapabilities: null };
  }

  private policyView(settings: Settings = this.settings.get()): PolicyView {
    const { revision, ...rules } = this.policy;
    return { labPaused: settings.labPaused, draining: settings.draining, idleUnloadMinutes: settings.idleUnloadMinutes, revision, revisions: POLICY_REVISIONS.map((p) => p.revision), rules };
  }

  private pressureOf(key: string): PressureTracker {
    let tracker = this.pressure.get(key);
    if (tracker === undefined) {
      tracker = new PressureTracker(() => this.policy);
      this.pressure.set(key, tracker);
    }
    return tracker;
  }

  private deviceKeys(): string[] {
    const keys = this.sampler.all().map((s) => s.key);
    return keys.length === 0 ? [this.gpuKey] : keys;
  }

  private emit(event: AppEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.log(`event listener failed: ${String(error)}`);
      }
    }
  }

  private onSupervisorEvent(event: SupervisorEvent): void {
    switch (event.kind) {
      case 'plan':
        this.history.add(event.plan);
        this.emit({ type: 'plan', plan: event.plan });
        return;
      case 'state':
        if (event.engine.state === 'running') this.ranOnce.add(event.engine.id);
        // Gone while loading, by itself: the profile cannot load as it is.
        if ((event.engine.state === 'crashed' || event.engine.state === 'exited') && !this.ranOnce.has(event.engine.id)) {
          const last = event.engine.lastLines.at(-1);
          this.markFailed(event.engine.profileId, `its engine exited while loading (${event.engine.exitSignal ?? `exit code ${String(event.engine.exitCode)}`})${last === undefined ? '' : `: ${last.slice(0, 300)}`}`);
        }
        if (event.engine.state === 'crashed' || event.engine.state === 'exited' || event.engine.state === 'stopped') {
          this.releaseSlotOf(event.engine);
          removeEngineFile(this.dataDir, process.pid, event.engine.id);
        } else if (event.engine.state === 'running') {
          // `gpu-share engines` on this data folder lists it.
          this.guardFs(() => writeEngineFile(this.dataDir, { id: event.engine.id, profileId: event.engine.profileId, name: event.engine.name, kind: event.engine.kind, pid: event.engine.pid, supervisorPid: process.pid, port: event.engine.port, gpuKey: event.engine.gpuKey, startedAt: new Date(event.engine.startedAtUs / 1000).toISOString(), ...residentFacts(this.supervisor.residents().find((r) => r.id === event.engine.id)) }));
        }
        this.emit({ type: 'engine', engine: this.engineView(event.engine) });
        // Its slot is free now: the state says so at once (its row turns "crashed", the others'
        // shares reflow) instead of at the next tick, up to STATE_INTERVAL_MS later.
        if (this.listeners.size > 0 && (event.engine.state === 'crashed' || event.engine.state === 'exited' || event.engine.state === 'stopped')) this.emit({ type: 'state', state: this.snapshot() });
        if (event.engine.state === 'exited') this.log(`${event.engine.name}: exited (exit code 0)`);
        if (event.engine.state === 'crashed') this.log(`${event.engine.name}: crashed (${event.engine.exitSignal ?? `exit code ${String(event.engine.exitCode)}`})`);
        return;
      case 'progress':
        this.emit({ type: 'progress', engineId: event.id, pct: event.pct });
        return;
      case 'log':
        this.emit({ type: 'log', engineId: event.id, stream: event.stream, line: event.line });
        return;
      case 'pacer':
        this.emit({ type: 'pacer', engineId: event.id, overshootsUs: event.overshootsUs });
        return;
      case 'crash-loop':
        // Failed: the gateway skips it (a 503 naming this) until the user restarts it.
        if (event.hold.kind === 'failed') this.markFailed(event.profileId, event.message);
        else this.log(`profile ${event.profileId}: ${event.message}`);
        return;
      case 'idle-unload':
      case 'restart':
        return;
    }
  }

  /** The alive peers of a device (empty when nobody created its registry yet, or when it cannot
   *  be read: a foreign or refused segment is said once and shows no peers). */
  private alivePeers(key: string): AlivePeer[] {
    return this.segments.peers(key);
  }

  /**
   * Live engine figures: each running engine that serves llama-server's /metrics (the built-in
   * engine, llama-server) is read once per interval; its token rate is the counter's growth over
   * the interval, its time to first token the built-in engine's summary (engine-figures.ts). An
   * engine that does not answer has no figures ("—") for that interval, never invented ones; the
   * last HISTORY_POINTS rates are kept for its sparkline.
   */
  private async sampleEngineFigures(): Promise<void> {
    const engines = this.supervisor.list().filter((e) => e.state === 'running' && e.port !== null && (e.kind === 'builtin' || e.kind === 'llama-server'));
    const live = new Set(engines.map((e) => e.id));
    for (const id of this.engineFigures.keys()) if (!live.has(id)) this.engineFigures.delete(id);
    await Promise.all(
      engines.map(async (engine) => {
        let text: string | null = null;
        try {
          // Its port asks for the secret the supervisor gave it.
          const secret = this.supervisor.secretOf(engine.id);
          const response = await fetch(`http://127.0.0.1:${engine.port}/metrics`, { headers: secret === null ? {} : { authorization: `Bearer ${secret}` }, signal: AbortSignal.timeout(1_000) });
          text = response.ok ? await response.text() : null;
        } catch {
          text = null;
        }
        const known = this.engineFigures.get(engine.id) ?? { reading: null, figures: null, history: new RingBuffer<RatePoint>(HISTORY_POINTS) };
        const atMs = Date.now();
        if (text === null) {
          known.reading = null;
          known.figures = null;
        } else {
          const reading = { counters: parseEngineCounters(text), atMs };
          known.figures = engineFigures(known.reading, reading, known.figures);
          known.reading = reading;
        }
        known.history.push({ atUs: atMs * 1000, value: known.figures?.tokensPerSecond ?? null });
        this.engineFigures.set(engine.id, known);
      }),
    );
  }

  /** A listing file that cannot be written costs `gpu-share engines` its line, nothing else. */
  private guardFs(work: () => void): void {
    try {
      work();
    } catch (error) {
      this.log(`engines folder: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /**
   * An engine of ours has exited: free its slot now, by compare-and-swap of the pid and boot time
   * it holds (a slot already reclaimed by someone else is left alone), so that the others' shares
   * reflow at once instead of after the 3 s heartbeat age-out. An engine that left cleanly has
   * freed it already; then there is nothing to find.
   */
  private releaseSlotOf(engine: EngineStatus): void {
    const peer = this.peerOf(engine);
    if (peer === undefined) return;
    try {
      let writer = this.writers.get(engine.gpuKey);
      if (writer === undefined) {
        writer = RegistrySegment.openForJoin(this.options.helper, engine.gpuKey);
        this.writers.set(engine.gpuKey, writer);
      }
      writer.release(peer.record.slot, peer.record.pid, peer.record.bootUs);
    } catch (error) {
      // It ages out in 3 s then, as any dead peer does.
      this.log(`registry ${engine.gpuKey}: could not free slot ${peer.record.slot} of ${engine.name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** The registry peer of a managed engine: its slot's pid (the host) or owner (`gpu-share run`).
   *  `peers`: the engine's device's alive peers when the caller has read them already. */
  private peerOf(engine: Pick<EngineStatus, 'pid' | 'gpuKey'>, peers: readonly AlivePeer[] = this.alivePeers(engine.gpuKey)): AlivePeer | undefined {
    return peers.find((p) => p.record.pid === engine.pid || p.record.ownerPid === engine.pid);
  }

  private engineView(status: EngineStatus, peers?: readonly AlivePeer[]): EngineView {
    const active = status.state === 'running' || status.state === 'loading';
    const peer = active ? this.peerOf(status, peers) : undefined;
    let weight: number;
    try {
      weight = this.supervisor.weightOf(status.id);
    } catch {
      weight = 0;
    }
    return {
      id: status.id,
      profileId: status.profileId,
      name: status.name,
      kind: status.kind,
      priority: status.priority,
      pinned: status.pinned,
      pid: status.pid,
      state: status.state,
      progressPct: status.progressPct,
      port: status.port,
      exitCode: status.exitCode,
      exitSignal: status.exitSignal,
      exitedAtUs: status.exitedAtUs,
      tokensPerSecond: status.state === 'running' ? (this.engineFigures.get(status.id)?.figures?.tokensPerSecond ?? null) : null,
      timeToFirstTokenMs: status.state === 'running' ? (this.engineFigures.get(status.id)?.figures?.timeToFirstTokenMs ?? null) : null,
      tokensHistory: status.state === 'running' ? (this.engineFigures.get(status.id)?.history.toArray() ?? []) : [],
      weight,
      gpuKey: status.gpuKey,
      slot: peer?.record.slot ?? null,
      residentBytes: status.residentBytes,
      startedAtUs: status.startedAtUs,
      busy: status.busy,
      logTail: status.lastLines.slice(-LOG_TAIL),
    };
  }

  /** A sample into its device's history; a device that cannot be read has no figures then (its
   *  sample repeats the last good memory figures, which are not live). */
  private recordHistory(sample: DeviceSample): void {
    let history = this.deviceHistory.get(sample.key);
    if (history === undefined) {
      history = new RingBuffer<DeviceHistoryPoint>(HISTORY_POINTS);
      this.deviceHistory.set(sample.key, history);
    }
    const live = sample.failure === undefined && (sample.health === 'OK' || sample.health === 'DEGRADED');
    history.push({
      atUs: sample.sampledAtUs,
      utilizationPct: live ? sample.utilizationPct : null,
      temperatureC: live ? sample.temperatureC : null,
      powerW: live ? sample.powerW : null,
      usedBytes: live ? sample.usedBytes : null,
    });
  }

  private deviceView(key: string, nowUs: number, peers: readonly AlivePeer[]): DeviceView {
    const sample = this.sampler.latest(key);
    const fresh = sample !== null && !this.sampler.isStale(sample, nowUs);
    const engines = this.supervisor.list().filter((e) => e.gpuKey === key && (e.state === 'running' || e.state === 'loading'));
    const rows: PeerRow[] = peers.map((peer) => {
      const engine = engines.find((e) => e.pid === peer.record.pid || e.pid === peer.record.ownerPid);
      return {
        slot: peer.record.slot,
        pid: peer.record.pid,
        name: peer.record.name,
        weight: Number(peer.record.weight.toPrecision(6)),
        sharePct: Math.round(peer.share * 10_000) / 100,
        busyPct: Math.round(peer.record.busyPpm / 1_000) / 10,
        active: peer.record.active,
        heartbeatAgeMs: Math.round(peer.ageUs / 1000),
        engineId: engine?.id ?? null,
        kind: engine?.kind ?? 'peer',
      };
    });
    this.noteAgedOut(key, rows);
    const active = peers.filter((p) => p.record.active && p.share > 0);
    const schedule = active.length === 0 ? null : buildSchedule(active.map((p) => ({ slot: p.record.slot, share: p.share })));
    const problem =
      sample === null
        ? (this.sampler.lastError()?.error.message ?? 'no telemetry yet')
        : fresh
          ? null
          : sample.failure !== undefined
            ? `telemetry is stale: the latest query failed (${sample.failure.message})${sample.failure.lastGood ? `; last good figures ${Math.round((nowUs - sample.sampledAtUs) / 1e6)} s old` : ''}`
            : `telemetry is stale (last sample ${Math.round((nowUs - sample.sampledAtUs) / 1e6)} s ago)`;
    return {
      key,
      name: sample?.name ?? key,
      source: sample?.source ?? null,
      // A device that failed stays FAILED; figures that are not live say nothing of its health.
      health: fresh ? sample.health : sample?.health === 'FAILED' ? 'FAILED' : 'UNKNOWN',
      pressure: this.pressureOf(key).level,
      vram: fresh ? this.vramView(sample, engines, peers) : null,
      telemetryProblem: problem,
      history: this.deviceHistory.get(key)?.toArray() ?? [],
      peers: rows,
      schedule:
        schedule === null
          ? null
          : {
              periodUs: schedule.periodUs,
              windows: schedule.windows.map((w) => ({ slot: w.slot, startUs: w.startUs, lengthUs: w.lengthUs, share: w.share, stallBoundUs: stallBoundUs(schedule, w.slot) ?? 0 })),
            },
    };
  }

  private vramView(sample: DeviceSample, engines: EngineStatus[], peers: readonly AlivePeer[]): VramView {
    const known = sample.processes !== null;
    const engineBytes = engines.map((e) => {
      const measured = sample.processes?.find((p) => p.pid === e.pid)?.usedBytes ?? null;
      const bytes = measured ?? e.residentBytes ?? this.supervisor.residents().find((r) => r.id === e.id)?.envelopeBytes ?? 0;
      return { engineId: e.id, name: e.name, slot: this.peerOf(e, peers)?.record.slot ?? null, bytes };
    });
    const managed = engineBytes.reduce((sum, e) => sum + e.bytes, 0);
    const leaseBytes = this.leases.active(sample.sampledAtUs, sample.key).reduce((sum, l) => sum + Math.max(0, l.reservedBytes - l.materializedBytes), 0);
    const reserveBytes = dynamicReserveBytes(sample.totalBytes, this.policy);
    const physicalUsed = Math.max(sample.usedBytes, managed);
    return {
      totalBytes: sample.totalBytes,
      engines: engineBytes,
      unmanagedExternalBytes: Math.max(0, sample.usedBytes - managed),
      leaseBytes,
      reserveBytes,
      freeBytes: Math.max(0, sample.totalBytes - physicalUsed - leaseBytes - reserveBytes),
      attribution: known ? 'KNOWN' : 'ESTIMATED',
    };
  }

  private noteAgedOut(key: string, rows: readonly PeerRow[]): void {
    const previous = this.lastPeers.get(key) ?? new Map<number, { name: string; pid: number; ageMs: number }>();
    const current = new Map(rows.map((r) => [r.slot, { name: r.name, pid: r.pid, ageMs: r.heartbeatAgeMs }]));
    for (const [slot, before] of previous) {
      const now = current.get(slot);
      if ((now === undefined || now.pid !== before.pid) && before.ageMs >= AGED_OUT_AFTER_MS) {
        this.emit({ type: 'aged-out', gpuKey: key, slot, name: before.name, pid: before.pid });
      }
    }
    this.lastPeers.set(key, current);
  }
}
