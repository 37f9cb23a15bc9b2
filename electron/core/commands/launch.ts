/**
 * `gpu-share launch PROFILE | --model FILE`: plan, launch and supervise one engine in the
 * foreground, with a progress bar while it loads; Ctrl-C stops it gracefully and says "stopped".
 * `gpu-share engines` lists the engines running for a data folder: those of `launch`, `serve` and
 * the app (engine-files.ts).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, join } from 'node:path';
import type { Clock } from '../clock.js';
import { describePlan } from '../planner/describe.js';
import { EnvelopeStore } from '../planner/envelopes.js';
import { LeaseBook } from '../planner/leases.js';
import { POLICY_M10_V1, type Priority } from '../planner/policy.js';
import { PressureTracker } from '../planner/pressure.js';
import { snapshotFromSample, usedFraction } from '../planner/snapshot.js';
import { discoverTelemetry } from '../telemetry/discovery.js';
import { residentBytesOf } from '../telemetry/resident.js';
import { ProfileStore, type Profile } from '../engines/profiles.js';
import { inspectModelFile } from '../planner/model-file.js';
import { defaultContextSize } from '../contract.js';
import { launchSpecFor } from '../engines/launch-spec.js';
import { spawnEngineProcess } from '../engines/spawn.js';
import { parseHostLine } from '../engines/host-protocol.js';
import { Supervisor, type LaunchSpec, type SupervisorEvent } from '../engines/supervisor.js';
import { checkDataDir } from '../data-files.js';
import { listEngineRecords, removeEngineFile, writeEngineFile } from '../engines/engine-files.js';
import { exitCodeForPlan, PlanCommandError } from './plan.js';
import { DeviceChoiceError } from './keys.js';
import { chooseGpuKey } from '../registry/keys.js';
import { chooseLaunchDevice, pinningFor } from '../engines/device-pinning.js';
import { lookUpVulkanDevice } from '../engines/vulkan-lookup.js';
import type { DeviceSample } from '../telemetry/types.js';
import { stopSignals, type CommandIo } from './io.js';

export interface LaunchOptions {
  profile: string | undefined;
  model: string | undefined;
  contextSize: number | undefined;
  weight: number | undefined;
  priority: Priority | undefined;
  simFile: string | undefined;
  dataDir: string;
  threads: number | undefined;
  launchers: { nodePath: string; cliPath: string; builtinHostPath: string };
  /** The engine's own HTTP port (built-in and llama-server engines); undefined = its default. */
  port?: number | undefined;
  /** What requests that run the model must send as `Authorization: Bearer KEY` (llama-server's
   *  `--api-key`); undefined: nothing, the port takes any request on loopback. */
  apiKey?: string | undefined;
  /** The device to launch on (--gpu-key, used as given; --gpu N, the N-th found); neither: the
   *  profile's preferred device while present, else the one with the most free memory. */
  gpuKey?: string | undefined;
  gpu?: number | undefined;
  /** Draw the progress bar in place (a terminal) rather than a line per 10 %. */
  tty: boolean;
}

/** Engine arguments with `--port N` in place of any they had. Pure. */
export function withPort(args: readonly string[], port: number): string[] {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--port') i++;
    else if (!(args[i] ?? '').startsWith('--port=')) kept.push(args[i] ?? '');
  }
  return [...kept, '--port', String(port)];
}

