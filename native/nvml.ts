/**
 * The koffi binding of NVML (libnvidia-ml), the one place that calls into it. It finds the library
 * (libnvidia-ml.so.1 on Linux, nvml.dll on Windows, or $GPU_SHARE_NVML_LIB anywhere), looks every
 * symbol up once at load time, and maps each nvmlReturn_t to a typed result. "Not available" is a
 * value (null), never an exception; an exception (TelemetryError) means the library as a whole is
 * unusable. Each query names the nvidia-smi command that reads the same figure.
 */
import koffi, { type LibraryHandle, type TypeObject } from 'koffi';
import { existsSync } from 'node:fs';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { TelemetryError, type TelemetryErrorCode } from '../electron/core/telemetry/types.js';

/** nvmlReturn_t values (nvml.h). */
export const NVML_RETURN = {
  SUCCESS: 0,
  UNINITIALIZED: 1,
  INVALID_ARGUMENT: 2,
  NOT_SUPPORTED: 3,
  NO_PERMISSION: 4,
  ALREADY_INITIALIZED: 5,
  NOT_FOUND: 6,
  INSUFFICIENT_SIZE: 7,
  INSUFFICIENT_POWER: 8,
  DRIVER_NOT_LOADED: 9,
  TIMEOUT: 10,
  IRQ_ISSUE: 11,
  LIBRARY_NOT_FOUND: 12,
  FUNCTION_NOT_FOUND: 13,
  CORRUPTED_INFOROM: 14,
  GPU_IS_LOST: 15,
  RESET_REQUIRED: 16,
  OPERATING_SYSTEM: 17,
  LIB_RM_VERSION_MISMATCH: 18,
  IN_USE: 19,
  MEMORY: 20,
  NO_DATA: 21,
  VGPU_ECC_NOT_SUPPORTED: 22,
  INSUFFICIENT_RESOURCES: 23,
  FREQ_NOT_SUPPORTED: 24,
  ARGUMENT_VERSION_MISMATCH: 25,
  DEPRECATED: 26,
  NOT_READY: 27,
  GPU_NOT_FOUND: 28,
  INVALID_STATE: 29,
  RESET_TYPE_NOT_SUPPORTED: 30,
  UNKNOWN: 999,
} as const;

/** The name of a failing nvmlReturn_t (NVML_ERROR_ stripped); codes this table does not know are
 *  'UNKNOWN' (the numeric code is kept beside it). */
export type NvmlErrorName = Exclude<keyof typeof NVML_RETURN, 'SUCCESS'>;

const NAME_BY_CODE = new Map<number, NvmlErrorName>();
for (const name of Object.keys(NVML_RETURN) as (keyof typeof NVML_RETURN)[]) {
  if (name !== 'SUCCESS') NAME_BY_CODE.set(NVML_RETURN[name], name);
}

/** A failed NVML call. */
export interface NvmlError {
  readonly ok: false;
  /** The raw nvmlReturn_t. */
  readonly code: number;
  readonly name: NvmlErrorName;
  /** nvmlErrorString(code) when the library has it. */
  readonly text: string | null;
  /** The NVML function that failed. */
  readonly call: string;
}

export type NvmlResult<T> = { readonly ok: true; readonly value: T } | NvmlError;

/** The one mapping of nvmlReturn_t to a result: success carries value(), anything else a typed
 *  error with the code's name and nvmlErrorString's text. */
export function nvmlResult<T>(code: number, call: string, value: () => T, errorString: (code: number) => string | null = () => null): NvmlResult<T> {
  if (code === NVML_RETURN.SUCCESS) return { ok: true, value: value() };
  return { ok: false, code, name: NAME_BY_CODE.get(code) ?? 'UNKNOWN', text: errorString(code), call };
}

/** "nvmlDeviceGetMemoryInfo: GPU_IS_LOST (GPU is lost)". */
export function describeNvmlError(error: NvmlError): string {
  const name = error.name === 'UNKNOWN' && error.code !== NVML_RETURN.UNKNOWN ? `UNKNOWN (code ${error.code})` : error.name;
  return `${error.call}: ${name}${error.text !== null && error.text !== '' ? ` (${error.text})` : ''}`;
}

