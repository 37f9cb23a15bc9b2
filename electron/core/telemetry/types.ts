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
  /** Wall-clock µs when this sample was taken. */
  sampledAtUs: number;
  source: TelemetrySource;
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

/** A sample older than this is stale: the planner treats the device as UNKNOWN. */
export const STALE_AFTER_US = 2_000_000;
export const SAMPLE_INTERVAL_MS = 500;

/** Whether a sample is too old to plan on (older than STALE_AFTER_US at nowUs). A sample stamped
 *  more than STALE_AFTER_US in the future is stale too: the wall clock stepped back since. */
export function isStale(sample: Pick<DeviceSample, 'sampledAtUs'>, nowUs: number): boolean {
  const ageUs = nowUs - sample.sampledAtUs;
  return ageUs > STALE_AFTER_US || ageUs < -STALE_AFTER_US;
}
