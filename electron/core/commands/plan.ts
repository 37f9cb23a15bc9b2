/**
 * `gpu-share plan`: a dry-run of the planner for one model on this machine's device. Prints the
 * verdict, the reasons and the VRAM breakdown (or the PlacementPlan as JSON). Exit code: 0 admitted
 * (possibly after evictions), 3 queued, 4 rejected.
 *
 * One planner: it plans with the inputs `/api/plan` would use on the same data folder. When a
 * `serve` or the app runs for the folder (it answers on the settings' port, 127.0.0.1, with the
 * folder's token), the operator controls, live leases, residents, pressure, gateway line, policy
 * revision and telemetry sample are asked of it (`GET /api/plan-inputs`), so the same state gives
 * the same verdict, reasons and fingerprint from both. Otherwise they come from the folder's files
 * (settings.json: drain, lab pause, policy revision; engines/: residents) and this machine's
 * telemetry. The plan's `inputs` says which, and why.
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import { describePlan } from '../planner/describe.js';
import { EnvelopeStore } from '../planner/envelopes.js';
import { ModelFileError, modelPeak, type ModelPeak } from '../planner/estimate.js';
import { inspectModelFile, type ModelProblem } from '../planner/model-file.js';
import { defaultContextSize, PLAN_INPUTS_PATH, type PlanInputs } from '../contract.js';
import { plan } from '../planner/plan.js';
import { DEFAULT_POLICY, KNOWN_REVISIONS_TEXT, policyByRevision, revisionNamed, type PlannerPolicy, type Priority } from '../planner/policy.js';
import { PressureTracker } from '../planner/pressure.js';
import { snapshotFromSample, usedFraction } from '../planner/snapshot.js';
import { PlannerInputError, type PlacementPlan, type PlannerSnapshot, type PlanInputsSource, type PlanRequest } from '../planner/types.js';
import type { DeviceSample } from '../telemetry/types.js';
import { discoverTelemetry } from '../telemetry/discovery.js';
import { trackEngineTrees } from '../telemetry/resident.js';
import { engineTreesOf, foldEngineTrees } from '../telemetry/engine-trees.js';
import { checkDataDir } from '../data-files.js';
import { readFolderSettings, type FolderSettings } from '../settings.js';
import { listEngines, residentsSupervisedElsewhere } from '../engines/engine-files.js';
import type { CommandIo } from './io.js';

export interface PlanOptions {
  model: string;
  /** undefined: the model's default context (defaultContextSize). */
  contextSize: number | undefined;
  gpuLayers: number;
  priority: Priority;
  capability: string;
  engineKind: string;
  /** The weight the engine would join the registry with. */
  weight: number;
  simFile: string | undefined;
  /** `--gpu-key K` (or its alias `--device K`): the device by registry key. */
  gpuKey: string | undefined;
  /** `--gpu N`: the N-th device (in the order `gpu-share devices` lists them). */
  gpu: number | undefined;
  dataDir: string;
  json: boolean;
  /** The API port to ask instead of the settings' (GPU_SHARE_API_PORT: the app's one-run port). */
  apiPort?: number | undefined;
}

export const PLAN_EXIT = { ADMITTED: 0, QUEUED: 3, REJECTED: 4 } as const;

export function exitCodeForPlan(p: PlacementPlan): number {
  if (p.verdict === 'ADMIT' || p.verdict === 'ADMIT_AFTER_EVICTION') return PLAN_EXIT.ADMITTED;
  return p.verdict === 'QUEUE' ? PLAN_EXIT.QUEUED : PLAN_EXIT.REJECTED;
}

/** A bad flag value found while running (a missing model file, an unknown device): exit code 2. */
export class PlanCommandError extends Error {
  override readonly name = 'PlanCommandError';
}

/** The answer of a running serve or app, or why there is none to use. */
type ServeAnswer = { ok: true; inputs: PlanInputs; url: string } | { ok: false; why: string };

