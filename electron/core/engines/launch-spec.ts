/** A profile resolved to what the supervisor launches: its weight, its model's peak (measured
 *  before, else estimated from the GGUF), its command. One place for `launch` and the core. */
import type { EnvelopeStore } from '../planner/envelopes.js';
import { modelPeak } from '../planner/estimate.js';
import { MiB, type Priority } from '../planner/policy.js';
import { effectiveWeight, type Profile } from './profiles.js';
import type { LaunchSpec } from './supervisor.js';

/** A command without a model file has no envelope to start from: this much until measured. */
export const COMMAND_PEAK_BYTES = 256 * MiB;

export interface SpecOverrides {
  weight?: number | undefined;
  priority?: Priority | undefined;
  contextSize?: number | undefined;
  threads?: number | undefined;
  /** For profiles that leave idle unload unset. */
  defaultIdleUnloadMinutes?: number | null | undefined;
}

export async function launchSpecFor(profile: Profile, envelopes: EnvelopeStore, overrides: SpecOverrides = {}): Promise<LaunchSpec> {
  const contextSize = overrides.contextSize ?? profile.contextSize;
  const peak =
    profile.modelPath === null
      ? { modelKey: `command:${profile.command ?? profile.id}`, peakBytes: COMMAND_PEAK_BYTES, peakSource: 'ESTIMATED' as const }
      : await modelPeak(envelopes, profile.modelPath, { contextSize, gpuLayers: profile.gpuLayers, engineKind: profile.engineKind });
  return {
    profileId: profile.id,
    name: profile.name,
    kind: profile.engineKind,
    capability: profile.capabilities[0] ?? 'chat',
    modelPath: profile.modelPath,
    modelKey: peak.modelKey,
    contextSize,
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
    idleUnloadMinutes: profile.idleUnloadMinutes ?? overrides.defaultIdleUnloadMinutes ?? null,
  };
}
