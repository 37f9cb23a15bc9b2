/**
 * The supervisor: starts, watches, paces and stops the engines GPU Share launches.
 *
 *   launch = plan → (stop the idle engines the plan names) → lease → spawn → load progress →
 *            ready → measured residency → release the lease, record the envelope's measured peak
 *
 * Pacing per kind: `builtin` paces itself (the engine host calls the cooperative gate);
 * `command`, `llama-server` and `llamafile` run under `gpu-share run --exit-with-parent` (the
 * process gate); `opencoti-llamafile` paces itself and gets `--gpu-share-weight W`.
 *
 * Side effects leave through `SupervisorDeps` (spawning, the clock, telemetry), so tests can run
 * it against real processes or recorders. It only ever signals processes it spawned itself (each
 * engine runs in its own process group, which it created).
 */
import { connect } from 'node:net';
import type { Clock } from '../clock.js';
import { plan as planPlacement } from '../planner/plan.js';
import { withElsewhere, wantsElsewhere } from '../planner/elsewhere.js';
import { requirementBytes, type PlannerPolicy, type Priority } from '../planner/policy.js';
import type { LeaseBook } from '../planner/leases.js';
import type { EnvelopeStore } from '../planner/envelopes.js';
import type { PeakParts } from '../planner/memory.js';
import type { ManagedResident, PlacementPlan, PlannerSnapshot, PlanRequest } from '../planner/types.js';
import type { ModelProblem } from '../planner/model-file.js';
import type { ExecutableProblem } from '../planner/types.js';
import type { DeviceSnapshot } from '../planner/snapshot.js';
import { formatControl } from './control-protocol.js';
import { parseHostLine } from './host-protocol.js';
import { parsePacerLine } from '../pacer/overshoot.js';
import { DEFAULT_EXECUTABLE, type EngineKind } from './profiles.js';
import { ENGINE_SECRET_ENV, newEngineSecret } from './engine-secret.js';
import { pinningFor } from './device-pinning.js';
import type { VulkanMatch } from './vulkan-match.js';
import { LLAMA_SERVER_DEFAULT_PORT, declaredPortOf } from '../pacer/server-activity.js';
import { CRASH_LOOP_POLICY, crashHold, describeCrashHold, recentCrashes, type CrashHold, type CrashLoopPolicy, type CrashRecord } from './crash-loop.js';
import { BUILTIN_HOST_NODE_FLAGS, builtinHostEnv } from './builtin/defaults.js';

export type { EngineKind };


/** What to launch: a profile resolved to figures. */
export interface LaunchSpec {
  profileId: string;
  name: string;
  kind: EngineKind;
  capability: string;
  modelPath: string | null;
  modelKey: string;
  contextSize: number;
  /** The model's trained context (its GGUF header); absent or null when not known. */
  trainContextSize?: number | null;
  gpuLayers: number;
  threads: number | null;
  weight: number;
  priority: Priority;
  pinned: boolean;
  /** The executable for command-like kinds. */
  command: string | null;
  args: readonly string[];
  env: Readonly<Record<string, string>>;
  /** The envelope's peak used for planning (measured earlier, or estimated). */
  peakBytes: number;
  peakSource: 'MEASURED' | 'ESTIMATED';
  /** The estimate's parts of the peak; absent for a measured one. */
  peakParts?: PeakParts;
  /** Stop it after this many idle minutes unless pinned; null = never. */
  idleUnloadMinutes?: number | null;
  /** The model file cannot be loaded: the plan is REJECT_HEALTH and nothing starts. */
  modelProblem?: ModelProblem;
  /** The engine's executable is missing or cannot run: REJECT_HEALTH, nothing starts. */
  executableProblem?: ExecutableProblem;
  /** Start it again after a crash, up to `maxRestarts` times, waiting backoff, 2·backoff, … */
  restart?: { maxRestarts: number; backoffMs: number } | null;
  /** The device it runs on: planned against, pinned to, its registry joined. Absent: the
   *  supervisor's default device (`SupervisorDeps.gpuKey`). */
  gpuKey?: string;
  /** Where that device is in Vulkan's own order (vulkan-lookup.ts, before the launch): a Vulkan
   *  build is pinned by it. Absent: not looked up, and a Vulkan build is not pinned. */
  vulkan?: VulkanMatch;
}

/** `exited`: it ended by itself with exit code 0 (a command that finished); `crashed`: by itself
 *  otherwise (a signal, a non-zero code). */
