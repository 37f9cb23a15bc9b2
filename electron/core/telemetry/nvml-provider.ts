/**
 * Telemetry from NVML: one DeviceSample per GPU, keyed by its UUID (GPU-…, 40 characters, a valid
 * registry key). A device whose queries fail is still reported, never with invented figures:
 *
 * - GPU_IS_LOST or RESET_REQUIRED on any query: health FAILED (do not place work on it).
 * - Any other failure of a required query (handle, UUID, name, memory): health UNKNOWN.
 * - Either way the sample carries `failure` (when, what): its figures are not live from that
 *   moment. totalBytes/usedBytes are the device's last good figures with the time they were read
 *   (never stamped with the failed query's time), or 0 when it never gave any (`lastGood` false);
 *   processes, utilization, temperature and power are null.
 * - Its key is the UUID when it could be read now or before, else `nvml-<index>` (a GPU lost before
 *   its first sample); its name likewise, else `NVIDIA GPU <index>`.
 *
 * Optional queries (processes, utilization, temperature, power) that are unsupported answer null; one that
 * fails otherwise also answers null and is listed in problems().
 */
import {
  describeNvmlError,
  loadNvml,
  NvmlCallError,
  type LoadNvmlOptions,
  type NvmlDevice,
  type NvmlError,
  type NvmlLibrary,
  type NvmlProcess,
  type NvmlProcessApi,
  type NvmlResult,
} from '../../../native/nvml.js';
import { hashGpuKey } from '../registry/keys.js';
import { checkGpuKey } from '../registry/validate.js';
import { TelemetryError, type DeviceHealth, type DeviceSample, type GpuIdentity, type ProcessUsage, type TelemetryProvider } from './types.js';

export interface NvmlProviderOptions extends LoadNvmlOptions {
  /** Wall-clock µs (the registry's clock). */
  wallUs: () => number;
}

/** A GPU's registry key: its UUID, else a hash of its name and PCI bus id (stable across runs);
 *  null with neither. */
function registryKeyOf(uuid: string | null, name: string, pciBusId: string | null): string | null {
  if (uuid !== null && uuid !== '') return uuid;
  if (pciBusId === null || pciBusId === '') return null;
  return hashGpuKey(name, pciBusId);
}

/** Failures after which the device must not be used. */
const FAILED: ReadonlySet<string> = new Set(['GPU_IS_LOST', 'RESET_REQUIRED']);

interface LastGood {
  name: string;
  totalBytes: number;
  usedBytes: number;
  sampledAtUs: number;
}

/** Loads NVML, initialises it and returns the provider. Throws TelemetryError: LIBRARY_UNAVAILABLE
 *  (no library, a required symbol missing) or an NvmlCallError naming the NVML code of a failed
 *  nvmlInit_v2 (DRIVER_NOT_LOADED, NO_PERMISSION, …). */
export function openNvmlProvider(options: NvmlProviderOptions): NvmlProvider {
  const lib = loadNvml(options);
  const init = lib.init();
  if (!init.ok) {
    lib.unload();
    throw new NvmlCallError(init);
  }
  return new NvmlProvider(lib, options.wallUs);
}

export class NvmlProvider implements TelemetryProvider {
  readonly source = 'nvml' as const;
  private readonly lastGood = new Map<string, LastGood>();
  private readonly keyByIndex = new Map<number, string>();
  private readonly nameByIndex = new Map<number, string>();
  private problemsNow = new Map<string, string>();
  private closed = false;

  /** Takes an initialised library (openNvmlProvider does that); close() shuts it down and unloads it. */
  constructor(
    private readonly lib: NvmlLibrary,
    private readonly wallUs: () => number,
  ) {}

  get libraryPath(): string {
    return this.lib.path;
  }

  get processApi(): NvmlProcessApi | null {
    return this.lib.processApi;
  }

  /** How many GPUs NVML sees (nvidia-smi --query-gpu=count). Throws NvmlCallError. */
  deviceCount(): number {
    this.checkOpen();
    const count = this.lib.deviceCount();
    if (!count.ok) throw new NvmlCallError(count);
    return count.value;
  }

  /** What went wrong in the last sample, by device key: a failed query, a key the registry cannot use. */
  problems(): ReadonlyMap<string, string> {
    return this.problemsNow;
  }

  sample(): DeviceSample[] {
    const count = this.deviceCount();
    const nowUs = this.wallUs();
    this.problemsNow = new Map();
    const samples: DeviceSample[] = [];
    for (let index = 0; index < count; index++) samples.push(this.sampleDevice(index, nowUs));
    return samples;
  }

  /** Each GPU's key, name, UUID and PCI bus id, for matching it to another driver's list (Vulkan).
   *  A GPU whose handle, name or key cannot be read is left out. Throws NvmlCallError as sample(). */
  gpuIdentities(): GpuIdentity[] {
    const count = this.deviceCount();
    const lib = this.lib;
    const identities: GpuIdentity[] = [];
    for (let index = 0; index < count; index++) {
      const handle = lib.deviceHandle(index);
      if (!handle.ok) continue;
      const name = lib.name(handle.value);
      if (!name.ok) continue;
      const uuid = lib.uuid(handle.value);
      const bus = lib.pciBusId(handle.value);
      const uuidValue = uuid.ok && uuid.value !== '' ? uuid.value : null;
      const busValue = bus.ok && bus.value !== null && bus.value !== '' ? bus.value : null;
      const key = registryKeyOf(uuidValue, name.value, busValue);
      if (key !== null) identities.push({ key, name: name.value, uuid: uuidValue, pciBusId: busValue });
    }
    return identities;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.lib.shutdown();
    this.lib.unload();
  }

