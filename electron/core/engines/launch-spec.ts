/** A profile resolved to what the supervisor launches: its weight, its model's peak (measured
 *  before, else estimated from the GGUF), its command. One place for `launch` and the core. */
import { createHash } from 'node:crypto';
import { kvCacheTypeOf } from './kv-cache.js';
import type { EnvelopeStore } from '../planner/envelopes.js';
import type { PeakParts } from '../planner/memory.js';
import { ModelFileError, modelPeak, type Estimator } from '../planner/estimate.js';
import { MiB, type Priority } from '../planner/policy.js';
import { checkEngineExecutable } from './executables.js';
import { DEFAULT_EXECUTABLE, effectiveWeight, type Profile } from './profiles.js';
import type { LaunchSpec } from './supervisor.js';

/** A command without a model file has no envelope to start from: this much until measured. */
export { kvCacheTypeOf };

export const COMMAND_PEAK_BYTES = 256 * MiB;

export interface SpecOverrides {
  weight?: number | undefined;
  priority?: Priority | undefined;
  contextSize?: number | undefined;
  threads?: number | undefined;
  /** For profiles that leave idle unload unset. */
  defaultIdleUnloadMinutes?: number | null | undefined;
  /** How an estimate is made (the app's spawn); a child of this process by default. */
  estimator?: Estimator | undefined;
}


/** Whether the executable a profile runs exists and may be run (PATH as the engine will see it:
 *  the profile's own PATH when it sets one); null for the built-in engine and for one that may. */
export function engineExecutableProblem(profile: Pick<Profile, 'engineKind' | 'command' | 'env'>, env: NodeJS.ProcessEnv = process.env): ReturnType<typeof checkEngineExecutable> {
  if (profile.engineKind === 'builtin') return null;
  const command = profile.command ?? (profile.engineKind === 'command' ? null : DEFAULT_EXECUTABLE[profile.engineKind]);
  if (command === null) return null; // the schema requires one; commandFor says so
  const path = profile.env['PATH'];
  return checkEngineExecutable(command, path === undefined ? env : { ...env, PATH: path });
}

export async function launchSpecFor(profile: Profile, envelopes: EnvelopeStore, overrides: SpecOverrides = {}): Promise<LaunchSpec> {
  const contextSize = overrides.contextSize ?? profile.contextSize;
  let peak: Pick<LaunchSpec, 'modelKey' | 'peakBytes' | 'peakSource' | 'modelProblem' | 'trainContextSize'> & { parts?: PeakParts | null };
  if (profile.modelPath === null) {
    peak = { modelKey: `command:${profile.command ?? profile.id}`, peakBytes: COMMAND_PEAK_BYTES, peakSource: 'ESTIMATED' };
  } else {
    try {
      peak = await modelPeak(envelopes, profile.modelPath, { contextSize, gpuLayers: profile.gpuLayers, engineKind: profile.engineKind }, { kvCacheType: kvCacheTypeOf(profile.args), estimator: overrides.estimator });
    } catch (error) {
      if (!(error instanceof ModelFileError)) throw error;
      // The plan says REJECT_HEALTH with the problem's code; nothing is estimated or started.
      const modelKey = `unusable:${createHash('sha256').update(profile.modelPath).digest('hex').slice(0, 24)}`;
      peak = { modelKey, peakBytes: Math.max(1, error.problem.fileBytes ?? 1), peakSource: 'ESTIMATED', modelProblem: error.problem };
    }
  }
  const executableProblem = engineExecutableProblem(profile);
  return {
    ...(peak.modelProblem === undefined ? {} : { modelProblem: peak.modelProblem }),
    ...(executableProblem === null ? {} : { executableProblem }),
    profileId: profile.id,
    name: profile.name,
    kind: profile.engineKind,
    capability: profile.capabilities[0] ?? 'chat',
    modelPath: profile.modelPath,
    modelKey: peak.modelKey,
    contextSize,
    ...(peak.trainContextSize === undefined ? {} : { trainContextSize: peak.trainContextSize }),
    gpuLayers: profile.gpuLayers,
    threads: overrides.threads ?? profile.threads,
    weight: overrides.weight ?? effectiveWeight(profile),
    priority: overrides.priority ?? profile.priority,
    pinned: profile.pinned,
    command: profile.command,
    args: profile.args,
    env: profile.env,
    peakBytes: peak.peakBytes,
    peakSource: peak.peakSource,
    ...(peak.parts === undefined || peak.parts === null ? {} : { peakParts: peak.parts }),
    idleUnloadMinutes: profile.idleUnloadMinutes ?? overrides.defaultIdleUnloadMinutes ?? null,
  };
}
