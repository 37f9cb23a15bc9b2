/**
 * `gpu-share plan`: a dry-run of the planner for one model on this machine's device. Prints the
 * verdict, the reasons and the VRAM breakdown (or the PlacementPlan as JSON). Exit code: 0 admitted
 * (possibly after evictions), 3 queued, 4 rejected.
 */
import { existsSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../clock.js';
import { describePlan } from '../planner/describe.js';
import { EnvelopeStore } from '../planner/envelopes.js';
import { modelPeak, type ModelPeak } from '../planner/estimate.js';
import { inspectModelFile } from '../planner/model-file.js';
import { defaultContextSize } from '../contract.js';
import { plan } from '../planner/plan.js';
import { POLICY_M10_V1, type Priority } from '../planner/policy.js';
import { PressureTracker } from '../planner/pressure.js';
import { snapshotFromSample, usedFraction } from '../planner/snapshot.js';
import type { PlacementPlan } from '../planner/types.js';
import { discoverTelemetry } from '../telemetry/discovery.js';
import { trackEngineTrees } from '../telemetry/resident.js';
import { engineTreesOf, foldEngineTrees } from '../telemetry/engine-trees.js';
import { checkDataDir } from '../data-files.js';
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
  deviceKey: string | undefined;
  dataDir: string;
  json: boolean;
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

export async function runPlan(options: PlanOptions, io: CommandIo, clock: Clock): Promise<number> {
  checkDataDir(options.dataDir, { create: false });
  if (!existsSync(options.model) || !statSync(options.model).isFile()) throw new PlanCommandError(`--model: no such file: ${options.model}`);
  // The model file first: one that cannot load is planned as REJECT_HEALTH with the problem's code.
  const check = await inspectModelFile(options.model);
  const contextSize = options.contextSize ?? defaultContextSize(check.ok ? check.facts.trainContextSize : null);
  // The peak next (an estimate loads llama.cpp, ~1 s), so that the telemetry sample is fresh.
  const peak: Pick<ModelPeak, 'modelKey' | 'peakBytes' | 'peakSource' | 'estimate' | 'sizeBytes' | 'parts'> = check.ok
    ? await modelPeak(new EnvelopeStore(join(options.dataDir, 'envelopes.json')), options.model, { contextSize, gpuLayers: options.gpuLayers, engineKind: options.engineKind })
    : { modelKey: 'unusable', sizeBytes: check.problem.fileBytes ?? 0, peakBytes: Math.max(1, check.problem.fileBytes ?? 1), peakSource: 'ESTIMATED', estimate: null, parts: null };
  const { estimate } = peak;
  const { provider, reason } = discoverTelemetry({ simFile: options.simFile, wallUs: () => clock.wallUs() });
  try {
    // Engines that `launch`, `serve` or the app run for this data folder are ours, not external:
    // their whole process trees.
    const running = listEngines(options.dataDir);
    const trees = engineTreesOf(running.map((e) => e.pid));
    trackEngineTrees(provider, trees);
    const samples = provider.sample().map((s) => foldEngineTrees(s, trees));
    const sample = options.deviceKey === undefined ? (samples[0] ?? null) : (samples.find((s) => s.key === options.deviceKey) ?? null);
    if (options.deviceKey !== undefined && sample === null) {
      throw new PlanCommandError(`--device: no device ${options.deviceKey}; this machine has ${samples.map((s) => s.key).join(', ') || 'none'}`);
    }
    const gpuKey = sample?.key ?? options.deviceKey ?? 'cpu-0';
    const pressure = new PressureTracker(POLICY_M10_V1);
    const level = sample === null ? 'NORMAL' : pressure.observe(usedFraction(sample), clock.monoUs());
    const result = plan(
      {
        capability: options.capability,
        modelKey: peak.modelKey,
        contextSize,
        gpuLayers: options.gpuLayers,
        engineKind: options.engineKind,
        priority: options.priority,
        peakBytes: peak.peakBytes,
        peakSource: peak.peakSource,
        ...(peak.parts === null ? {} : { peakParts: peak.parts }),
        weight: options.weight,
        ...(check.ok ? {} : { modelProblem: check.problem }),
      },
      // A dry-run from the command line knows the engines other processes run for this data folder
      // (it cannot stop them), but no loads in progress or gateway line (queue depth 0).
      { ...snapshotFromSample({ nowUs: clock.wallUs(), node: hostname(), gpuKey, sample, pressure: level }), residents: residentsSupervisedElsewhere(running, gpuKey, clock.wallUs()), leases: [] },
      POLICY_M10_V1,
    );
    if (options.json) {
      io.out(JSON.stringify(result));
    } else {
      io.out(`telemetry: ${reason}`);
      if (estimate !== null) io.out(`estimate: ${options.model} (${peak.sizeBytes} B on disk), from the file, in ${estimate.basis === 'gpuVram' ? 'VRAM' : 'RAM (no GPU build here)'}`);
      io.out(describePlan(result).trimEnd());
    }
    return exitCodeForPlan(result);
  } finally {
    provider.close();
  }
}
