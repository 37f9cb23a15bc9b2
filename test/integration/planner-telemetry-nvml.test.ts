/**
 * The planner on NVML telemetry that fails after good figures (a fake libnvidia-ml built from C):
 * the sampler and the planner as the core runs them (one sample every 500 ms, the latest sample
 * of the device planned on, as `/api/plan` does). m10-v1: figures whose query failed are not live
 * from that moment; nothing is schedulable (QUEUE, TELEMETRY_STALE with the figures' age and the
 * limit) until a query succeeds again, and then the plan admits within one sample interval.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { plan } from '../../electron/core/planner/plan.js';
import { GiB, MiB, POLICY_M10_V1 } from '../../electron/core/planner/policy.js';
import { snapshotFromSample } from '../../electron/core/planner/snapshot.js';
import type { PlacementPlan, PlanRequest } from '../../electron/core/planner/types.js';
import { openNvmlProvider } from '../../electron/core/telemetry/nvml-provider.js';
import { TelemetrySampler } from '../../electron/core/telemetry/sampler.js';
import { buildFakeNvml, fakeUuid, writeFakeNvml, type FakeDevice } from '../fixtures/fake-nvml/build.js';

const INTERVAL_US = 500_000;
const gpu: FakeDevice = { uuid: fakeUuid(7), name: 'NVIDIA Fake 24GB', total: 24 * GiB, used: 3 * GiB, processes: [{ pid: 4242, used: 3 * GiB }], util: 10, temp: 40, powerMw: 100_000 };
const request: PlanRequest = { capability: 'chat', modelKey: 'model-a', contextSize: 4096, gpuLayers: 99, engineKind: 'builtin', priority: 'interactive', peakBytes: 512 * MiB, peakSource: 'ESTIMATED', weight: 1 };

let dir = '';
let lib = '';
let json = '';
const closers: (() => void)[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-plan-nvml-'));
  lib = buildFakeNvml(dir, 'full');
  json = join(dir, 'fake.json');
  process.env['FAKE_NVML_JSON'] = json;
});
afterEach(() => {
  for (const close of closers.splice(0)) close();
});
afterAll(() => {
  delete process.env['FAKE_NVML_JSON'];
  rmSync(dir, { recursive: true, force: true });
});

/** The core's pipeline on a fake clock: tick() samples (as the 500 ms timer does), planNow() plans
 *  on the device's latest sample however old. */
function pipeline(): { clock: FakeClock; tick(): void; planNow(): PlacementPlan } {
  writeFakeNvml(json, { devices: [gpu] });
  const clock = new FakeClock();
  const provider = openNvmlProvider({ path: lib, wallUs: () => clock.wallUs() });
  const sampler = new TelemetrySampler({ provider, wallUs: () => clock.wallUs() });
  closers.push(() => sampler.close());
  return {
    clock,
    tick: () => void sampler.tick(),
    planNow: () =>
      plan(request, { ...snapshotFromSample({ nowUs: clock.wallUs(), node: 'test-node', gpuKey: gpu.uuid, sample: sampler.latest(gpu.uuid), pressure: 'NORMAL' }), residents: [], leases: [] }, POLICY_M10_V1),
  };
}

/** Sample every interval for `forUs`, planning after each sample. */
function run(p: ReturnType<typeof pipeline>, forUs: number): PlacementPlan[] {
  const plans: PlacementPlan[] = [];
  for (let t = 0; t < forUs; t += INTERVAL_US) {
    p.clock.advance(INTERVAL_US);
    p.tick();
    plans.push(p.planNow());
  }
  return plans;
}

describe.skipIf(process.platform === 'win32')('planning on NVML telemetry that fails after good figures', () => {
  it("a device whose memory query fails: QUEUE TELEMETRY_STALE within one sample interval, for as long as it fails; ADMIT within one interval of good figures", () => {
    const p = pipeline();
    p.tick();
    expect(p.planNow()).toMatchObject({ verdict: 'ADMIT', reasons: [{ code: 'FITS' }] });
    const goodAtUs = p.clock.wallUs();

    // Every memory query of the GPU fails for 3.5 s.
    writeFakeNvml(json, { devices: [{ ...gpu, memoryError: 999 }] });
    const failing = run(p, 3_500_000);
    for (const [i, placed] of failing.entries()) {
      expect(placed.verdict, `${(i + 1) * 0.5} s into the failure`).toBe('QUEUE');
      expect(placed.attribution).toBe('UNKNOWN');
      expect(placed.breakdown.schedulableBytes).toBe(0);
      // The age is that of the last good figures, never re-stamped by the failed query.
      expect(placed.reasons).toEqual([{ code: 'TELEMETRY_STALE', requestedBytes: 640 * MiB, sampleAgeUs: p.clock.wallUs() - goodAtUs - (failing.length - 1 - i) * INTERVAL_US, staleAfterUs: 2_000_000, queryFailed: true }]);
    }

    // Good figures again: admitted at the first sample.
    writeFakeNvml(json, { devices: [gpu] });
    const [back] = run(p, INTERVAL_US);
    expect(back).toMatchObject({ verdict: 'ADMIT', attribution: 'KNOWN', reasons: [{ code: 'FITS' }] });
  });

  it('every query of the library failing: the same, at once rather than once the figures are 2 s old', () => {
    const p = pipeline();
    p.tick();
    expect(p.planNow().verdict).toBe('ADMIT');
    // The fake answers every query (the device count too) with NVML_ERROR_UNKNOWN.
    writeFileSync(json, '{ "devices": [ not json');
    const failing = run(p, 3_500_000);
    expect(failing.map((x) => x.verdict)).toEqual(failing.map(() => 'QUEUE'));
    expect(failing[0]?.reasons[0]).toMatchObject({ code: 'TELEMETRY_STALE', sampleAgeUs: INTERVAL_US, staleAfterUs: 2_000_000, queryFailed: true });
    writeFakeNvml(json, { devices: [gpu] });
    expect(run(p, INTERVAL_US)[0]?.verdict).toBe('ADMIT');
  });

  it('a GPU whose queries fail before it ever gave figures: QUEUE TELEMETRY_MISSING, not REJECT_CAPACITY on a device of 0 bytes', () => {
    writeFakeNvml(json, { devices: [{ ...gpu, memoryError: 999 }] });
    const clock = new FakeClock();
    const provider = openNvmlProvider({ path: lib, wallUs: () => clock.wallUs() });
    const sampler = new TelemetrySampler({ provider, wallUs: () => clock.wallUs() });
    closers.push(() => sampler.close());
    sampler.tick();
    const placed = plan(request, { ...snapshotFromSample({ nowUs: clock.wallUs(), node: 'test-node', gpuKey: gpu.uuid, sample: sampler.latest(gpu.uuid), pressure: 'NORMAL' }), residents: [], leases: [] }, POLICY_M10_V1);
    expect(placed.verdict).toBe('QUEUE');
    expect(placed.reasons).toEqual([{ code: 'TELEMETRY_MISSING', requestedBytes: 640 * MiB }]);
    expect(placed.accelerator).toEqual({ key: gpu.uuid, name: 'NVIDIA Fake 24GB' });
  });
});
