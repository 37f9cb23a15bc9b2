/** From a telemetry sample (and what the supervisor knows) to the planner's snapshot. Pure. */
import type { DeviceSample } from '../telemetry/types.js';
import type { PressureLevel } from './policy.js';
import type { OperatorControls, PlannerSnapshot } from './types.js';

export const DEFAULT_CONTROLS: OperatorControls = { draining: false, labPaused: false, allowedCapabilities: null };

/** What the device offers, without the managed engines and leases (the supervisor adds those). */
export type DeviceSnapshot = Omit<PlannerSnapshot, 'residents' | 'leases'>;

/**
 * `sample`: the latest sample of the device however old (the planner judges its age and says
 * TELEMETRY_STALE), or null when there never was one (TELEMETRY_MISSING). `gpuKey`: the device
 * planned for, known even without a sample. `node`: the host name. `queueDepth`: requests waiting
 * in the gateway's line (0 where there is no gateway).
 */
export function snapshotFromSample(input: {
  nowUs: number;
  node: string;
  gpuKey: string;
  sample: DeviceSample | null;
  pressure: PressureLevel;
  controls?: OperatorControls;
  queueDepth?: number;
}): DeviceSnapshot {
  const s = input.sample;
  // A device whose queries failed before it ever gave figures has none: TELEMETRY_MISSING, not a
  // device of 0 bytes (which would read as one the model can never fit on).
  const figures = s !== null && (s.failure === undefined || s.failure.lastGood);
  return {
    nowUs: input.nowUs,
    node: input.node,
    accelerator: { key: s?.key ?? input.gpuKey, name: s?.name ?? null },
    device:
      s === null || (!figures && s.health !== 'FAILED')
        ? null
        : {
            key: s.key,
            name: s.name,
            totalBytes: s.totalBytes,
            observedUsedBytes: s.usedBytes,
            processes: s.failure === undefined ? s.processes : null,
            health: s.health,
            sampledAtUs: s.sampledAtUs,
            ...(s.failure === undefined ? {} : { queryFailedAtUs: s.failure.atUs }),
          },
    queueDepth: input.queueDepth ?? 0,
    pressure: input.pressure,
    controls: input.controls ?? DEFAULT_CONTROLS,
  };
}

/** Physical use over total, for the pressure tracker; NaN when the total is unknown or the figures
 *  are not live (a failed query's sample is no evidence: the tracker sees a gap). */
export function usedFraction(sample: DeviceSample): number {
  return sample.totalBytes > 0 && sample.failure === undefined ? sample.usedBytes / sample.totalBytes : Number.NaN;
}