  private checkOpen(): void {
    if (this.closed) throw new TelemetryError('DRIVER_ERROR', 'the NVML provider is closed');
  }

  private sampleDevice(index: number, nowUs: number): DeviceSample {
    const lib = this.lib;
    const handle = lib.deviceHandle(index);
    if (!handle.ok) return this.unusable(index, handle, nowUs);
    const device: NvmlDevice = handle.value;
    const uuid = lib.uuid(device);
    if (!uuid.ok && uuid.name !== 'NOT_SUPPORTED') return this.unusable(index, uuid, nowUs);
    const name = lib.name(device);
    if (!name.ok) return this.unusable(index, name, nowUs);
    let key: string;
    if (uuid.ok && uuid.value !== '') {
      key = uuid.value;
    } else {
      // A GPU without a UUID: its key is a hash of its name and PCI bus id, stable across runs.
      const bus = lib.pciBusId(device);
      if (!bus.ok) return this.unusable(index, bus, nowUs);
      const hashed = registryKeyOf(null, name.value, bus.value);
      if (hashed === null) return this.unusable(index, { ok: false, code: 3, name: 'NOT_SUPPORTED', call: 'nvmlDeviceGetPciInfo_v3', text: 'the GPU has neither a UUID nor a PCI bus id to key its registry by' }, nowUs);
      key = hashed;
    }
    this.keyByIndex.set(index, key);
    const keyCheck = checkGpuKey(key);
    if (!keyCheck.ok) this.problem(key, `the UUID ${JSON.stringify(key)} is not a valid registry key (${keyCheck.message}); it is used as the key anyway`);
    this.nameByIndex.set(index, name.value);
    const memory = lib.memory(device);
    if (!memory.ok) return this.unusable(index, memory, nowUs);

    const processes = lib.processes(device);
    const utilization = lib.utilization(device);
    const temperature = lib.temperatureC(device);
    const power = lib.powerW(device);
    for (const result of [processes, utilization, temperature, power]) {
      if (!result.ok && FAILED.has(result.name)) return this.unusable(index, result, nowUs);
    }
    const optional = <T>(result: NvmlResult<T | null>): T | null => {
      if (result.ok) return result.value;
      this.problem(key, describeNvmlError(result));
      return null;
    };
    const split = splitProcesses(optional(processes));
    const gpu = optional(utilization);
    const temperatureC = optional(temperature);
    const powerW = optional(power);

    const { totalBytes, usedBytes } = memory.value;
    this.lastGood.set(key, { name: name.value, totalBytes, usedBytes, sampledAtUs: nowUs });
    return {
      key,
      name: name.value,
      totalBytes,
      usedBytes,
      processes: split.processes,
      ...(split.unknown.length > 0 ? { unknownUsagePids: split.unknown } : {}),
      utilizationPct: gpu === null ? null : gpu.gpuPct,
      temperatureC,
      powerW,
      health: 'OK',
      sampledAtUs: nowUs,
      source: 'nvml',
    };
  }

  /** A device that could not be read: FAILED or UNKNOWN, last good figures or 0 (see the header). */
  private unusable(index: number, error: NvmlError, nowUs: number): DeviceSample {
    const key = this.keyByIndex.get(index) ?? `nvml-${index}`;
    const health: DeviceHealth = FAILED.has(error.name) ? 'FAILED' : 'UNKNOWN';
    const last = this.lastGood.get(key);
    const message = describeNvmlError(error);
    this.problem(key, message);
    return {
      key,
      name: last?.name ?? this.nameByIndex.get(index) ?? `NVIDIA GPU ${index}`,
      totalBytes: last?.totalBytes ?? 0,
      usedBytes: last?.usedBytes ?? 0,
      processes: null,
      utilizationPct: null,
      temperatureC: null,
      powerW: null,
      health,
      sampledAtUs: last?.sampledAtUs ?? nowUs,
      source: 'nvml',
      failure: { atUs: nowUs, lastGood: last !== undefined, message },
    };
  }

  private problem(key: string, message: string): void {
    const before = this.problemsNow.get(key);
    this.problemsNow.set(key, before === undefined ? message : `${before}; ${message}`);
  }
}

/** Processes with a known use go to `processes`; those NVML cannot measure (NVML_VALUE_NOT_AVAILABLE)
 *  to `unknown`. When none is measurable (Windows WDDM) the device cannot attribute: null. */
function splitProcesses(list: NvmlProcess[] | null): { processes: ProcessUsage[] | null; unknown: number[] } {
  if (list === null) return { processes: null, unknown: [] };
  const known: ProcessUsage[] = [];
  const unknown: number[] = [];
  for (const process of list) {
    if (process.usedBytes === null) unknown.push(process.pid);
    else known.push({ pid: process.pid, usedBytes: process.usedBytes });
  }
  return { processes: list.length > 0 && known.length === 0 ? null : known, unknown };
}