/** The TelemetryError code for a failed NVML call that makes the whole library unusable. */
export function telemetryCodeFor(error: NvmlError): TelemetryErrorCode {
  switch (error.name) {
    case 'LIBRARY_NOT_FOUND':
    case 'FUNCTION_NOT_FOUND':
      return 'LIBRARY_UNAVAILABLE';
    case 'NOT_SUPPORTED':
      return 'NOT_SUPPORTED';
    default:
      return 'DRIVER_ERROR';
  }
}

/** A TelemetryError that carries the failed NVML call (error.nvml.name is e.g. 'DRIVER_NOT_LOADED'). */
export class NvmlCallError extends TelemetryError {
  constructor(readonly nvml: NvmlError) {
    super(telemetryCodeFor(nvml), `NVML ${describeNvmlError(nvml)}`);
    this.name = 'NvmlCallError';
  }
}

/** NVML_VALUE_NOT_AVAILABLE: the driver cannot say (e.g. per-process memory under Windows WDDM). */
export const NVML_VALUE_NOT_AVAILABLE = 0xffff_ffff_ffff_ffffn;

/** A device handle (nvmlDevice_t); only this binding can use it. */
export interface NvmlDevice {
  readonly __nvmlDevice: unique symbol;
}

export interface NvmlMemory {
  totalBytes: number;
  usedBytes: number;
  freeBytes: number;
}

export interface NvmlProcess {
  pid: number;
  /** null: NVML_VALUE_NOT_AVAILABLE. */
  usedBytes: number | null;
}

export interface NvmlUtilization {
  gpuPct: number;
  memoryPct: number;
}

/** Which nvmlDeviceGetComputeRunningProcesses the library has (v3 and v2 fill a 24-byte
 *  nvmlProcessInfo_t, the unversioned one a 16-byte nvmlProcessInfo_v1_t). */
export type NvmlProcessApi = 'v3' | 'v2' | 'v1';

export interface NvmlLibrary {
  /** The file (or bare name) that was loaded. */
  readonly path: string;
  /** null: no process query at all; processes() then answers null. */
  readonly processApi: NvmlProcessApi | null;
  /** Which optional symbols the library has. */
  readonly has: { readonly utilization: boolean; readonly temperature: boolean; readonly power: boolean; readonly errorString: boolean };
  init(): NvmlResult<void>;
  shutdown(): NvmlResult<void>;
  deviceCount(): NvmlResult<number>;
  deviceHandle(index: number): NvmlResult<NvmlDevice>;
  uuid(device: NvmlDevice): NvmlResult<string>;
  name(device: NvmlDevice): NvmlResult<string>;
  /** The PCI bus id (nvidia-smi's "00000000:01:00.0"); null when not supported or no symbol. */
  pciBusId(device: NvmlDevice): NvmlResult<string | null>;
  memory(device: NvmlDevice): NvmlResult<NvmlMemory>;
  /** null: the device or driver cannot attribute memory to processes (NOT_SUPPORTED, or no symbol). */
  processes(device: NvmlDevice): NvmlResult<NvmlProcess[] | null>;
  /** null: not supported on this device, or no symbol. */
  utilization(device: NvmlDevice): NvmlResult<NvmlUtilization | null>;
  /** null: not supported on this device, or no symbol. */
  temperatureC(device: NvmlDevice): NvmlResult<number | null>;
  /** The board's power draw in watts (NVML answers milliwatts); null: not supported, or no symbol. */
  powerW(device: NvmlDevice): NvmlResult<number | null>;
  errorString(code: number): string | null;
  /** Unloads the library; nothing may be called afterwards. */
  unload(): void;
}

export interface LoadNvmlOptions {
  /** A library file to load instead of the platform's (wins over GPU_SHARE_NVML_LIB). */
  path?: string | undefined;
  env?: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
}

/** What to try, in order: an explicit path, $GPU_SHARE_NVML_LIB, then the platform's library
 *  (names searched by the dynamic loader, then where older Windows drivers put it). Empty: NVML
 *  does not exist on this platform. */
