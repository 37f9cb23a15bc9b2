/** From a telemetry sample (and what the supervisor knows) to the planner's snapshot. Pure. */
import type { DeviceSample } from '../telemetry/types.js';
import type { PressureLevel } from './policy.js';
import type { OperatorControls, PlannerSnapshot } from './types.js';

export const DEFAULT_CONTROLS: OperatorControls = { draining: false, labPaused: false, allowedCapabilities: null };

/** What the device offers, without the managed engines and leases (the supervisor adds those). */
export type DeviceSnapshot = Omit<PlannerSnapshot, 'residents' | 'leases'>;

export function snapshotFromSample(input: { nowUs: number; sample: DeviceSample | null; pressure: PressureLevel; controls?: OperatorControls }): DeviceSnapshot {
  const s = input.sample;
  return {
    nowUs: input.nowUs,
    device:
      s === null
        ? null
        : { key: s.key, name: s.name, totalBytes: s.totalBytes, observedUsedBytes: s.usedBytes, processes: s.processes, health: s.health, sampledAtUs: s.sampledAtUs },
    pressure: input.pressure,
    controls: input.controls ?? DEFAULT_CONTROLS,
  };
}

/** Physical use over total, for the pressure tracker; NaN when the total is unknown. */
export function usedFraction(sample: DeviceSample): number {
  return sample.totalBytes > 0 ? sample.usedBytes / sample.totalBytes : Number.NaN;
}