export type EngineState = 'loading' | 'running' | 'stopping' | 'stopped' | 'exited' | 'crashed';

export interface EngineStatus {
  id: string;
  profileId: string;
  name: string;
  kind: EngineKind;
  priority: Priority;
  pinned: boolean;
  /** The device it runs on (its registry key). */
  gpuKey: string;
  pid: number;
  state: EngineState;
  /** 0–100 while loading. */
  progressPct: number;
  port: number | null;
  exitCode: number | null;
  exitSignal: string | null;
  /** Wall µs when the supervisor saw it exit; null while it runs. */
  exitedAtUs: number | null;
  /** The last lines it wrote (stdout and stderr), newest last. */
  lastLines: string[];
  startedAtUs: number;
  idleSinceUs: number;
  busy: boolean;
  /** Its measured residency when known. */
  residentBytes: number | null;
}

/** A process the supervisor started. */
export interface SpawnedProcess {
  readonly pid: number;
  onLine(listener: (stream: 'stdout' | 'stderr', line: string) => void): void;
  onExit(listener: (code: number | null, signal: string | null) => void): void;
  /** Signal the process itself. */
  signal(signal: NodeJS.Signals): boolean;
  /** Signal its whole process group (SIGKILL escalation: the engine under a wrapper too). */
  signalGroup(signal: NodeJS.Signals): boolean;
  /** Write one line to its stdin (control-protocol.ts); false when it cannot be written. */
  send(line: string): boolean;
}

export interface SpawnRequest {
  command: string;
  args: string[];
  env: Record<string, string>;
}

export interface SupervisorDeps {
  clock: Clock;
  policy: PlannerPolicy;
  leases: LeaseBook;
  envelopes: EnvelopeStore | null;
  /** The planner's view of a device now (without our residents and leases: we add them). */
  snapshot(gpuKey: string): DeviceSnapshot;
  spawn(request: SpawnRequest): SpawnedProcess;
  /** How to start a command-like engine under the process gate, and the engine host. */
  launchers: { nodePath: string; cliPath: string; builtinHostPath: string };
  /** The device of a spec that names none. */
  gpuKey: string;
  /** Every device, in discovery order: a request one device does not take is planned on the
   *  others too, to name one that would (absent: only the default device). */
  deviceKeys?(): string[];
  /** The measured memory of a process on a device (per-process telemetry, or its RSS on cpu-0). */
  residentBytes(pid: number, gpuKey: string): number | null;
  /** What an engine's port will ask of a request (commandFor): absent, a fresh secret per engine,
   *  which the gateway sends (the app and `serve`); `launch` has no gateway and gives the user's
   *  `--api-key`, or null for a port open to loopback as a llama-server started by hand is. */
  engineSecret?(): string | null;
  /** Is a request being served on it right now (the gateway)? Such an engine is busy for the
   *  planner at once, before the registry's activity flag says so. */
  inUse?(id: string): boolean;
  /** Is the engine working right now (its registry slot's `active` flag)? null = cannot tell. */
  isActive?(engine: EngineStatus): boolean | null;
  onEvent?(event: SupervisorEvent): void;
  /** Back-off and failure of engines that keep ending by themselves (default CRASH_LOOP_POLICY). */
  crashLoop?: CrashLoopPolicy;
}

export type SupervisorEvent =
  | { kind: 'plan'; plan: PlacementPlan }
  | { kind: 'state'; engine: EngineStatus }
  | { kind: 'progress'; id: string; pct: number }
  | { kind: 'log'; id: string; stream: 'stdout' | 'stderr'; line: string }
  /** How far past its window's end the engine ran, per window, since the last report (µs). */
  | { kind: 'pacer'; id: string; overshootsUs: number[] }
  | { kind: 'idle-unload'; id: string; idleForUs: number }
  | { kind: 'restart'; id: string; attempt: number; inMs: number }
  /** An engine of the profile ended by itself: it is held back (back-off) or held as failed. */
  | { kind: 'crash-loop'; profileId: string; hold: CrashHold; message: string };

export interface LaunchResult {
  plan: PlacementPlan;
  /** null when the plan did not admit it. */
  engine: EngineStatus | null;
}

export { LLAMA_SERVER_DEFAULT_PORT };

/** Graceful stop: SIGTERM, then SIGKILL after this long. */
export const STOP_GRACE_MS = 10_000;
const LOG_RING = 200;

