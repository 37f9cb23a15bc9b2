/**
 * What the composition root (app.ts) takes and gives: the Electron main process and
 * `gpu-share serve` both build the core through `startCore(options)`.
 */
import type { RegistryHelper } from '../../native/helper.js';
import type { GpuShareApi, AppState, EngineView, LaunchOutcome, PlanInputs, Profile, ProfileFailure, ProfileInput, ProfilePatch } from './contract.js';
import type { PlannerPolicy } from './planner/policy.js';
import type { GpuPeersView } from './registry/view.js';
import type { SpawnRequest, SpawnedProcess } from './engines/supervisor.js';
import type { SettingsStore } from './settings.js';

export interface CoreLaunchers {
  /** The executable that runs a JS file as Node (node; in the app, not used: see spawn). */
  nodePath: string;
  /** dist/electron/cli.js: `gpu-share run` paces command-like engines. */
  cliPath: string;
  /** dist/electron/core/engines/builtin/engine-host.js. */
  builtinHostPath: string;
}

export interface CoreOptions {
  /** Holds profiles.json, envelopes.json, plans; settings live in `settings`. */
  dataDir: string;
  settings: SettingsStore;
  /** A simulated-telemetry file (--sim); else $GPU_SHARE_SIM, NVML, metal-0 or cpu-0. */
  simFile?: string | undefined;
  helper: RegistryHelper;
  launchers: CoreLaunchers;
  /** How engine processes start (the app passes a utilityProcess-based one for Node scripts). */
  spawn?: (request: SpawnRequest) => SpawnedProcess;
  /** Lines for the log (telemetry choice, engine crashes); default stderr. */
  log?: (line: string) => void;
  /** The planner's policy: m10-v1 unless an operator override is given (withQueueDepth). */
  policy?: PlannerPolicy;
}

export interface GatewayView {
  readonly depth: number;
  readonly limit: number;
  serving(engineId: string): boolean;
}

export interface Core extends GpuShareApi {
  /** 'remote': made over HTTP, which may not choose what runs (no command profiles, only
   *  executables found on this machine, no loader environment); the IPC window and the CLI are
   *  local. */
  createProfile(input: ProfileInput, from?: 'local' | 'remote'): Promise<Profile>;
  updateProfile(id: string, patch: ProfilePatch, from?: 'local' | 'remote'): Promise<Profile>;
  /** The current state, synchronously (the tray menu is rebuilt from it). */
  snapshot(): AppState;
  /** The engines GPU Share runs, without the rest of the state (the gateway asks per request). */
  engines(): EngineView[];
  /** The saved profiles, synchronously. */
  profileList(): Profile[];
  /** Why the profile's last load failed; null when it did not (or was edited or retried since). */
  profileFailure(profileId: string): ProfileFailure | null;
  /** A launch on a request's behalf (the gateway): unlike `launch`, it does not retry a failed
   *  profile; a load that fails marks the profile failed all the same. */
  launchOnDemand(profileId: string): Promise<LaunchOutcome>;
  /** The secret an engine's own port asks for (the gateway sends it); null for an unknown id. */
  engineSecret(engineId: string): string | null;
  readonly settings: SettingsStore;
  readonly dataDir: string;
  /** The one versioned policy the planner and the gateway's queue follow. */
  readonly policy: PlannerPolicy;
  /** Everything the planner reads for a device now (`GET /api/plan-inputs`, for `gpu-share plan`);
   *  an unknown device is a BAD_REQUEST naming the known ones. */
  planInputs(gpuKey?: string): PlanInputs;
  /** The registry issue's `/gpu/peers` object for a device (the first device by default). */
  peersView(gpuKey?: string): GpuPeersView;
  /** The gateway's queue figures for the state, and which engines it is serving a request on
   *  (those count as busy for the planner: never evicted mid-answer). */
  attachGateway(gateway: GatewayView): void;
  /** The gateway has `count` requests for an engine (answered now or waiting): its activity. */
  engineRequests(engineId: string, count: number): void;
  /** Tell the core which port the API listens on (it is in the state for the dashboard). */
  setApiPort(port: number | null): void;
  /** Stop every engine gracefully (quit), free the registry and telemetry. */
  close(): Promise<void>;
}
