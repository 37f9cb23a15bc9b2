/**
 * Telemetry: what a device looks like right now. One interface for every provider (NVML, the host
 * CPU as a device, a simulated JSON file). Unknown facts are null — never a guessed value.
 */

/** OK: usable. DEGRADED: usable with errors (ECC, throttling). FAILED: do not place work on it
 *  (GPU lost, fell off the bus). UNKNOWN: the provider cannot say. */
export type DeviceHealth = 'OK' | 'DEGRADED' | 'FAILED' | 'UNKNOWN';

export type TelemetrySource = 'nvml' | 'cpu' | 'simulated' | 'metal';

export interface ProcessUsage {
  pid: number;
  usedBytes: number;
}

export interface DeviceSample {
  /** Registry key: the NVML/CUDA UUID (GPU-…), metal-0, cpu-0, or the simulated file's key. */
  key: string;
  name: string;
  totalBytes: number;
  usedBytes: number;
  /** Per-process use; null when the device or driver cannot attribute memory to processes. */
  processes: ProcessUsage[] | null;
  /** Processes the device lists but whose use it cannot say (NVML_VALUE_NOT_AVAILABLE); they are
   *  not in `processes`. Absent when there are none. */
  unknownUsagePids?: number[];
  /** 0–100; null when unknown. */
  utilizationPct: number | null;
  temperatureC: number | null;
  /** Board power draw in watts; null when unknown. */
  powerW: number | null;
  health: DeviceHealth;
  /** Wall-clock µs when these figures were read from the device. Never moved forward for figures
   *  that were not read again: after a failed query it stays the time of the last good figures. */
  sampledAtUs: number;
  source: TelemetrySource;
  /** Present when the latest query of this device failed (the provider, or this one device): the
   *  figures are not live from that moment on, whatever their age. `lastGood`: the figures are
   *  the last good ones (sampledAtUs is their time); false: there never were any (they are 0). */
  failure?: QueryFailure;
}

export interface QueryFailure {
  /** Wall-clock µs of the failed query. */
  atUs: number;
  lastGood: boolean;
  /** What failed, in one line (the NVML call and code, the provider's error). */
  message: string;
}

export type TelemetryErrorCode =
  /** The provider's library is missing or lacks a required symbol. */
  | 'LIBRARY_UNAVAILABLE'
  /** The driver is present but not usable (not loaded, no permission, insufficient size). */
  | 'DRIVER_ERROR'
  /** The input (a simulated-telemetry file) is malformed. */
  | 'BAD_INPUT'
  /** The query is not supported on this device. */
  | 'NOT_SUPPORTED';

export class TelemetryError extends Error {
  constructor(
    readonly code: TelemetryErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'TelemetryError';
  }
}

/** What names a GPU to a driver other than NVML (Vulkan): its registry key and the facts the
 *  key may not carry. */
export interface GpuIdentity {
  key: string;
  name: string;
  /** GPU-… or MIG-…; null when NVML gives none. */
  uuid: string | null;
  /** NVML's busId ("00000000:01:00.0"); null when NVML gives none. */
  pciBusId: string | null;
}

export interface TelemetryProvider {
  readonly source: TelemetrySource;
  /** One sample of every device this provider sees. Throws TelemetryError when the provider as a
   *  whole fails; a single failing device is returned with health FAILED or UNKNOWN. */
  sample(): DeviceSample[];
  /** The GPUs it sees, with their name, UUID and PCI bus id, in its order; only a provider that
   *  knows real GPUs (NVML) has it. Throws as sample() does; a GPU that cannot be read is left out. */
  gpuIdentities?(): GpuIdentity[];
  close(): void;
}

export const SAMPLE_INTERVAL_MS = 500;

/** Whether a sample's figures are not live at nowUs: its latest query failed, or they are older
 *  than `staleAfterUs` (the planner policy's limit, 2 s in m10-v1), or stamped more than that in
 *  the future (the wall clock stepped back since). */
export function isStale(sample: Pick<DeviceSample, 'sampledAtUs' | 'failure'>, nowUs: number, staleAfterUs: number): boolean {
  if (sample.failure !== undefined) return true;
  const ageUs = nowUs - sample.sampledAtUs;
  return ageUs > staleAfterUs || ageUs < -staleAfterUs;
}