interface Engine {
  status: EngineStatus;
  /** What its port asks of a request (see commandFor); null: nothing. */
  secret: string | null;
  process: SpawnedProcess;
  spec: LaunchSpec;
  leaseId: string | null;
  killTimer: NodeJS.Timeout | null;
  exited: Promise<void>;
}

/** Callers get copies: the supervisor keeps updating its own. */
const copyStatus = (status: EngineStatus): EngineStatus => ({ ...status, lastLines: [...status.lastLines] });

export class SupervisorError extends Error {
  override readonly name: string = 'SupervisorError';
}

/** A launch of a profile whose engines keep ending by themselves: in back-off, or failed until
 *  the user starts it again (crash-loop.ts). */
export class CrashLoopError extends SupervisorError {
  override readonly name = 'CrashLoopError';
  constructor(
    message: string,
    readonly hold: CrashHold,
  ) {
    super(message);
  }
}

/** How long an engine that ended stays listed (its row, its last output) when its profile is not
 *  held as failed; only the newest ended engine of a profile is kept at all. */
export const ENDED_KEEP_US = 10 * 60_000_000;

const hasEnded = (state: EngineState): boolean => state === 'stopped' || state === 'exited' || state === 'crashed';

/** The command line for a spec. Pure. `secret`: the engine's own, which its port will require
 *  (the built-in engine gets it in its environment, llama-server and llamafile as `--api-key`;
 *  a command engine's port is its own business and stays unprotected). */
export function commandFor(spec: LaunchSpec, deps: Pick<SupervisorDeps, 'launchers' | 'gpuKey'>, secret: string | null = null): SpawnRequest {
  const { nodePath, cliPath, builtinHostPath } = deps.launchers;
  const gpuKey = spec.gpuKey ?? deps.gpuKey;
  // Held to its device through its environment; the profile's own variables win.
  const env = { ...pinningFor(spec.kind, gpuKey, spec.env, spec.vulkan).env, ...spec.env };
  const apiKey = secret === null ? [] : ['--api-key', secret];
  const paced = (command: string, args: readonly string[], activityUrl?: string): string[] => [
    cliPath,
    'run',
    '--gpu-key',
    gpuKey,
    '--weight',
    String(spec.weight),
    '--name',
    spec.name,
    '--exit-with-parent',
    ...(activityUrl === undefined ? [] : ['--activity-url', activityUrl]),
    '--',
    command,
    ...args,
  ];
  const model = spec.modelPath === null ? [] : ['-m', spec.modelPath];
  switch (spec.kind) {
    case 'builtin': {
      // Its own /v1/models names it as the gateway does: by the profile's name, its model id.
      if (spec.modelPath === null) throw new SupervisorError(`${spec.profileId}: a builtin engine needs a model path`);
      const args = [builtinHostPath, '--model', spec.modelPath, '--ctx', String(spec.contextSize), '--gpu-layers', String(spec.gpuLayers), '--port', '0', '--gpu-key', gpuKey, '--weight', String(spec.weight), '--name', spec.name, '--alias', spec.name];
      if (spec.threads !== null) args.push('--threads', String(spec.threads));
      const hostEnv = { ...builtinHostEnv(spec.threads), ...env };
      return { command: nodePath, args: [...BUILTIN_HOST_NODE_FLAGS, ...args, ...spec.args], env: secret === null ? hostEnv : { ...hostEnv, [ENGINE_SECRET_ENV]: secret } };
    }
    case 'llama-server': {
      // Its /metrics (with in-flight requests) tells activity; CPU time when it does not answer.
      // Started with an API key, its /metrics asks for it: `run` finds it on this command line.
      const args = [...model, '-c', String(spec.contextSize), '-ngl', String(spec.gpuLayers), '--metrics', ...apiKey, ...spec.args];
      return { command: nodePath, args: paced(spec.command ?? DEFAULT_EXECUTABLE['llama-server'], args, metricsUrlOf(spec)), env };
    }
    case 'llamafile':
      // Its server is llama.cpp's: /metrics when the profile's args hold --metrics (not every
      // llamafile knows the flag, so it is not added); CPU time otherwise.
      return { command: nodePath, args: paced(spec.command ?? DEFAULT_EXECUTABLE.llamafile, [...model, '-c', String(spec.contextSize), '-ngl', String(spec.gpuLayers), ...apiKey, ...spec.args], metricsUrlOf(spec)), env };
    case 'command':
      if (spec.command === null) throw new SupervisorError(`${spec.profileId}: a command engine needs a command`);
      return { command: nodePath, args: paced(spec.command, spec.args), env };
    case 'opencoti-llamafile':
      return { command: spec.command ?? DEFAULT_EXECUTABLE['opencoti-llamafile'], args: [...model, '-c', String(spec.contextSize), '-ngl', String(spec.gpuLayers), '--gpu-share-weight', String(spec.weight), ...spec.args], env };
  }
}

