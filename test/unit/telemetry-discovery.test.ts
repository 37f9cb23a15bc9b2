/** Which provider discovery picks and why (sim, NVML through the fake library, metal-0, cpu-0),
 *  and the sampler: staleness on a fake clock, errors that do not stop sampling, the timer. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { discoverTelemetry, type Discovery } from '../../electron/core/telemetry/discovery.js';
import { TelemetrySampler, type SamplerTimer } from '../../electron/core/telemetry/sampler.js';
import { SimProvider } from '../../electron/core/telemetry/sim-provider.js';
import { POLICY_M10_V1 } from '../../electron/core/planner/policy.js';
import { isStale, SAMPLE_INTERVAL_MS, TelemetryError, type DeviceSample, type TelemetryProvider } from '../../electron/core/telemetry/types.js';
import { buildFakeNvml, fakeUuid, writeFakeNvml } from '../fixtures/fake-nvml/build.js';

const GiB = 1024 ** 3;
let dir = '';
let fakeLib = '';
const clock = new FakeClock();
const wallUs = (): number => clock.wallUs();
const discovered: Discovery[] = [];

function discover(options: Omit<Parameters<typeof discoverTelemetry>[0], 'wallUs'>): Discovery {
  const d = discoverTelemetry({ wallUs, ...options });
  discovered.push(d);
  return d;
}

function simFile(name: string, usedBytes = GiB): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify({ devices: [{ key: 'sim-0', name: 'Sim', totalBytes: 8 * GiB, usedBytes }] }));
  return path;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-discovery-'));
  if (process.platform !== 'win32') fakeLib = buildFakeNvml(dir, 'full');
});

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

afterEach(() => {
  for (const d of discovered.splice(0)) d.provider.close();
  delete process.env['FAKE_NVML_JSON'];
});

describe('discoverTelemetry', () => {
  it('uses the simulated file from --sim, then from GPU_SHARE_SIM', () => {
    const a = simFile('a.json');
    const b = simFile('b.json', 2 * GiB);
    const fromFlag = discover({ simFile: a, env: { GPU_SHARE_SIM: b } });
    expect(fromFlag.provider).toBeInstanceOf(SimProvider);
    expect(fromFlag.reason).toBe(`simulated telemetry from ${a} (--sim)`);
    expect(fromFlag.provider.sample()[0]?.usedBytes).toBe(GiB);
    const fromEnv = discover({ env: { GPU_SHARE_SIM: b } });
    expect(fromEnv.reason).toBe(`simulated telemetry from ${b} (GPU_SHARE_SIM)`);
    expect(fromEnv.provider.sample()[0]?.usedBytes).toBe(2 * GiB);
  });

  it('does not fall back when the simulated file asked for is invalid', () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"devices": 1}');
    expect(() => discoverTelemetry({ simFile: bad, wallUs })).toThrow(TelemetryError);
    expect(() => discoverTelemetry({ simFile: bad, wallUs })).toThrow(/devices: must be an array/);
  });

  it('falls back to cpu-0 with a reason when the NVML library is missing', () => {
    const missing = join(dir, 'none', 'libnvidia-ml.so.1');
    const d = discover({ env: { GPU_SHARE_NVML_LIB: missing }, platform: 'linux' });
    expect(d.reason).toBe(`NVML unavailable: ${missing} not found; using the host CPU (cpu-0)`);
    expect(d.provider.source).toBe('cpu');
    const [sample] = d.provider.sample();
    expect(sample).toMatchObject({ key: 'cpu-0', source: 'cpu', health: 'OK', sampledAtUs: clock.wallUs() });
  });

  it('says when NVML does not exist on the platform', () => {
    const d = discover({ env: {}, platform: 'freebsd' });
    expect(d.reason).toBe('NVML unavailable: NVML does not exist on freebsd; using the host CPU (cpu-0)');
  });

  it('uses metal-0 (unified memory) on macOS', () => {
    const d = discover({ env: {}, platform: 'darwin' });
    expect(d.reason).toBe('NVML unavailable: NVML does not exist on darwin; using the Apple GPU with unified memory (metal-0)');
    expect(d.provider.source).toBe('metal');
    const [sample] = d.provider.sample();
    expect(sample).toMatchObject({ key: 'metal-0', source: 'metal', health: 'OK', processes: null, temperatureC: null });
    expect(sample?.totalBytes).toBeGreaterThan(0);
  });

  describe.skipIf(process.platform === 'win32')('with the fake NVML library', () => {
    const useFake = (devices: number, initError = 0): NodeJS.ProcessEnv => {
      const json = join(dir, `nvml-${devices}-${initError}.json`);
      writeFakeNvml(json, {
        initError,
        devices: Array.from({ length: devices }, (_, i) => ({ uuid: fakeUuid(i), name: `Fake ${i}`, total: 24 * GiB, used: GiB })),
      });
      process.env['FAKE_NVML_JSON'] = json;
      return { GPU_SHARE_NVML_LIB: fakeLib };
    };

    it('uses NVML when it reports at least one GPU', () => {
      const d = discover({ env: useFake(2), platform: 'linux' });
      expect(d.reason).toBe(`NVML: 2 GPUs (${fakeLib})`);
      expect(d.provider.source).toBe('nvml');
      expect(d.provider.sample().map((s) => s.key)).toEqual([fakeUuid(0), fakeUuid(1)]);
    });

    it('prefers NVML to metal-0 wherever the library loads', () => {
      const d = discover({ env: useFake(1), platform: 'darwin' });
      expect(d.reason).toBe(`NVML: 1 GPU (${fakeLib})`);
    });

    it('falls back to cpu-0 when NVML sees no GPU', () => {
      const d = discover({ env: useFake(0), platform: 'linux' });
      expect(d.reason).toBe(`NVML reports no GPU (${fakeLib}); using the host CPU (cpu-0)`);
      expect(d.provider.source).toBe('cpu');
    });

    it('falls back to cpu-0 naming the NVML code when nvmlInit_v2 fails', () => {
      const d = discover({ env: useFake(1, 9), platform: 'linux' });
      expect(d.reason).toBe('NVML unavailable: NVML nvmlInit_v2: DRIVER_NOT_LOADED (Driver Not Loaded); using the host CPU (cpu-0)');
      expect(d.provider.source).toBe('cpu');
    });
  });
});

/** A provider whose answer the test sets. */
class ScriptedProvider implements TelemetryProvider {
  readonly source = 'simulated' as const;
  next: (() => DeviceSample[]) | null = null;
  closed = false;
  sample(): DeviceSample[] {
    if (this.next === null) throw new Error('no answer scripted');
    return this.next();
  }
  close(): void {
    this.closed = true;
  }
}