/** A profile, or an ad-hoc built-in one for --model. */
async function resolveProfile(options: LaunchOptions): Promise<Profile> {
  if (options.profile !== undefined) {
    // Opening the store creates the data folder and an empty profiles file: a command that only
    // reads (and may fail) must leave a machine as it found it.
    const file = join(options.dataDir, 'profiles.json');
    if (!existsSync(file)) throw new PlanCommandError(`no profile "${options.profile}": none are defined in ${file} (add one in the dashboard of gpu-share serve, or launch --model FILE.gguf)`);
    const store = new ProfileStore({ dataDir: options.dataDir });
    const profile = profileNamed(store.list(), options.profile);
    if (profile === undefined) {
      const known = store.list().map((p) => (p.name === p.id ? p.id : `${p.id} (${p.name})`));
      throw new PlanCommandError(`no profile "${options.profile}"; ${known.length ? `profiles: ${known.join(', ')}` : `none are defined in ${store.file}`}`);
    }
    return profile;
  }
  if (options.model === undefined) throw new PlanCommandError('give a profile id or --model FILE.gguf');
  if (!existsSync(options.model)) throw new PlanCommandError(`--model: no such file: ${options.model}`);
  const name = basename(options.model).replace(/\.gguf$/i, '').slice(0, 40) || 'model';
  const check = await inspectModelFile(options.model);
  return {
    id: name.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '') || 'model',
    name,
    capabilities: ['chat'],
    engineKind: 'builtin',
    modelPath: options.model,
    contextSize: options.contextSize ?? defaultContextSize(check.ok ? check.facts.trainContextSize : null),
    gpuLayers: 99,
    threads: options.threads ?? null,
    weight: null,
    priority: options.priority ?? 'interactive',
    pinned: false,
    idleUnloadMinutes: null,
    args: [],
    env: {},
    command: null,
    gpuKey: null,
  };
}

/** The profile `launch` names: by its id, else by its name (a model id; names are unique, letter
 *  case aside). Pure. */
export function profileNamed(profiles: readonly Profile[], wanted: string): Profile | undefined {
  return profiles.find((p) => p.id === wanted) ?? profiles.find((p) => p.name.toLowerCase() === wanted.toLowerCase());
}

/** Kinds whose port `launch --api-key` can protect (the built-in engine and llama.cpp's servers). */
const TAKES_API_KEY: ReadonlySet<string> = new Set(['builtin', 'llama-server', 'llamafile']);

/** A warning from an engine's side: the built-in host's warn/error events, `gpu-share run`'s lines. */
export function engineWarning(stream: 'stdout' | 'stderr', line: string): string | null {
  if (stream === 'stderr') return line.startsWith('gpu-share: ') ? line.slice('gpu-share: '.length) : null;
  const event = parseHostLine(line);
  return event?.event === 'log' && event.level !== 'info' ? event.message : null;
}

export function progressBar(pct: number, width = 30): string {
  const filled = Math.round((Math.max(0, Math.min(100, pct)) / 100) * width);
  return `[${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${String(Math.round(pct)).padStart(3)} %`;
}

/** The device `launch` runs an engine on: --gpu-key as given, --gpu N the N-th device found, else
 *  the profile's preferred device while present, else the one with the most free memory. */
export function launchDeviceOf(options: Pick<LaunchOptions, 'gpuKey' | 'gpu'>, profile: Pick<Profile, 'gpuKey'>, samples: readonly DeviceSample[]): string {
  let requested: string | undefined;
  if (options.gpuKey !== undefined || options.gpu !== undefined) {
    const chosen = chooseGpuKey(options, samples.map((s, index) => ({ index, key: s.key, name: s.name })));
    if (!chosen.ok) throw new DeviceChoiceError(chosen.message);
    requested = chosen.value;
  }
  const devices = samples.map((s) => ({ key: s.key, freeBytes: s.health === 'FAILED' || s.totalBytes <= 0 ? null : s.totalBytes - s.usedBytes }));
  return chooseLaunchDevice({ requested, preferred: profile.gpuKey, devices })?.key ?? 'cpu-0';
}