async function askServe(port: number, token: string, gpuKey: string | undefined): Promise<ServeAnswer> {
  const url = `http://127.0.0.1:${port}${PLAN_INPUTS_PATH}${gpuKey === undefined ? '' : `?gpuKey=${encodeURIComponent(gpuKey)}`}`;
  let response: Response;
  try {
    response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(3_000) });
  } catch {
    return { ok: false, why: `no serve or app answers on 127.0.0.1:${port}` };
  }
  const text = await response.text().catch(() => '');
  if (response.status === 401 || response.status === 403) return { ok: false, why: `the server on 127.0.0.1:${port} does not take this folder's token (a serve for another data folder?)` };
  if (response.status === 404) return { ok: false, why: `the server on 127.0.0.1:${port} has no ${PLAN_INPUTS_PATH} (another program, or an older GPU Share)` };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, why: `the server on 127.0.0.1:${port} answered ${response.status} with no JSON` };
  }
  if (response.status === 400) {
    const message = (body as { error?: { message?: unknown } } | null)?.error?.message;
    throw new PlanCommandError(`--gpu-key: ${typeof message === 'string' ? message.replace(/^gpuKey: /, '') : `refused by the serve on port ${port}`}`);
  }
  if (!response.ok) return { ok: false, why: `the server on 127.0.0.1:${port} answered ${response.status}` };
  const inputs = body as Partial<PlanInputs> | null;
  if (inputs === null || typeof inputs !== 'object' || typeof inputs.dataDir !== 'string' || typeof inputs.policy !== 'string' || !Array.isArray(inputs.devices) || inputs.snapshot === null || typeof inputs.snapshot !== 'object') {
    return { ok: false, why: `the server on 127.0.0.1:${port} answered ${PLAN_INPUTS_PATH} without the planner's inputs` };
  }
  return { ok: true, inputs: inputs as PlanInputs, url: `http://127.0.0.1:${port}` };
}

const sameFolder = (a: string, b: string): boolean => {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
};

/** The inputs from a running serve or app for the folder, or null (and why) when none answers. */
async function inputsFromServe(options: PlanOptions, settings: FolderSettings): Promise<{ snapshot: PlannerSnapshot; policy: PlannerPolicy; source: PlanInputsSource } | { why: string }> {
  const port = options.apiPort ?? settings.apiPort;
  if (port === null || settings.apiToken === null) return { why: settings.problem ?? 'the settings name no API port or token' };
  let answer = await askServe(port, settings.apiToken, options.gpuKey);
  if (answer.ok && options.gpu !== undefined) {
    const device = answer.inputs.devices[options.gpu];
    if (device === undefined) throw new PlanCommandError(`--gpu ${options.gpu}: the serve for this folder has ${answer.inputs.devices.length} device(s) (${answer.inputs.devices.map((d, i) => `${i}: ${d.key}`).join(', ')})`);
    if (device.key !== answer.inputs.snapshot.accelerator.key) answer = await askServe(port, settings.apiToken, device.key);
  }
  if (!answer.ok) return { why: answer.why };
  if (!sameFolder(answer.inputs.dataDir, options.dataDir)) return { why: `the server on 127.0.0.1:${port} runs for ${answer.inputs.dataDir}, not this folder` };
  const policy = policyByRevision(answer.inputs.policy);
  if (policy === null) return { why: `the serve for this folder runs policy ${answer.inputs.policy}, which this build does not know` };
  return { snapshot: answer.inputs.snapshot, policy, source: { from: 'serve', url: answer.url, dataDir: answer.inputs.dataDir } };
}

