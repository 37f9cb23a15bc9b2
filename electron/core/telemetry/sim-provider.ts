/**
 * Simulated telemetry from a JSON file, for tests, demos and machines without the hardware:
 *
 *   {"devices": [{"key": "sim-0", "name": "Simulated 24 GB", "totalBytes": 25769803776,
 *                 "usedBytes": 1073741824, "processes": [{"pid": 123, "usedBytes": 536870912}],
 *                 "health": "OK", "utilizationPct": 12, "temperatureC": 40, "powerW": 180}]}
 *
 * processes, health, utilizationPct, temperatureC and powerW are optional (null, 'OK', null, null,
 * null). The file is validated strictly: unknown fields, wrong types, bytes that are not whole
 * non-negative numbers, usedBytes above totalBytes, keys the registry cannot use, duplicate keys or pids are all
 * TelemetryError('BAD_INPUT') naming the file and the JSON path (devices[1].usedBytes).
 *
 * sample() re-reads the file when it changed (inode, size, mtime or ctime differ: one stat per
 * sample). A file that fails to read or validate makes every sample() throw until it is fixed; the
 * previous figures are not reused, since they no longer describe the file.
 */
import { readFileSync, statSync } from 'node:fs';
import { checkGpuKey } from '../registry/validate.js';
import { TelemetryError, type DeviceHealth, type DeviceSample, type ProcessUsage, type TelemetryProvider } from './types.js';

/** A simulated device: a DeviceSample without the time and source sample() adds. */
export type SimDevice = Omit<DeviceSample, 'sampledAtUs' | 'source'>;

export interface SimProviderOptions {
  file: string;
  wallUs: () => number;
}

const HEALTH: readonly DeviceHealth[] = ['OK', 'DEGRADED', 'FAILED', 'UNKNOWN'];
const TOP_FIELDS = ['devices'];
const DEVICE_FIELDS = ['key', 'name', 'totalBytes', 'usedBytes', 'processes', 'health', 'utilizationPct', 'temperatureC', 'powerW'];
const PROCESS_FIELDS = ['pid', 'usedBytes'];

type JsonObject = { [key: string]: unknown };