export function nvmlCandidates(options: LoadNvmlOptions = {}): string[] {
  const env = options.env ?? process.env;
  const explicit = options.path ?? env['GPU_SHARE_NVML_LIB'];
  if (explicit !== undefined && explicit !== '') return [explicit];
  switch (options.platform ?? process.platform) {
    case 'linux':
      return ['libnvidia-ml.so.1'];
    case 'win32': {
      const programFiles = env['ProgramW6432'] ?? env['ProgramFiles'] ?? 'C:\\Program Files';
      return ['nvml.dll', join(programFiles, 'NVIDIA Corporation', 'NVSMI', 'nvml.dll')];
    }
    default:
      return [];
  }
}

const NOT_FOUND_TEXT = /no such file|cannot open shared object|not found|could not be found|image not found/i;

/**
 * Loads NVML and binds its functions (it does not call nvmlInit_v2: init() does). Throws
 * TelemetryError('LIBRARY_UNAVAILABLE') when no candidate loads, or when a required symbol
 * (nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 * nvmlDeviceGetMemoryInfo, nvmlDeviceGetUUID, nvmlDeviceGetName) is missing.
 */
export function loadNvml(options: LoadNvmlOptions = {}): NvmlLibrary {
  const platform = options.platform ?? process.platform;
  const candidates = nvmlCandidates(options);
  if (candidates.length === 0) throw new TelemetryError('LIBRARY_UNAVAILABLE', `NVML does not exist on ${platform}`);
  const failures: string[] = [];
  for (const candidate of candidates) {
    // A bare name goes to the dynamic loader's search; a path that does not exist is not tried.
    const isPath = candidate.includes('/') || candidate.includes('\\');
    if (isPath && !existsSync(candidate)) {
      failures.push(`${candidate} not found`);
      continue;
    }
    let lib: LibraryHandle;
    try {
      lib = koffi.load(candidate);
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      failures.push(NOT_FOUND_TEXT.test(detail) ? `${candidate} not found` : `${candidate} could not be loaded (${detail})`);
      continue;
    }
    try {
      return bind(lib, candidate);
    } catch (error) {
      lib.unload();
      throw error;
    }
  }
  throw new TelemetryError('LIBRARY_UNAVAILABLE', failures.join('; '));
}

/** The C types, created once per process (koffi keeps them globally). */
interface NvmlTypes {
  memory: TypeObject;
  utilization: TypeObject;
  processV2: TypeObject;
  processV1: TypeObject;
}

let typesOnce: NvmlTypes | null = null;

function nvmlTypes(): NvmlTypes {
  if (typesOnce !== null) return typesOnce;
  const types: NvmlTypes = {
    memory: koffi.struct({ total: 'unsigned long long', free: 'unsigned long long', used: 'unsigned long long' }),
    utilization: koffi.struct({ gpu: 'unsigned int', memory: 'unsigned int' }),
    // nvmlProcessInfo_t (v3) and nvmlProcessInfo_v2_t: 4 bytes of padding after pid, 24 in all.
    processV2: koffi.struct({ pid: 'unsigned int', usedGpuMemory: 'unsigned long long', gpuInstanceId: 'unsigned int', computeInstanceId: 'unsigned int' }),
    processV1: koffi.struct({ pid: 'unsigned int', usedGpuMemory: 'unsigned long long' }),
  };
  if (koffi.sizeof(types.processV2) !== 24 || koffi.sizeof(types.processV1) !== 16 || koffi.sizeof(types.memory) !== 24) {
    throw new TelemetryError('LIBRARY_UNAVAILABLE', 'unexpected NVML struct layout on this platform (nvmlProcessInfo_t must be 24 bytes)');
  }
  typesOnce = types;
  return types;
}

/** Field offsets of a struct, read from koffi's layout (so they follow the C compiler's alignment). */
function offsets(type: TypeObject): Record<string, number> {
  const result: Record<string, number> = {};
  for (const [name, member] of Object.entries(type.members ?? {})) result[name] = member.offset;
  return result;
}

