/** The real koffi binding of NVML (native/nvml.ts) and the NVML provider, against a fake
 *  libnvidia-ml built from C (test/fixtures/fake-nvml): figures, fallbacks, lost GPUs, init errors. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { describeNvmlError, loadNvml, NvmlCallError, nvmlCandidates, nvmlResult, type NvmlLibrary } from '../../native/nvml.js';
import { FakeClock } from '../../electron/core/clock.js';
import { openNvmlProvider, type NvmlProvider } from '../../electron/core/telemetry/nvml-provider.js';
import { TelemetryError, type DeviceSample } from '../../electron/core/telemetry/types.js';
import { buildFakeNvml, fakeUuid, writeFakeNvml, type FakeDevice, type FakeNvmlConfig, type FakeNvmlVariant } from '../fixtures/fake-nvml/build.js';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

let dir = '';
const libs: Partial<Record<FakeNvmlVariant, string>> = {};
let jsonFile = '';
let testCount = 0;
const clock = new FakeClock();
const open: { close(): void }[] = [];

function lib(variant: FakeNvmlVariant): string {
  const path = libs[variant];
  if (path === undefined) throw new Error(`variant ${variant} was not built`);
  return path;
}

function fake(config: FakeNvmlConfig): void {
  writeFakeNvml(jsonFile, config);
}

function provider(variant: FakeNvmlVariant = 'full'): NvmlProvider {
  const p = openNvmlProvider({ path: lib(variant), wallUs: () => clock.wallUs() });
  open.push(p);
  return p;
}

function load(variant: FakeNvmlVariant): NvmlLibrary {
  const l = loadNvml({ path: lib(variant) });
  open.push({ close: () => l.unload() });
  return l;
}

function byKey(samples: DeviceSample[], key: string): DeviceSample {
  const found = samples.find((s) => s.key === key);
  if (found === undefined) throw new Error(`no sample for ${key} in ${samples.map((s) => s.key).join(', ')}`);
  return found;
}

const gpu0: FakeDevice = {
  uuid: fakeUuid(0),
  name: 'NVIDIA Fake 24GB',
  total: 24 * GiB,
  used: GiB + 123,
  processes: [
    { pid: 123, used: 512 * MiB },
    { pid: 4_000_000, used: 256 * MiB + 7 },
    { pid: 77, used: 5 * GiB },
  ],
  util: 37,
  temp: 55,
  powerMw: 215_500,
  lost: false,
  processesSupported: true,
};
const gpu1: FakeDevice = { uuid: fakeUuid(1), name: 'NVIDIA Fake 8GB', total: 8 * GiB, used: 300 * MiB, processes: [], util: 0, temp: 31 };

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-fake-nvml-'));
  for (const variant of ['full', 'no-v3', 'v1-only', 'minimal', 'no-meminfo'] as const) libs[variant] = buildFakeNvml(dir, variant);
});

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  testCount++;
  jsonFile = join(dir, `fake-${testCount}.json`);
  process.env['FAKE_NVML_JSON'] = jsonFile;
  fake({ devices: [gpu0, gpu1] });
});

afterEach(() => {
  for (const o of open.splice(0).reverse()) o.close();
  delete process.env['FAKE_NVML_JSON'];
});

describe.skipIf(process.platform === 'win32')('NVML binding (fake libnvidia-ml)', () => {
  it('reads memory, processes, utilization, temperature and power exactly, keyed by UUID', () => {
    const p = provider();
    expect(p.processApi).toBe('v3');
    expect(p.deviceCount()).toBe(2);
    const samples = p.sample();
    // toStrictEqual: no unknownUsagePids field when every process is measured.
    expect(samples).toStrictEqual([
      {
        key: gpu0.uuid,
        name: 'NVIDIA Fake 24GB',
        totalBytes: 24 * GiB,
        usedBytes: GiB + 123,
        processes: [
          { pid: 123, usedBytes: 512 * MiB },
          { pid: 4_000_000, usedBytes: 256 * MiB + 7 },
          { pid: 77, usedBytes: 5 * GiB },
        ],
        utilizationPct: 37,
        temperatureC: 55,
        powerW: 215.5,
        health: 'OK',
        sampledAtUs: clock.wallUs(),
        source: 'nvml',
      },
      {
        key: gpu1.uuid,
        name: 'NVIDIA Fake 8GB',
        totalBytes: 8 * GiB,
        usedBytes: 300 * MiB,
        processes: [],
        utilizationPct: 0,
        temperatureC: 31,
        // This GPU has no power sensor (the fake answers NOT_SUPPORTED): not available, not 0.
        powerW: null,
        health: 'OK',
        sampledAtUs: clock.wallUs(),
        source: 'nvml',
      },
    ]);
    expect(gpu0.uuid).toMatch(/^GPU-[0-9a-f-]{36}$/);
    expect(p.problems().size).toBe(0);
  });

  it('follows the library when its figures change between samples', () => {
    const p = provider();
    expect(byKey(p.sample(), gpu0.uuid).usedBytes).toBe(GiB + 123);
    fake({ devices: [{ ...gpu0, used: 20 * GiB, processes: [{ pid: 9, used: 19 * GiB }], util: 99, temp: 81, powerMw: 349_000 }, gpu1] });
    clock.advance(500_000);
    const s = byKey(p.sample(), gpu0.uuid);
    expect(s).toMatchObject({ usedBytes: 20 * GiB, processes: [{ pid: 9, usedBytes: 19 * GiB }], utilizationPct: 99, temperatureC: 81, powerW: 349, sampledAtUs: clock.wallUs() });
  });

  it('falls back to nvmlDeviceGetComputeRunningProcesses_v2 when _v3 is missing (24-byte rows)', () => {
    const p = provider('no-v3');
    expect(p.processApi).toBe('v2');
    expect(byKey(p.sample(), gpu0.uuid).processes).toEqual([
      { pid: 123, usedBytes: 512 * MiB },
      { pid: 4_000_000, usedBytes: 256 * MiB + 7 },
      { pid: 77, usedBytes: 5 * GiB },
    ]);
  });

  it('falls back to the unversioned process query when _v3 and _v2 are missing (16-byte rows)', () => {
    const p = provider('v1-only');
    expect(p.processApi).toBe('v1');
    expect(byKey(p.sample(), gpu0.uuid).processes).toEqual([
      { pid: 123, usedBytes: 512 * MiB },
      { pid: 4_000_000, usedBytes: 256 * MiB + 7 },
      { pid: 77, usedBytes: 5 * GiB },
    ]);
  });

  it('reports utilization, temperature and power as null when the library lacks those symbols', () => {
    const l = load('minimal');
    expect(l.has).toEqual({ utilization: false, temperature: false, power: false, errorString: true });
    expect(load('full').has.power).toBe(true);
    const p = provider('minimal');
    const s = byKey(p.sample(), gpu0.uuid);
    expect(s).toMatchObject({ utilizationPct: null, temperatureC: null, powerW: null, health: 'OK', usedBytes: GiB + 123 });
    expect(s.processes).toHaveLength(3);
  });

  it('reports null for queries the device does not support (NOT_SUPPORTED), health still OK', () => {
    fake({ devices: [{ ...gpu0, util: null, temp: null, powerMw: null, processesSupported: false }] });
    const [s] = provider().sample();
    expect(s).toMatchObject({ processes: null, utilizationPct: null, temperatureC: null, powerW: null, health: 'OK', totalBytes: 24 * GiB });
  });

  it('keeps processes whose use NVML cannot say (NVML_VALUE_NOT_AVAILABLE) apart', () => {
    fake({ devices: [{ ...gpu0, processes: [{ pid: 5, used: MiB }, { pid: 6, used: null }] }, { ...gpu1, processes: [{ pid: 7, used: null }, { pid: 8, used: null }] }] });
    const samples = provider().sample();
    const a = byKey(samples, gpu0.uuid);
    expect(a.processes).toEqual([{ pid: 5, usedBytes: MiB }]);
    expect(a.unknownUsagePids).toEqual([6]);
    // None measurable (as under Windows WDDM): the device cannot attribute memory.
    const b = byKey(samples, gpu1.uuid);
    expect(b.processes).toBeNull();
    expect(b.unknownUsagePids).toEqual([7, 8]);
  });

  it('marks a GPU that falls off the bus FAILED with its last good figures; the other GPU stays OK', () => {
    const p = provider();
    p.sample();
    fake({ devices: [{ ...gpu0, lost: true }, gpu1] });
    clock.advance(500_000);
    const samples = p.sample();
    expect(byKey(samples, gpu0.uuid)).toEqual({
      key: gpu0.uuid,
      name: 'NVIDIA Fake 24GB',
      totalBytes: 24 * GiB,
      usedBytes: GiB + 123,
      processes: null,
      utilizationPct: null,
      temperatureC: null,
      powerW: null,
      health: 'FAILED',
      // The last good figures keep the time they were read at; the failure says since when they
      // are not live.
      sampledAtUs: clock.wallUs() - 500_000,
      source: 'nvml',
      failure: { atUs: clock.wallUs(), lastGood: true, message: expect.stringMatching(/GPU_IS_LOST \(GPU is lost\)/) as unknown as string },
    });
    expect(byKey(samples, gpu1.uuid)).toMatchObject({ health: 'OK', usedBytes: 300 * MiB, temperatureC: 31 });
    expect(p.problems().get(gpu0.uuid)).toMatch(/GPU_IS_LOST \(GPU is lost\)/);
    expect(p.problems().has(gpu1.uuid)).toBe(false);
  });

  it('reports a GPU lost before its first sample as nvml-<index>, FAILED, with 0 bytes (not invented)', () => {
    fake({ devices: [gpu0, { ...gpu1, lost: true }] });
    const samples = provider().sample();
    expect(samples.map((s) => [s.key, s.health])).toEqual([
      [gpu0.uuid, 'OK'],
      ['nvml-1', 'FAILED'],
    ]);
    expect(byKey(samples, 'nvml-1')).toMatchObject({ name: 'NVIDIA GPU 1', totalBytes: 0, usedBytes: 0, processes: null, failure: { lastGood: false } });
  });

  it('reports a device whose memory query fails otherwise as UNKNOWN', () => {
    fake({ devices: [{ ...gpu0, memoryError: 999 }, gpu1] });
    const p = provider();
    const s = byKey(p.sample(), gpu0.uuid);
    expect(s).toMatchObject({ health: 'UNKNOWN', totalBytes: 0, usedBytes: 0, processes: null, name: 'NVIDIA Fake 24GB', failure: { lastGood: false } });
    expect(p.problems().get(gpu0.uuid)).toContain('nvmlDeviceGetMemoryInfo: UNKNOWN');
  });

  it('keeps a UUID that is not a registry key as the key, and says so', () => {
    const mig = 'MIG-GPU-8f2c1a7e-0000-4000-8000-000000000000/1/0';
    fake({ devices: [{ ...gpu0, uuid: mig }] });
    const p = provider();
    expect(p.sample()[0]?.key).toBe(mig);
    expect(p.problems().get(mig)).toMatch(/not a valid registry key/);
  });

  it('throws a TelemetryError naming the NVML code when nvmlInit_v2 fails', () => {
    fake({ devices: [gpu0], initError: 9 });
    let caught: unknown;
    try {
      provider();
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(TelemetryError);
    expect(caught).toBeInstanceOf(NvmlCallError);
    const error = caught as NvmlCallError;
    expect(error.code).toBe('DRIVER_ERROR');
    expect(error.nvml).toMatchObject({ name: 'DRIVER_NOT_LOADED', code: 9, call: 'nvmlInit_v2', text: 'Driver Not Loaded' });
    expect(error.message).toBe('NVML nvmlInit_v2: DRIVER_NOT_LOADED (Driver Not Loaded)');

    fake({ devices: [gpu0], initError: 4 });
    expect(() => provider()).toThrow(/NO_PERMISSION/);
  });

  it('is unavailable when a required symbol is missing, naming the symbol', () => {
    expect(() => loadNvml({ path: lib('no-meminfo') })).toThrow(TelemetryError);
    expect(() => loadNvml({ path: lib('no-meminfo') })).toThrow(/lacks the required NVML symbol nvmlDeviceGetMemoryInfo/);
    try {
      loadNvml({ path: lib('no-meminfo') });
    } catch (error) {
      expect((error as TelemetryError).code).toBe('LIBRARY_UNAVAILABLE');
    }
  });

  it('is unavailable when the library file does not exist, or on a platform without NVML', () => {
    const missing = join(dir, 'nowhere', 'libnvidia-ml.so.1');
    expect(() => loadNvml({ path: missing })).toThrow(`${missing} not found`);
    expect(() => loadNvml({ env: { GPU_SHARE_NVML_LIB: missing } })).toThrow(`${missing} not found`);
    expect(() => loadNvml({ env: {}, platform: 'darwin' })).toThrow('NVML does not exist on darwin');
    expect(nvmlCandidates({ env: {}, platform: 'linux' })).toEqual(['libnvidia-ml.so.1']);
    expect(nvmlCandidates({ env: {}, platform: 'win32' })[0]).toBe('nvml.dll');
    expect(nvmlCandidates({ env: { GPU_SHARE_NVML_LIB: '/x/libnvidia-ml.so.1' }, platform: 'linux' })).toEqual(['/x/libnvidia-ml.so.1']);
  });

  it('shuts NVML down on close; sampling a closed provider throws; init is reference-counted', () => {
    const a = provider();
    const b = provider();
    a.close();
    expect(() => a.sample()).toThrow(/closed/);
    expect(b.sample()).toHaveLength(2);
    const l = load('full');
    expect(l.init().ok).toBe(true);
    expect(l.shutdown().ok).toBe(true);
  });

  it('reports a whole-library failure (device count) as a thrown TelemetryError', () => {
    const l = load('full');
    // Not initialised: every query answers UNINITIALIZED.
    const count = l.deviceCount();
    expect(count.ok).toBe(false);
    if (!count.ok) expect(describeNvmlError(count)).toBe('nvmlDeviceGetCount_v2: UNINITIALIZED (Uninitialized)');
  });

  it('maps every nvmlReturn_t to a name', () => {
    const name = (code: number): string => {
      const r = nvmlResult(code, 'f', () => 0);
      return r.ok ? 'SUCCESS' : r.name;
    };
    expect([0, 1, 3, 4, 7, 9, 13, 15, 999].map(name)).toEqual(['SUCCESS', 'UNINITIALIZED', 'NOT_SUPPORTED', 'NO_PERMISSION', 'INSUFFICIENT_SIZE', 'DRIVER_NOT_LOADED', 'FUNCTION_NOT_FOUND', 'GPU_IS_LOST', 'UNKNOWN']);
    const odd = nvmlResult(12345, 'nvmlX', () => 0);
    expect(odd.ok).toBe(false);
    if (!odd.ok) expect(describeNvmlError(odd)).toBe('nvmlX: UNKNOWN (code 12345)');
  });
});