const sampleAt = (key: string, usedBytes: number): DeviceSample => ({
  key,
  name: key,
  totalBytes: 8 * GiB,
  usedBytes,
  processes: [],
  utilizationPct: null,
  temperatureC: null,
  powerW: null,
  health: 'OK',
  sampledAtUs: clock.wallUs(),
  source: 'simulated',
});

const STALE_AFTER_US = POLICY_M10_V1.staleAfterUs;

describe('TelemetrySampler', () => {
  it('keeps the latest sample per device, which goes stale after STALE_AFTER_US', () => {
    const provider = new ScriptedProvider();
    const sampler = new TelemetrySampler({ provider, wallUs });
    provider.next = () => [sampleAt('a', 1), sampleAt('b', 2)];
    expect(sampler.tick()).toHaveLength(2);
    const t0 = clock.wallUs();
    const a = sampler.latest('a');
    expect(a?.usedBytes).toBe(1);
    expect(sampler.latest('zzz')).toBeNull();
    if (a === null) throw new Error('no sample');

    clock.advance(STALE_AFTER_US);
    expect(sampler.isStale(a, clock.wallUs())).toBe(false);
    expect(sampler.fresh('a', clock.wallUs())).toBe(a);
    clock.advance(1);
    expect(sampler.isStale(a, clock.wallUs())).toBe(true);
    expect(sampler.fresh('a', clock.wallUs())).toBeNull();

    // Only a reports now: b keeps its old figures, with their own time, marked failed from now.
    provider.next = () => [sampleAt('a', 3)];
    sampler.tick();
    expect(sampler.fresh('a', clock.wallUs())?.usedBytes).toBe(3);
    expect(sampler.latest('b')?.sampledAtUs).toBe(t0);
    expect(sampler.latest('b')?.failure).toEqual({ atUs: clock.wallUs(), lastGood: true, message: 'the simulated provider no longer lists this device' });
    expect(isStale(sampler.latest('b') ?? { sampledAtUs: 0 }, clock.wallUs(), STALE_AFTER_US)).toBe(true);
    expect(sampler.all().map((s) => s.key)).toEqual(['a', 'b']);
  });

  it('treats a sample from well in the future (the clock stepped back) as stale', () => {
    expect(isStale({ sampledAtUs: clock.wallUs() + STALE_AFTER_US + 1 }, clock.wallUs(), STALE_AFTER_US)).toBe(true);
    expect(isStale({ sampledAtUs: clock.wallUs() + 1000 }, clock.wallUs(), STALE_AFTER_US)).toBe(false);
  });

  it('records a provider error and keeps sampling', () => {
    const provider = new ScriptedProvider();
    const errors: TelemetryError[] = [];
    const sampler = new TelemetrySampler({ provider, wallUs, onError: (e) => errors.push(e) });
    provider.next = () => [sampleAt('a', 1)];
    sampler.tick();
    expect(sampler.ok).toBe(true);

    clock.advance(500_000);
    provider.next = () => {
      throw new TelemetryError('BAD_INPUT', 'sim.json: devices[0].usedBytes: must not be negative');
    };
    expect(sampler.tick()).toBeNull();
    expect(sampler.ok).toBe(false);
    expect(sampler.lastError()).toEqual({ error: errors[0], atUs: clock.wallUs() });
    expect(sampler.lastError()?.error.code).toBe('BAD_INPUT');
    // The last figures stay, never re-stamped, and are not live from the failed query on (not
    // only once they are 2 s old).
    const kept = sampler.latest('a');
    expect(kept?.usedBytes).toBe(1);
    expect(kept?.sampledAtUs).toBe(clock.wallUs() - 500_000);
    expect(kept?.failure).toMatchObject({ atUs: clock.wallUs(), lastGood: true });
    expect(sampler.fresh('a', clock.wallUs())).toBeNull();

    provider.next = () => {
      throw new RangeError('boom');
    };
    sampler.tick();
    expect(sampler.lastError()?.error).toBeInstanceOf(TelemetryError);
    expect(sampler.lastError()?.error.message).toBe('the simulated provider failed: boom');
    expect(sampler.failureCount).toBe(2);

    clock.advance(500_000);
    provider.next = () => [sampleAt('a', 7)];
    sampler.tick();
    expect(sampler.ok).toBe(true);
    expect(sampler.fresh('a', clock.wallUs())?.usedBytes).toBe(7);
    expect(sampler.lastError()?.error.message).toBe('the simulated provider failed: boom');
  });

  it('samples at once on start, then every SAMPLE_INTERVAL_MS on the injected timer', () => {
    const calls: { callback: () => void; ms: number }[] = [];
    let cleared: unknown = null;
    const timer: SamplerTimer = {
      setInterval: (callback, ms) => {
        calls.push({ callback, ms });
        return 'handle-1';
      },
      clearInterval: (handle) => {
        cleared = handle;
      },
    };
    const provider = new ScriptedProvider();
    let used = 0;
    provider.next = () => [sampleAt('a', ++used)];
    const seen: number[] = [];
    const sampler = new TelemetrySampler({ provider, wallUs, timer, onSample: (s) => seen.push(s[0]?.usedBytes ?? -1) });
    sampler.start();
    sampler.start();
    expect(calls).toHaveLength(1);
    expect(calls[0]?.ms).toBe(SAMPLE_INTERVAL_MS);
    expect(sampler.running).toBe(true);
    calls[0]?.callback();
    calls[0]?.callback();
    expect(seen).toEqual([1, 2, 3]);
    sampler.close();
    expect(cleared).toBe('handle-1');
    expect(sampler.running).toBe(false);
    expect(provider.closed).toBe(true);
  });

  it('follows a simulated file that changes and breaks between ticks', () => {
    const path = simFile('sampler.json');
    const sampler = new TelemetrySampler({ provider: new SimProvider({ file: path, wallUs }), wallUs });
    sampler.tick();
    expect(sampler.latest('sim-0')?.usedBytes).toBe(GiB);
    writeFileSync(path, '{"devices": [}');
    clock.advance(500_000);
    expect(sampler.tick()).toBeNull();
    expect(sampler.lastError()?.error.message).toContain('not valid JSON');
    simFile('sampler.json', 3 * GiB);
    clock.advance(500_000);
    sampler.tick();
    expect(sampler.fresh('sim-0', clock.wallUs())?.usedBytes).toBe(3 * GiB);
    sampler.close();
  });
});