/** The port whose /health tells a llama.cpp server's readiness (llama-server, llamafile and
 *  opencoti-llamafile: their `--port`, else 8080); null for kinds without one. */
export function healthPortOf(spec: Pick<LaunchSpec, 'kind' | 'args'>): number | null {
  if (spec.kind !== 'llama-server' && spec.kind !== 'llamafile' && spec.kind !== 'opencoti-llamafile') return null;
  return serverPortOf(spec);
}

/** Does an engine of this spec answer HTTP on a port we know once it runs? Every kind but a
 *  command that declares no `--port` (the built-in engine reports its own port when ready). */
export function servesHttp(spec: Pick<LaunchSpec, 'kind' | 'args'>): boolean {
  return spec.kind !== 'command' || declaredPortOf(spec.args) !== null;
}

/** The port a llama.cpp server (llama-server, llamafile) listens on: `--port`, else 8080. */
function serverPortOf(spec: Pick<LaunchSpec, 'args'>): number {
  return declaredPortOf(spec.args) ?? LLAMA_SERVER_DEFAULT_PORT;
}

/** Where a llama.cpp server's activity is read. */
function metricsUrlOf(spec: Pick<LaunchSpec, 'args'>): string {
  return `http://127.0.0.1:${serverPortOf(spec)}/metrics`;
}

/** Ask `probe` every `everyMs` until it says yes (true), or `still()` turns false (the engine
 *  exited or is being stopped: false). */
async function pollUntil(probe: () => Promise<boolean>, still: () => boolean, everyMs: number): Promise<boolean> {
  while (still()) {
    if (await probe()) return true;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  return false;
}

/** How often a loading engine's /health is asked, and its declared port tried, until it answers. */
const HEALTH_POLL_MS = 250;
const LISTEN_POLL_MS = 100;

/** Does http://127.0.0.1:PORT/health answer 200? */
async function healthAnswers(port: number): Promise<boolean> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1_000) });
    return response.status === 200;
  } catch {
    return false; // not listening yet
  }
}