export async function runPlan(options: PlanOptions, io: CommandIo, clock: Clock): Promise<number> {
  checkDataDir(options.dataDir, { create: false });
  if (!existsSync(options.model) || !statSync(options.model).isFile()) throw new PlanCommandError(`--model: no such file: ${options.model}`);
  // The model file first: one that cannot load is planned as REJECT_HEALTH with the problem's code.
  const check = await inspectModelFile(options.model);
  const contextSize = options.contextSize ?? defaultContextSize(check.ok ? check.facts.trainContextSize : null);
  // The peak next (an estimate loads llama.cpp, ~1 s), so that the telemetry sample is fresh.
  const unusable = (problem: ModelProblem): Pick<ModelPeak, 'modelKey' | 'peakBytes' | 'peakSource' | 'estimate' | 'sizeBytes' | 'parts'> => ({ modelKey: 'unusable', sizeBytes: problem.fileBytes ?? 0, peakBytes: Math.max(1, problem.fileBytes ?? 1), peakSource: 'ESTIMATED', estimate: null, parts: null });
  let modelProblem: ModelProblem | null = check.ok ? null : check.problem;
  let peak = modelProblem === null ? null : unusable(modelProblem);
  if (peak === null) {
    try {
      peak = await modelPeak(new EnvelopeStore(join(options.dataDir, 'envelopes.json')), options.model, { contextSize, gpuLayers: options.gpuLayers, engineKind: options.engineKind }, { checked: check.ok ? check.facts : undefined });
    } catch (error) {
      // node-llama-cpp's parser (in its child) refused the file or died on it.
      if (!(error instanceof ModelFileError)) throw error;
      modelProblem = error.problem;
      peak = unusable(modelProblem);
    }
  }
  const { estimate } = peak;
  const request: PlanRequest = {
    capability: options.capability,
    modelKey: peak.modelKey,
    contextSize,
    ...(check.ok ? { trainContextSize: check.facts.trainContextSize } : {}),
    gpuLayers: options.gpuLayers,
    engineKind: options.engineKind,
    priority: options.priority,
    peakBytes: peak.peakBytes,
    peakSource: peak.peakSource,
    ...(peak.parts === null ? {} : { peakParts: peak.parts }),
    weight: options.weight,
    ...(modelProblem === null ? {} : { modelProblem }),
  };

  const settings = readFolderSettings(options.dataDir);
  const fromServe = await inputsFromServe(options, settings);
  let result: PlacementPlan;
  let telemetryLine: string;
  if ('snapshot' in fromServe) {
    try {
      result = { ...plan(request, fromServe.snapshot, fromServe.policy), inputs: fromServe.source };
    } catch (error) {
      if (error instanceof PlannerInputError) throw new PlanCommandError(`the serve's planner inputs are not usable: ${error.message}`);
      throw error;
    }
    telemetryLine = `telemetry: the serve's latest sample of ${fromServe.snapshot.accelerator.key}`;
  } else {
    if (settings.problem !== null && !settings.problem.startsWith('no ')) io.err(`gpu-share: ${settings.problem}; its other fields are used, defaults for the rest`);
    const planned = planFromFiles(request, options, settings, fromServe.why, clock);
    result = planned.plan;
    telemetryLine = `telemetry: ${planned.reason}`;
  }
  if (options.json) {
    io.out(JSON.stringify(result));
  } else {
    io.out(telemetryLine);
    if (estimate !== null) io.out(`estimate: ${options.model} (${peak.sizeBytes} B on disk), from the file, in ${estimate.basis === 'gpuVram' ? 'VRAM' : 'RAM (no GPU build here)'}`);
    io.out(describePlan(result).trimEnd());
  }
  return exitCodeForPlan(result);
}

/** No serve or app runs for the folder: its files and this machine's telemetry. */
function planFromFiles(request: PlanRequest, options: PlanOptions, settings: FolderSettings, why: string, clock: Clock): { plan: PlacementPlan; reason: string } {
  let policy: PlannerPolicy = DEFAULT_POLICY;
  if (settings.policyRevision !== null) {
    const known = revisionNamed(settings.policyRevision);
    if (known === undefined) throw new PlanCommandError(`${join(options.dataDir, 'settings.json')}: policyRevision ${JSON.stringify(settings.policyRevision)} is not a revision this build knows (${KNOWN_REVISIONS_TEXT})`);
    policy = known;
  }
  const { provider, reason } = discoverTelemetry({ simFile: options.simFile, wallUs: () => clock.wallUs() });
  try {
    // Engines that `launch`, `serve` or the app run for this data folder are ours, not external:
    // their whole process trees.
    const running = listEngines(options.dataDir);
    const trees = engineTreesOf(running.map((e) => e.pid));
    trackEngineTrees(provider, trees);
    const samples: DeviceSample[] = provider.sample().map((s) => foldEngineTrees(s, trees));
    let sample: DeviceSample | null;
    if (options.gpu !== undefined) {
      sample = samples[options.gpu] ?? null;
      if (sample === null) throw new PlanCommandError(`--gpu ${options.gpu}: this machine has ${samples.length} device(s) (${samples.map((s, i) => `${i}: ${s.key}`).join(', ') || 'none'})`);
    } else if (options.gpuKey !== undefined) {
      sample = samples.find((s) => s.key === options.gpuKey) ?? null;
      if (sample === null) throw new PlanCommandError(`--gpu-key: no device ${options.gpuKey}; this machine has ${samples.map((s) => s.key).join(', ') || 'none'}`);
    } else {
      sample = samples[0] ?? null;
    }
    const gpuKey = sample?.key ?? options.gpuKey ?? 'cpu-0';
    const pressure = new PressureTracker(policy);
    const level = sample === null ? 'NORMAL' : pressure.observe(usedFraction(sample), clock.monoUs());
    const nowUs = clock.wallUs();
    // The engines other processes run for this folder count (it cannot stop them); no loads in
    // progress or gateway line are known without a serve.
    const snapshot: PlannerSnapshot = { ...snapshotFromSample({ nowUs, node: hostname(), gpuKey, sample, pressure: level, controls: settings.controls }), residents: residentsSupervisedElsewhere(running, gpuKey, nowUs), leases: [] };
    return { plan: { ...plan(request, snapshot, policy), inputs: { from: 'files', dataDir: options.dataDir, why } }, reason };
  } finally {
    provider.close();
  }
}