export async function runLaunch(options: LaunchOptions, io: CommandIo, clock: Clock): Promise<number> {
  // It writes its engine's record there: a folder of ours only (data-files.ts). A folder that is
  // not there yet is made (0700) only once an engine starts, so that a failure writes nothing.
  const folder = checkDataDir(options.dataDir, { create: false });
  if (folder.tightened !== null) io.err(folder.tightened);
  const profile = await resolveProfile(options);
  const { provider, reason } = discoverTelemetry({ simFile: options.simFile, wallUs: () => clock.wallUs() });
  const pressure = new PressureTracker(POLICY_M10_V1);
  let samples: DeviceSample[];
  let gpuKey: string;
  try {
    samples = provider.sample();
    gpuKey = launchDeviceOf(options, profile, samples);
  } catch (error) {
    provider.close();
    throw error;
  }
  const sampleNow = (key: string = gpuKey): DeviceSample | null => provider.sample().find((s) => s.key === key) ?? null;
  io.err(`telemetry: ${reason}`);

  const envelopes = new EnvelopeStore(join(options.dataDir, 'envelopes.json'));
  const resolved = await launchSpecFor(profile, envelopes, { weight: options.weight, priority: options.priority, contextSize: options.contextSize, threads: options.threads });
  if (options.port !== undefined && resolved.kind !== 'builtin' && resolved.kind !== 'llama-server') throw new PlanCommandError(`--port: a ${resolved.kind} engine listens where its own arguments say; --port is for built-in and llama-server engines`);
  if (options.apiKey !== undefined && !TAKES_API_KEY.has(resolved.kind)) throw new PlanCommandError(`--api-key: a ${resolved.kind} engine's port is its own (give the key in its arguments); --api-key is for built-in, llama-server and llamafile engines`);
  // The engine's port, the last of its arguments (the built-in host and llama-server take the last).
  const ported = options.port === undefined ? resolved : { ...resolved, args: withPort(resolved.args, options.port) };
  // Where its GPU is in Vulkan's order, for a Vulkan build of the engine.
  const spec: LaunchSpec = { ...ported, vulkan: await lookUpVulkanDevice(gpuKey, provider) };

  let lastDrawn = -10;
  const onEvent = (event: SupervisorEvent): void => {
    if (event.kind === 'progress') {
      if (options.tty) io.err(`\x1b[1A\x1b[2Kloading ${profile.name} ${progressBar(event.pct)}`);
      else if (event.pct >= lastDrawn + 10 || event.pct === 100) {
        lastDrawn = event.pct;
        io.err(`loading ${profile.name} ${progressBar(event.pct)}`);
      }
    } else if (event.kind === 'log') {
      // What the engine's side says that the user must know: it runs unpaced (a registry it may
      // not use, a full one), its heartbeat failed.
      const warning = engineWarning(event.stream, event.line);
      if (warning !== null) io.err(`${profile.name}: ${warning}`);
    }
  };
  const supervisor = new Supervisor({
    clock,
    policy: POLICY_M10_V1,
    leases: new LeaseBook(),
    envelopes,
    snapshot: (key) => {
      const sample = sampleNow(key);
      // One tracker, for the device it runs on; another device's level is judged on this sample alone.
      const tracker = key === gpuKey ? pressure : new PressureTracker(POLICY_M10_V1);
      const level = sample === null ? 'NORMAL' : tracker.observe(usedFraction(sample), clock.monoUs());
      return snapshotFromSample({ nowUs: clock.wallUs(), node: hostname(), gpuKey: key, sample, pressure: level });
    },
    spawn: spawnEngineProcess,
    // No gateway here: the port asks for the user's key, or for nothing (loopback only either way).
    engineSecret: () => options.apiKey ?? null,
    launchers: options.launchers,
    gpuKey,
    deviceKeys: () => samples.map((s) => s.key),
    residentBytes: (pid) => residentBytesOf(provider, pid, [], () => sampleNow()),
    onEvent,
  });
  if (options.tty) io.err('');
  const pinning = pinningFor(spec.kind, gpuKey, spec.env, spec.vulkan);
  if (pinning.note !== null) io.err(`${profile.name}: ${pinning.note}`);
  // A second Ctrl-C while it stops: kill it at once.
  let engineId: string | null = null;
  const signals = stopSignals(() => {
    if (engineId !== null) void supervisor.kill(engineId).catch(() => undefined);
  });
  try {
    // The data folder (envelopes, the engine file) only once an engine starts: a refused plan or
    // a bad flag writes nothing. Owner-only, as DESIGN.md's trust rules say.
    let folderProblem: unknown = null;
    const makeDataFolder = (): void => {
      try {
        mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
      } catch (error) {
        folderProblem = error;
      }
    };
    const result = await supervisor.launch(spec, { onSpawned: makeDataFolder });
    if (folderProblem !== null) {
      if (result.engine !== null) await supervisor.kill(result.engine.id).catch(() => undefined);
      throw new PlanCommandError(`--data-dir: cannot create ${options.dataDir}: ${folderProblem instanceof Error ? folderProblem.message : String(folderProblem)}`);
    }
    if (result.engine === null) {
      io.out(describePlan(result.plan).trimEnd());
      return exitCodeForPlan(result.plan);
    }
    const engine = result.engine;
    engineId = engine.id;
    if (engine.state !== 'running') {
      io.err(`gpu-share: ${profile.name} exited while starting (${engine.exitSignal ?? `exit code ${engine.exitCode}`}); last lines:\n  ${engine.lastLines.slice(-10).join('\n  ')}`);
      return 1;
    }
    try {
      writeEngineFile(options.dataDir, { id: engine.id, profileId: profile.id, name: profile.name, kind: profile.engineKind, pid: engine.pid, supervisorPid: process.pid, port: engine.port, gpuKey, startedAt: new Date().toISOString(), priority: spec.priority, weight: spec.weight, peakBytes: spec.peakBytes });
    } catch (error) {
      // The engine runs all the same; only `gpu-share engines` and other plans will not see it.
      io.err(`gpu-share: the engine's record was not written (${error instanceof Error ? error.message : String(error)}); gpu-share engines will not list it`);
    }
    io.out(`running: ${profile.name} (${profile.engineKind}, pid ${engine.pid}, weight ${spec.weight})${engine.port === null ? '' : ` at http://127.0.0.1:${engine.port}`}; Ctrl-C stops it`);
    const final = await Promise.race([signals.stopped.then(() => supervisor.get(engine.id)), supervisor.whenExited(engine.id)]);
    removeEngineFile(options.dataDir, process.pid, engine.id);
    if (final?.state === 'crashed') {
      io.err(`gpu-share: ${profile.name} crashed (${final.exitSignal ?? `exit code ${final.exitCode}`}); last lines:\n  ${final.lastLines.slice(-10).join('\n  ')}`);
      return 1;
    }
    io.err(`stopping ${profile.name}… (again to stop it at once)`);
    await supervisor.stopAll();
    io.err(`stopped ${profile.name}`);
    return 0;
  } finally {
    signals.release();
    provider.close();
  }
}

export function runEngines(options: { dataDir: string; json: boolean }, io: CommandIo): number {
  // Read only: no lock, nothing created; another user's folder is refused all the same.
  checkDataDir(options.dataDir, { create: false });
  const { engines, unreadable } = listEngineRecords(options.dataDir);
  if (options.json) {
    io.out(JSON.stringify({ engines, unreadable }));
    return 0;
  }
  // Records that cannot be read while their supervisor runs: an engine is there all the same.
  for (const u of unreadable) io.err(`gpu-share: engine record ${u.file} cannot be read (${u.problem}); its supervisor (pid ${u.supervisorPid}) is running`);
  if (engines.length === 0) {
    if (unreadable.length > 0) return 0;
    // A folder that is not there is usually a mistyped --data-dir: say which one was read.
    const where = existsSync(options.dataDir) ? '' : ` in ${options.dataDir} (no such folder: serve and launch keep engines in their --data-dir)`;
    io.out(`no engines running${where} (start one with: gpu-share launch PROFILE or --model FILE.gguf)`);
    return 0;
  }
  io.out('NAME                 KIND          PID     PORT   DEVICE        SINCE');
  for (const e of engines) {
    io.out(`${e.name.padEnd(20)} ${e.kind.padEnd(13)} ${String(e.pid).padEnd(7)} ${String(e.port ?? '—').padEnd(6)} ${e.gpuKey.slice(0, 13).padEnd(13)} ${e.startedAt}`);
  }
  return 0;
}