/** Does 127.0.0.1:PORT accept a TCP connection? For engines with a port but no /health we know of. */
function portAccepts(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export class Supervisor {
  private readonly engines = new Map<string, Engine>();
  private counter = 0;
  /** Crash restarts so far, per profile (reset when an engine of it runs for a minute). */
  private readonly restarts = new Map<string, number>();
  private readonly restartTimers = new Set<NodeJS.Timeout>();
  /** Ends by themselves per profile, and the profiles held as failed (crash-loop.ts). */
  private readonly crashRecords = new Map<string, CrashRecord>();
  private readonly failedProfiles = new Set<string>();
  private closed = false;

  constructor(private readonly deps: SupervisorDeps) {}

  list(): EngineStatus[] {
    return [...this.engines.values()].map((e) => copyStatus(e.status));
  }

  get(id: string): EngineStatus | undefined {
    const engine = this.engines.get(id);
    return engine === undefined ? undefined : copyStatus(engine.status);
  }

  /** The engines that hold (or are about to hold) memory on a device (every device when none is
   *  given), as the planner sees them. */
  residents(gpuKey?: string): ManagedResident[] {
    return [...this.engines.values()]
      .filter((e) => (e.status.state === 'loading' || e.status.state === 'running') && (gpuKey === undefined || e.status.gpuKey === gpuKey))
      .map((e) => ({
        id: e.status.id,
        pid: e.status.pid,
        priority: e.status.priority,
        pinned: e.status.pinned,
        busy: e.status.busy || e.status.state === 'loading' || (this.deps.inUse?.(e.status.id) ?? false),
        idleSinceUs: e.status.idleSinceUs,
        envelopeBytes: e.spec.peakBytes,
        weight: e.spec.weight,
      }));
  }

  /** The device a spec runs on. */
  deviceOf(spec: Pick<LaunchSpec, 'gpuKey'>): string {
    return spec.gpuKey ?? this.deps.gpuKey;
  }

  /** Plan only (a dry-run with our residents and leases counted) on the spec's device; a plan that
   *  does not place it there names another device that would (`elsewhere`). */
  plan(spec: LaunchSpec): PlacementPlan {
    const gpuKey = this.deviceOf(spec);
    const here = this.planOn(spec, gpuKey);
    if (!wantsElsewhere(here)) return here;
    const keys = this.deps.deviceKeys?.() ?? [this.deps.gpuKey];
    const others = keys.flatMap((key, index) => (key === gpuKey ? [] : [{ index, plan: this.planOn(spec, key) }]));
    return withElsewhere(here, others);
  }

  private planOn(spec: LaunchSpec, gpuKey: string): PlacementPlan {
    const request: PlanRequest = {
      capability: spec.capability,
      profileName: spec.name,
      modelKey: spec.modelKey,
      contextSize: spec.contextSize,
      ...(spec.trainContextSize === undefined ? {} : { trainContextSize: spec.trainContextSize }),
      gpuLayers: spec.gpuLayers,
      engineKind: spec.kind,
      priority: spec.priority,
      peakBytes: spec.peakBytes,
      peakSource: spec.peakSource,
      ...(spec.peakParts === undefined ? {} : { peakParts: spec.peakParts }),
      weight: spec.weight,
      ...(spec.modelProblem === undefined ? {} : { modelProblem: spec.modelProblem }),
      ...(spec.executableProblem === undefined ? {} : { executableProblem: spec.executableProblem }),
    };
    return planPlacement(request, this.plannerSnapshot(gpuKey), this.deps.policy);
  }

  /** Everything the planner reads about a device now: its telemetry, controls and pressure, with
   *  our residents and unexpired leases on it (what `gpu-share plan` asks a running serve for). */
  plannerSnapshot(gpuKey: string): PlannerSnapshot {
    const base = this.deps.snapshot(gpuKey);
    return { ...base, residents: this.residents(gpuKey), leases: this.deps.leases.active(base.nowUs, gpuKey) };
  }

  /** Plan, evict what the plan names, take a lease and start the engine. Resolves once it is
   *  running (or failed to start), or at once with the plan when it was not admitted. */
  async launch(spec: LaunchSpec, hooks: { onSpawned?: (engine: EngineStatus) => void; restart?: boolean } = {}): Promise<LaunchResult> {
    // An engine that keeps ending by itself is not started again before its back-off, nor at all
    // once failed, however many requests ask (the user's own start clears it: resetCrashes). Our
    // own restart is scheduled after the back-off already.
    const hold = this.crashHoldOf(spec.profileId);
    if (hold !== null && !(hold.kind === 'backoff' && hooks.restart === true)) throw new CrashLoopError(describeCrashHold(spec.name, hold, this.deps.clock.monoUs(), this.crashPolicy), hold);
    const placement = this.plan(spec);
    this.deps.onEvent?.({ kind: 'plan', plan: placement });
    if (placement.verdict !== 'ADMIT' && placement.verdict !== 'ADMIT_AFTER_EVICTION') return { plan: placement, engine: null };
    for (const eviction of placement.evictions) await this.stop(eviction.id);
    const id = `${spec.profileId}-${++this.counter}`;
    const now = this.deps.clock.wallUs();
    const leaseId = `lease-${id}`;
    const gpuKey = this.deviceOf(spec);
    this.deps.leases.take(leaseId, requirementBytes(spec.peakBytes, this.deps.policy), now, this.deps.policy.leaseTtlUs, gpuKey);
    const secret = this.deps.engineSecret === undefined ? newEngineSecret() : this.deps.engineSecret();
    let child: SpawnedProcess;
    try {
      child = this.deps.spawn(commandFor(spec, this.deps, secret));
    } catch (error) {
      this.deps.leases.release(leaseId);
      throw error;
    }
    let markExited: () => void = () => undefined;
    const exited = new Promise<void>((resolve) => (markExited = resolve));
    const engine: Engine = {
      spec,
      secret,
      process: child,
      leaseId,
      killTimer: null,
      exited,
      status: {
        id,
        profileId: spec.profileId,
        name: spec.name,
        kind: spec.kind,
        priority: spec.priority,
        pinned: spec.pinned,
        gpuKey,
        pid: child.pid,
        state: 'loading',
        progressPct: 0,
        port: null,
        exitCode: null,
        exitSignal: null,
        exitedAtUs: null,
        lastLines: [],
        startedAtUs: now,
        idleSinceUs: now,
        busy: false,
        residentBytes: null,
      },
    };
    this.engines.set(id, engine);
    this.emitState(engine);
    hooks.onSpawned?.(copyStatus(engine.status));
    let markReady: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => (markReady = resolve));
    /** Running once `probe` says the engine answers on `port`, asked every `everyMs` while it
     *  loads (ready either way when it stops loading). */
    const readyWhen = (port: number, probe: (port: number) => Promise<boolean>, everyMs: number): void => {
      engine.status.port = port;
      void pollUntil(() => probe(port), () => engine.status.state === 'loading', everyMs).then((answers) => {
        if (answers) this.becomeRunning(engine);
        markReady();
      });
    };
    child.onLine((stream, line) => {
      // Pacing figures are data, not log lines.
      const pacerFigures = stream === 'stderr' ? parsePacerLine(line) : null;
      if (pacerFigures !== null) return this.deps.onEvent?.({ kind: 'pacer', id, overshootsUs: pacerFigures });
      const event = stream === 'stdout' ? parseHostLine(line) : null;
      if (event?.event === 'pacer') return this.deps.onEvent?.({ kind: 'pacer', id, overshootsUs: event.overshoots_us });
      const ring = engine.status.lastLines;
      ring.push(line);
      if (ring.length > LOG_RING) ring.splice(0, ring.length - LOG_RING);
      this.deps.onEvent?.({ kind: 'log', id, stream, line });
      if (event?.event === 'progress') {
        engine.status.progressPct = Math.max(engine.status.progressPct, Math.min(100, event.pct));
        this.deps.onEvent?.({ kind: 'progress', id, pct: engine.status.progressPct });
      } else if (event?.event === 'ready') {
        engine.status.port = event.port;
        this.becomeRunning(engine);
        markReady();
      } else if (spec.kind !== 'builtin' && stream === 'stderr' && line.startsWith('gpu-share: joined ')) {
        const healthPort = healthPortOf(spec);
        const declared = declaredPortOf(spec.args);
        // A llama-server is ready when its /health says so (it may load for minutes); a command
        // that declares an HTTP port (where the gateway sends requests) once it listens; any other
        // paced command once it is started and holds its slot.
        if (healthPort !== null) readyWhen(healthPort, healthAnswers, HEALTH_POLL_MS);
        else if (declared !== null) readyWhen(declared, portAccepts, LISTEN_POLL_MS);
        else {
          this.becomeRunning(engine);
          markReady();
        }
      }
    });
    child.onExit((code, signal) => {
      if (engine.killTimer !== null) clearTimeout(engine.killTimer);
      engine.status.exitCode = code;
      engine.status.exitSignal = signal;
      engine.status.exitedAtUs = this.deps.clock.wallUs();
      engine.status.state = engine.status.state === 'stopping' ? 'stopped' : code === 0 && signal === null ? 'exited' : 'crashed';
      if (engine.leaseId !== null) this.deps.leases.release(engine.leaseId);
      engine.leaseId = null;
      this.emitState(engine);
      markReady();
      markExited();
      // Only the newest ended engine of a profile stays listed (with its last output).
      for (const [otherId, other] of this.engines) if (other !== engine && other.spec.profileId === spec.profileId && hasEnded(other.status.state)) this.engines.delete(otherId);
      if (engine.status.state === 'crashed' || engine.status.state === 'exited') this.recordCrash(engine);
      if (engine.status.state === 'crashed') this.maybeRestart(engine);
    });
    if (spec.kind === 'opencoti-llamafile') {
      // It paces itself (no `gpu-share run`, no "joined" line): ready when its /health says so.
      readyWhen(serverPortOf(spec), healthAnswers, HEALTH_POLL_MS);
    }
    await ready;
    return { plan: placement, engine: this.get(id) ?? null };
  }

  /** Resolves with its final status once the engine has exited (crashed or stopped). */
  async whenExited(id: string): Promise<EngineStatus> {
    const engine = this.require(id);
    await engine.exited;
    return copyStatus(engine.status);
  }

  /** Graceful stop: SIGTERM, then SIGKILL to its process group after 10 s. Resolves on exit. */
  async stop(id: string, graceMs = STOP_GRACE_MS): Promise<EngineStatus> {
    const engine = this.require(id);
    if (engine.status.state === 'stopped' || engine.status.state === 'exited' || engine.status.state === 'crashed') return copyStatus(engine.status);
    engine.status.state = 'stopping';
    this.emitState(engine);
    engine.process.signal('SIGTERM');
    engine.killTimer = setTimeout(() => engine.process.signalGroup('SIGKILL'), graceMs);
    await engine.exited;
    return copyStatus(engine.status);
  }

  /** SIGKILL at once (its whole process group). */
  async kill(id: string): Promise<EngineStatus> {
    const engine = this.require(id);
    if (engine.status.state === 'stopped' || engine.status.state === 'exited' || engine.status.state === 'crashed') return copyStatus(engine.status);
    engine.status.state = 'stopping';
    engine.process.signalGroup('SIGKILL');
    await engine.exited;
    return copyStatus(engine.status);
  }

  /**
   * The gateway's count of requests for an engine, passed to the `gpu-share run` that paces it
   * (its activity: known idle at 0). The built-in engine knows its own queue, and
   * opencoti-llamafile takes no commands. Quiet when the engine cannot be told: this is a hint.
   */
  setRequests(id: string, count: number): void {
    const engine = this.engines.get(id);
    if (engine === undefined || (engine.status.state !== 'running' && engine.status.state !== 'loading')) return;
    if (engine.spec.kind === 'builtin' || engine.spec.kind === 'opencoti-llamafile') return;
    engine.process.send(formatControl({ cmd: 'requests', inFlight: count }));
  }

  /**
   * A new weight for a running engine: its slot's writer (the engine host, or the `gpu-share run`
   * that paces it) takes it from its stdin and stores it at once. Later launches of the same spec
   * (restarts) use it too. `opencoti-llamafile` reads its weight only at start.
   */
  setWeight(id: string, weight: number): EngineStatus {
    const engine = this.require(id);
    if (engine.status.state !== 'running' && engine.status.state !== 'loading') throw new SupervisorError(`engine ${id} is ${engine.status.state}: no weight to set`);
    if (engine.spec.kind === 'opencoti-llamafile') throw new SupervisorError(`engine ${id} (opencoti-llamafile) takes its weight only at start`);
    if (!engine.process.send(formatControl({ cmd: 'weight', weight }))) throw new SupervisorError(`engine ${id} does not take commands (its stdin is closed)`);
    engine.spec = { ...engine.spec, weight };
    this.emitState(engine);
    return copyStatus(engine.status);
  }

  /** The secret an engine's port asks for (`Authorization: Bearer SECRET`); null: none. */
  secretOf(id: string): string | null {
    return this.require(id).secret;
  }

  /** The weight an engine runs with (its spec's, as last set). */
  weightOf(id: string): number {
    return this.require(id).spec.weight;
  }

  /** Stop every engine (quit); no restarts after this. */
  async stopAll(graceMs = STOP_GRACE_MS): Promise<void> {
    this.closed = true;
    for (const timer of this.restartTimers) clearTimeout(timer);
    this.restartTimers.clear();
    await Promise.all([...this.engines.keys()].map((id) => this.stop(id, graceMs)));
  }

  /**
   * Periodic upkeep (every few seconds): busy/idle from the registry, and idle unload of engines
   * idle for their profile's minutes (never a pinned one). Returns the ids it unloaded.
   */
  async tick(): Promise<string[]> {
    const now = this.deps.clock.wallUs();
    const unloads: Promise<EngineStatus>[] = [];
    const ids: string[] = [];
    for (const engine of this.engines.values()) {
      if (engine.status.state !== 'running') continue;
      const active = this.deps.isActive?.(engine.status) ?? null;
      if (active === true) {
        engine.status.busy = true;
        engine.status.idleSinceUs = now;
      } else if (active === false) {
        engine.status.busy = false;
      }
      // Running for a minute: earlier crashes of this profile no longer count against it.
      if (now - engine.status.startedAtUs >= 60_000_000) this.restarts.delete(engine.spec.profileId);
      const minutes = engine.spec.idleUnloadMinutes ?? null;
      const idleForUs = now - engine.status.idleSinceUs;
      if (!engine.spec.pinned && minutes !== null && !engine.status.busy && idleForUs >= minutes * 60_000_000) {
        this.deps.onEvent?.({ kind: 'idle-unload', id: engine.status.id, idleForUs });
        ids.push(engine.status.id);
        unloads.push(this.stop(engine.status.id));
      }
    }
    await Promise.all(unloads);
    // Ended engines leave the list after a while, unless their profile is held as failed (its row
    // keeps the last output until the user restarts it).
    for (const [id, engine] of this.engines) {
      if (hasEnded(engine.status.state) && engine.status.exitedAtUs !== null && now - engine.status.exitedAtUs >= ENDED_KEEP_US && !this.failedProfiles.has(engine.spec.profileId)) this.engines.delete(id);
    }
    return ids;
  }

  /** What holds a profile back now (back-off or failed); null when it may start. */
  crashHoldOf(profileId: string): CrashHold | null {
    return crashHold(this.crashRecords.get(profileId), this.failedProfiles.has(profileId), this.deps.clock.monoUs(), this.crashPolicy);
  }

  /** The user starts it again (dashboard Restart or Launch, an edit): earlier ends no longer count. */
  resetCrashes(profileId: string): void {
    this.crashRecords.delete(profileId);
    this.failedProfiles.delete(profileId);
  }

  private get crashPolicy(): CrashLoopPolicy {
    return this.deps.crashLoop ?? CRASH_LOOP_POLICY;
  }

  private recordCrash(engine: Engine): void {
    const profileId = engine.spec.profileId;
    const now = this.deps.clock.monoUs();
    const { exitCode, exitSignal, lastLines } = engine.status;
    // Its own last words: `gpu-share run`'s lines (joined, activity) say nothing about why.
    const own = lastLines.filter((l) => !l.startsWith('gpu-share: '));
    const words = (own.length > 0 ? own : lastLines).slice(-3).join(' / ');
    const last = `${exitSignal ?? `exit code ${String(exitCode)}`}${words === '' ? '' : `: ${words.slice(-300)}`}`;
    const atUs = [...recentCrashes(this.crashRecords.get(profileId)?.atUs ?? [], now, this.crashPolicy), now];
    this.crashRecords.set(profileId, { atUs, last });
    if (atUs.length >= this.crashPolicy.limit) this.failedProfiles.add(profileId);
    const hold = this.crashHoldOf(profileId);
    if (hold !== null) this.deps.onEvent?.({ kind: 'crash-loop', profileId, hold, message: describeCrashHold('', hold, now, this.crashPolicy) });
  }

  private maybeRestart(engine: Engine): void {
    const policy = engine.spec.restart ?? null;
    if (policy === null || this.closed || this.failedProfiles.has(engine.spec.profileId)) return;
    const attempt = (this.restarts.get(engine.spec.profileId) ?? 0) + 1;
    if (attempt > policy.maxRestarts) return;
    this.restarts.set(engine.spec.profileId, attempt);
    // Not before the crash loop's back-off either.
    const hold = this.crashHoldOf(engine.spec.profileId);
    const inMs = Math.max(policy.backoffMs * 2 ** (attempt - 1), hold?.kind === 'backoff' ? Math.ceil((hold.retryAtUs - this.deps.clock.monoUs()) / 1000) : 0);
    this.deps.onEvent?.({ kind: 'restart', id: engine.status.id, attempt, inMs });
    const timer = setTimeout(() => {
      this.restartTimers.delete(timer);
      if (!this.closed) void this.launch(engine.spec, { restart: true }).catch(() => undefined);
    }, inMs);
    this.restartTimers.add(timer);
  }

  private require(id: string): Engine {
    const engine = this.engines.get(id);
    // Only ids of engines we started exist here: nothing else can be signalled.
    if (engine === undefined) throw new SupervisorError(`no engine ${id} was started by this supervisor`);
    return engine;
  }

  private becomeRunning(engine: Engine): void {
    if (engine.status.state !== 'loading') return;
    // Some spawners (Electron's utility processes) learn the pid only once the process started.
    if (engine.process.pid > 0) engine.status.pid = engine.process.pid;
    engine.status.state = 'running';
    engine.status.progressPct = 100;
    const now = this.deps.clock.wallUs();
    engine.status.idleSinceUs = now;
    const resident = this.deps.residentBytes(engine.status.pid, engine.status.gpuKey);
    engine.status.residentBytes = resident;
    if (engine.leaseId !== null) this.deps.leases.release(engine.leaseId);
    engine.leaseId = null;
    if (resident !== null && resident > 0 && this.deps.envelopes !== null) {
      const s = engine.spec;
      this.deps.envelopes.recordMeasured({ modelKey: s.modelKey, contextSize: s.contextSize, gpuLayers: s.gpuLayers, engineKind: s.kind }, resident, now);
    }
    this.emitState(engine);
  }

  private emitState(engine: Engine): void {
    this.deps.onEvent?.({ kind: 'state', engine: copyStatus(engine.status) });
  }
}