function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`;
  return `${typeof value} ${String(value)}`;
}

function join(path: string, field: string): string {
  return path === '' ? field : `${path}.${field}`;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Collects every problem with its JSON path. */
class Problems {
  readonly list: string[] = [];
  add(path: string, message: string): void {
    this.list.push(`${path === '' ? '(top level)' : path}: ${message}`);
  }
  object(value: unknown, path: string, allowed: readonly string[], required: readonly string[]): JsonObject | null {
    if (!isObject(value)) {
      this.add(path, `must be an object (got ${kind(value)})`);
      return null;
    }
    for (const field of Object.keys(value)) {
      if (!allowed.includes(field)) this.add(join(path, field), `unknown field (allowed: ${allowed.join(', ')})`);
    }
    for (const field of required) {
      if (!Object.hasOwn(value, field)) this.add(join(path, field), 'is missing');
    }
    return value;
  }
  bytes(value: unknown, path: string): number | null {
    if (value === undefined) return null; // reported as missing
    if (typeof value !== 'number') this.add(path, `must be a number of bytes (got ${kind(value)})`);
    else if (!Number.isFinite(value)) this.add(path, 'must be finite');
    else if (!Number.isInteger(value)) this.add(path, `must be a whole number of bytes (got ${value})`);
    else if (value < 0) this.add(path, `must not be negative (got ${value})`);
    else if (!Number.isSafeInteger(value)) this.add(path, `must be at most ${Number.MAX_SAFE_INTEGER} (got ${value})`);
    else return value;
    return null;
  }
  nullableNumber(value: unknown, path: string, min: number, max: number): number | null {
    if (value === undefined || value === null) return null;
    if (typeof value !== 'number' || !Number.isFinite(value)) this.add(path, `must be a finite number or null (got ${kind(value)})`);
    else if (value < min || value > max) this.add(path, `must be between ${min} and ${max} (got ${value})`);
    else return value;
    return null;
  }
}

/** Validates the text of a simulated-telemetry file; throws TelemetryError('BAD_INPUT'). */
export function parseSimTelemetry(text: string, file: string): SimDevice[] {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (error) {
    throw new TelemetryError('BAD_INPUT', `simulated telemetry ${file}: not valid JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  const problems = new Problems();
  const devices: SimDevice[] = [];
  const top = problems.object(root, '', TOP_FIELDS, TOP_FIELDS);
  const list = top?.['devices'];
  if (top !== null && list !== undefined && !Array.isArray(list)) problems.add('devices', `must be an array (got ${kind(list)})`);
  const keys = new Map<string, number>();
  (Array.isArray(list) ? (list as unknown[]) : []).forEach((entry, i) => {
    const path = `devices[${i}]`;
    const d = problems.object(entry, path, DEVICE_FIELDS, ['key', 'name', 'totalBytes', 'usedBytes']);
    if (d === null) return;
    const before = problems.list.length;

    const key = d['key'];
    if (typeof key !== 'string') {
      if (key !== undefined) problems.add(`${path}.key`, `must be a string (got ${kind(key)})`);
    } else {
      const checked = checkGpuKey(key);
      if (!checked.ok) problems.add(`${path}.key`, `${checked.message} (got ${JSON.stringify(key)})`);
      const first = keys.get(key);
      if (first !== undefined) problems.add(`${path}.key`, `duplicate key ${JSON.stringify(key)} (also devices[${first}].key)`);
      else keys.set(key, i);
    }
    const name = d['name'];
    if (name !== undefined && (typeof name !== 'string' || name.trim() === '')) problems.add(`${path}.name`, `must be a non-empty string (got ${kind(name)})`);

    const totalBytes = problems.bytes(d['totalBytes'], `${path}.totalBytes`);
    const usedBytes = problems.bytes(d['usedBytes'], `${path}.usedBytes`);
    if (totalBytes !== null && usedBytes !== null && usedBytes > totalBytes) {
      problems.add(`${path}.usedBytes`, `must not exceed totalBytes (${usedBytes} > ${totalBytes})`);
    }

    let processes: ProcessUsage[] | null = null;
    const rawProcesses = d['processes'];
    if (rawProcesses !== undefined && rawProcesses !== null) {
      if (!Array.isArray(rawProcesses)) problems.add(`${path}.processes`, `must be an array or null (got ${kind(rawProcesses)})`);
      else {
        processes = [];
        const pids = new Map<number, number>();
        (rawProcesses as unknown[]).forEach((rawProcess, j) => {
          const ppath = `${path}.processes[${j}]`;
          const p = problems.object(rawProcess, ppath, PROCESS_FIELDS, PROCESS_FIELDS);
          if (p === null) return;
          const pid = p['pid'];
          let pidOk = false;
          if (pid !== undefined) {
            if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) problems.add(`${ppath}.pid`, `must be a positive whole number (got ${kind(pid)})`);
            else {
              const first = pids.get(pid);
              if (first !== undefined) problems.add(`${ppath}.pid`, `duplicate pid ${pid} (also ${path}.processes[${first}].pid)`);
              else {
                pids.set(pid, j);
                pidOk = true;
              }
            }
          }
          const used = problems.bytes(p['usedBytes'], `${ppath}.usedBytes`);
          if (pidOk && used !== null && typeof pid === 'number') processes?.push({ pid, usedBytes: used });
        });
      }
    }

    let health: DeviceHealth = 'OK';
    const rawHealth = d['health'];
    if (rawHealth !== undefined) {
      const found = HEALTH.find((h) => h === rawHealth);
      if (found === undefined) problems.add(`${path}.health`, `must be one of ${HEALTH.join(', ')} (got ${kind(rawHealth)})`);
      else health = found;
    }
    const utilizationPct = problems.nullableNumber(d['utilizationPct'], `${path}.utilizationPct`, 0, 100);
    const temperatureC = problems.nullableNumber(d['temperatureC'], `${path}.temperatureC`, -273.15, 1000);
    const powerW = problems.nullableNumber(d['powerW'], `${path}.powerW`, 0, 100_000);

    if (problems.list.length === before && typeof key === 'string' && typeof name === 'string' && totalBytes !== null && usedBytes !== null) {
      devices.push({ key, name, totalBytes, usedBytes, processes, utilizationPct, temperatureC, powerW, health });
    }
  });
  if (problems.list.length > 0) {
    throw new TelemetryError('BAD_INPUT', `simulated telemetry ${file} is invalid:\n  ${problems.list.join('\n  ')}`);
  }
  return devices;
}

export class SimProvider implements TelemetryProvider {
  readonly source = 'simulated' as const;
  readonly file: string;
  private readonly wallUs: () => number;
  /** What the file looked like when it was last read; null: never read. */
  private signature: string | null = null;
  private devices: SimDevice[] = [];
  private error: TelemetryError | null = null;

  /** Reads and validates the file now: throws TelemetryError('BAD_INPUT') when it is not usable. */
  constructor(options: SimProviderOptions) {
    this.file = options.file;
    this.wallUs = options.wallUs;
    this.refresh();
    if (this.error !== null) throw this.error;
  }

  sample(): DeviceSample[] {
    this.refresh();
    if (this.error !== null) throw this.error;
    const sampledAtUs = this.wallUs();
    return this.devices.map((d) => ({
      ...d,
      processes: d.processes === null ? null : d.processes.map((p) => ({ ...p })),
      sampledAtUs,
      source: 'simulated',
    }));
  }

  close(): void {}

  private refresh(): void {
    let signature: string;
    try {
      const st = statSync(this.file);
      signature = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    } catch (error) {
      this.signature = null;
      this.error = new TelemetryError('BAD_INPUT', `simulated telemetry ${this.file} cannot be read (${error instanceof Error ? error.message : String(error)})`);
      return;
    }
    if (signature === this.signature) return;
    this.signature = signature;
    try {
      this.devices = parseSimTelemetry(readFileSync(this.file, 'utf8'), this.file);
      this.error = null;
    } catch (error) {
      this.devices = [];
      this.error =
        error instanceof TelemetryError
          ? error
          : new TelemetryError('BAD_INPUT', `simulated telemetry ${this.file} cannot be read (${error instanceof Error ? error.message : String(error)})`);
    }
  }
}