function offset(table: Record<string, number>, field: string): number {
  const at = table[field];
  if (at === undefined) throw new Error(`no field ${field}`);
  return at;
}

const PCI_INFO_SIZE = 68;
const PCI_BUS_ID_OFFSET = 36;
const STRING_BUFFER = 96; // NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE
const NVML_TEMPERATURE_GPU = 0;
/** Extra rows for processes that start between asking the count and reading the list. */
const PROCESS_SLACK = 8;

type Ret = number;
type ArgType = string | TypeObject | ReturnType<typeof koffi.out>;
/** NVML runs on little-endian machines only (x86-64, arm64, ppc64le); read in the host's order anyway. */
const LE = endianness() === 'LE';
type Ptr = NvmlDevice | Uint8Array | null;

function cString(buf: Uint8Array): string {
  const end = buf.indexOf(0);
  return new TextDecoder().decode(end === -1 ? buf : buf.subarray(0, end));
}

function u64(view: DataView, at: number): number | null {
  const value = view.getBigUint64(at, LE);
  return value === NVML_VALUE_NOT_AVAILABLE ? null : Number(value);
}

function bind(lib: LibraryHandle, path: string): NvmlLibrary {
  const types = nvmlTypes();
  /** Binds a symbol; null when the library lacks it (koffi throws on a missing symbol). */
  const optional = <F>(name: string, result: string, args: ArgType[]): F | null => {
    try {
      return lib.func(name, result, args) as F;
    } catch {
      return null;
    }
  };
  const required = <F>(name: string, result: string, args: ArgType[]): F => {
    const fn = optional<F>(name, result, args);
    if (fn === null) throw new TelemetryError('LIBRARY_UNAVAILABLE', `${path} lacks the required NVML symbol ${name}`);
    return fn;
  };
  const outU32 = koffi.out(koffi.pointer('unsigned int'));
  const inoutU32 = koffi.inout(koffi.pointer('unsigned int'));
  const outDevice = koffi.out(koffi.pointer('void *'));

  const nvmlInit = required<() => Ret>('nvmlInit_v2', 'int', []);
  const nvmlShutdown = required<() => Ret>('nvmlShutdown', 'int', []);
  const nvmlDeviceGetCount = required<(count: [number]) => Ret>('nvmlDeviceGetCount_v2', 'int', [outU32]);
  const nvmlDeviceGetHandleByIndex = required<(index: number, device: [NvmlDevice | null]) => Ret>('nvmlDeviceGetHandleByIndex_v2', 'int', ['unsigned int', outDevice]);
  const nvmlDeviceGetMemoryInfo = required<(device: NvmlDevice, memory: Uint8Array) => Ret>('nvmlDeviceGetMemoryInfo', 'int', ['void *', 'void *']);
  const nvmlDeviceGetUUID = required<(device: NvmlDevice, uuid: Uint8Array, length: number) => Ret>('nvmlDeviceGetUUID', 'int', ['void *', 'void *', 'unsigned int']);
  const nvmlDeviceGetName = required<(device: NvmlDevice, name: Uint8Array, length: number) => Ret>('nvmlDeviceGetName', 'int', ['void *', 'void *', 'unsigned int']);
  // nvmlPciInfo_t: busIdLegacy[16], five unsigned ints, busId[32]: 68 bytes, busId at 36.
  const nvmlDeviceGetPciInfo = optional<(device: NvmlDevice, pci: Uint8Array) => Ret>('nvmlDeviceGetPciInfo_v3', 'int', ['void *', 'void *']);
  const nvmlErrorString = optional<(code: number) => string | null>('nvmlErrorString', 'const char *', ['int']);
  const nvmlDeviceGetUtilizationRates = optional<(device: NvmlDevice, utilization: Uint8Array) => Ret>('nvmlDeviceGetUtilizationRates', 'int', ['void *', 'void *']);
  const nvmlDeviceGetTemperature = optional<(device: NvmlDevice, sensor: number, temp: [number]) => Ret>('nvmlDeviceGetTemperature', 'int', ['void *', 'int', outU32]);
  const nvmlDeviceGetPowerUsage = optional<(device: NvmlDevice, milliwatts: [number]) => Ret>('nvmlDeviceGetPowerUsage', 'int', ['void *', outU32]);

  type ProcessFn = (device: NvmlDevice, count: [number], infos: Ptr) => Ret;
  const processArgs = ['void *', inoutU32, 'void *'];
  let processApi: NvmlProcessApi | null = null;
  let processFn: ProcessFn | null = null;
  let processCall = '';
  for (const [api, symbol] of [
    ['v3', 'nvmlDeviceGetComputeRunningProcesses_v3'],
    ['v2', 'nvmlDeviceGetComputeRunningProcesses_v2'],
    ['v1', 'nvmlDeviceGetComputeRunningProcesses'],
  ] as const) {
    processFn = optional<ProcessFn>(symbol, 'int', processArgs);
    if (processFn !== null) {
      processApi = api;
      processCall = symbol;
      break;
    }
  }
  const processType = processApi === 'v1' ? types.processV1 : types.processV2;
  const processSize = koffi.sizeof(processType);
  const processOffsets = offsets(processType);
  const pidAt = offset(processOffsets, 'pid');
  const processUsedAt = offset(processOffsets, 'usedGpuMemory');
  const memoryOffsets = offsets(types.memory);
  const utilizationOffsets = offsets(types.utilization);

  const errorString = (code: number): string | null => (nvmlErrorString === null ? null : nvmlErrorString(code));
  const result = <T>(code: number, call: string, value: () => T): NvmlResult<T> => nvmlResult(code, call, value, errorString);
  const unavailable = (code: number): boolean => code === NVML_RETURN.NOT_SUPPORTED || code === NVML_RETURN.FUNCTION_NOT_FOUND;
  let unloaded = false;

  return {
    path,
    processApi,
    has: { utilization: nvmlDeviceGetUtilizationRates !== null, temperature: nvmlDeviceGetTemperature !== null, power: nvmlDeviceGetPowerUsage !== null, errorString: nvmlErrorString !== null },
    init: () => result(nvmlInit(), 'nvmlInit_v2', () => undefined),
    shutdown: () => result(nvmlShutdown(), 'nvmlShutdown', () => undefined),
    // nvidia-smi --query-gpu=count --format=csv,noheader
    deviceCount() {
      const count: [number] = [0];
      return result(nvmlDeviceGetCount(count), 'nvmlDeviceGetCount_v2', () => count[0]);
    },
    // nvidia-smi --query-gpu=index,uuid --format=csv (the index is nvidia-smi's -i)
    deviceHandle(index) {
      const out: [NvmlDevice | null] = [null];
      const code = nvmlDeviceGetHandleByIndex(index, out);
      const device = out[0];
      // A NULL handle with NVML_SUCCESS would be a driver bug: report it as NVML_ERROR_UNKNOWN.
      if (code === NVML_RETURN.SUCCESS && device !== null) return { ok: true, value: device };
      return result(code === NVML_RETURN.SUCCESS ? NVML_RETURN.UNKNOWN : code, 'nvmlDeviceGetHandleByIndex_v2', () => {
        throw new Error('unreachable');
      });
    },
    // nvidia-smi --query-gpu=uuid --format=csv,noheader
    uuid(device) {
      const buf = new Uint8Array(STRING_BUFFER);
      return result(nvmlDeviceGetUUID(device, buf, buf.length), 'nvmlDeviceGetUUID', () => cString(buf));
    },
    // nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader
    pciBusId(device) {
      if (nvmlDeviceGetPciInfo === null) return { ok: true, value: null };
      const buf = new Uint8Array(PCI_INFO_SIZE);
      const code = nvmlDeviceGetPciInfo(device, buf);
      if (unavailable(code)) return { ok: true, value: null };
      return result(code, 'nvmlDeviceGetPciInfo_v3', () => cString(buf.subarray(PCI_BUS_ID_OFFSET)));
    },
    // nvidia-smi --query-gpu=name --format=csv,noheader
    name(device) {
      const buf = new Uint8Array(STRING_BUFFER);
      return result(nvmlDeviceGetName(device, buf, buf.length), 'nvmlDeviceGetName', () => cString(buf));
    },
    // nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv,nounits
    // (nvmlMemory_t: "used" includes the driver's reserved memory, as nvidia-smi before R510 showed)
    memory(device) {
      const buf = new Uint8Array(koffi.sizeof(types.memory));
      return result(nvmlDeviceGetMemoryInfo(device, buf), 'nvmlDeviceGetMemoryInfo', () => {
        const view = new DataView(buf.buffer);
        return {
          totalBytes: Number(view.getBigUint64(offset(memoryOffsets, 'total'), LE)),
          usedBytes: Number(view.getBigUint64(offset(memoryOffsets, 'used'), LE)),
          freeBytes: Number(view.getBigUint64(offset(memoryOffsets, 'free'), LE)),
        };
      });
    },
    // nvidia-smi --query-compute-apps=pid,used_memory --format=csv,nounits
    processes(device) {
      if (processFn === null) return { ok: true, value: null };
      const fn = processFn;
      // Ask the count (0 rows: INSUFFICIENT_SIZE with the count, or SUCCESS when none run), then read
      // with a few spare rows; a list that grew in between is asked again.
      const count: [number] = [0];
      let code = fn(device, count, null);
      for (let attempt = 0; attempt < 4 && code === NVML_RETURN.INSUFFICIENT_SIZE; attempt++) {
        const rows = count[0] + PROCESS_SLACK;
        const buf = new Uint8Array(rows * processSize);
        count[0] = rows;
        code = fn(device, count, buf);
        if (code === NVML_RETURN.SUCCESS) {
          const view = new DataView(buf.buffer);
          const list: NvmlProcess[] = [];
          for (let i = 0; i < Math.min(count[0], rows); i++) {
            list.push({ pid: view.getUint32(i * processSize + pidAt, LE), usedBytes: u64(view, i * processSize + processUsedAt) });
          }
          return { ok: true, value: list };
        }
      }
      if (code === NVML_RETURN.SUCCESS) return { ok: true, value: [] };
      if (unavailable(code)) return { ok: true, value: null };
      return result(code, processCall, () => null);
    },
    // nvidia-smi --query-gpu=utilization.gpu,utilization.memory --format=csv,nounits
    utilization(device) {
      if (nvmlDeviceGetUtilizationRates === null) return { ok: true, value: null };
      const buf = new Uint8Array(koffi.sizeof(types.utilization));
      const code = nvmlDeviceGetUtilizationRates(device, buf);
      if (unavailable(code)) return { ok: true, value: null };
      return result(code, 'nvmlDeviceGetUtilizationRates', () => {
        const view = new DataView(buf.buffer);
        return { gpuPct: view.getUint32(offset(utilizationOffsets, 'gpu'), LE), memoryPct: view.getUint32(offset(utilizationOffsets, 'memory'), LE) };
      });
    },
    // nvidia-smi --query-gpu=temperature.gpu --format=csv,nounits
    temperatureC(device) {
      if (nvmlDeviceGetTemperature === null) return { ok: true, value: null };
      const temp: [number] = [0];
      const code = nvmlDeviceGetTemperature(device, NVML_TEMPERATURE_GPU, temp);
      if (unavailable(code)) return { ok: true, value: null };
      return result(code, 'nvmlDeviceGetTemperature', () => temp[0]);
    },
    // nvidia-smi --query-gpu=power.draw --format=csv,nounits
    powerW(device) {
      if (nvmlDeviceGetPowerUsage === null) return { ok: true, value: null };
      const milliwatts: [number] = [0];
      const code = nvmlDeviceGetPowerUsage(device, milliwatts);
      if (unavailable(code)) return { ok: true, value: null };
      return result(code, 'nvmlDeviceGetPowerUsage', () => milliwatts[0] / 1000);
    },
    errorString,
    unload() {
      if (unloaded) return;
      unloaded = true;
      lib.unload();
    },
  };
}
