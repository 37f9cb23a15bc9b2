/** The planner, one case per verdict and reason code, with the exact byte figures of the formulas. */
import { describe, expect, it } from 'vitest';
import { plan } from '../../electron/core/planner/plan.js';
import { GiB, MiB, POLICY_M10_V1, dynamicReserveBytes, requirementBytes } from '../../electron/core/planner/policy.js';
import { PlannerInputError, type PlanRequest, type PlannerSnapshot } from '../../electron/core/planner/types.js';
import { LeaseBook } from '../../electron/core/planner/leases.js';
import { PlanHistory } from '../../electron/core/planner/history.js';
import { NOW, device, lease, request, resident, snapshot } from '../fixtures/planner-cases.js';

const P = POLICY_M10_V1;
const run = (req: PlanRequest, snap: PlannerSnapshot): ReturnType<typeof plan> => plan(req, snap, P);

describe('formulas (m10-v1)', () => {
  it('reserve = max(1 GiB, 5 % of total, 256 MiB)', () => {
    expect(dynamicReserveBytes(24 * GiB, P)).toBe(Math.round(0.05 * 24 * GiB)); // 1.2 GiB
    expect(dynamicReserveBytes(8 * GiB, P)).toBe(1 * GiB);
    expect(dynamicReserveBytes(0, P)).toBe(1 * GiB);
  });
  it('requirement = peak + max(128 MiB, 10 % of peak)', () => {
    expect(requirementBytes(6 * GiB, P)).toBe(6 * GiB + Math.round(0.6 * GiB));
    expect(requirementBytes(512 * MiB, P)).toBe(640 * MiB);
  });
  it('accounts exactly: physical, unmanaged, leases, schedulable, invariant delta', () => {
    const result = run(
      request(),
      snapshot({
        device: device({ observedUsedBytes: 10 * GiB, processes: [{ pid: 11, usedBytes: 3 * GiB }, { pid: 12, usedBytes: 1 * GiB }, { pid: 99, usedBytes: 6 * GiB }] }),
        residents: [resident('a', { pid: 11 }), resident('b', { pid: 12 })],
        leases: [lease('l1', { reservedBytes: 2 * GiB, materializedBytes: 512 * MiB }), lease('expired', { expiresAtUs: NOW - 1 })],
      }),
    );
    const reserve = Math.round(0.05 * 24 * GiB);
    expect(result.attribution).toBe('KNOWN');
    expect(result.breakdown).toEqual({
      totalBytes: 24 * GiB,
      observedUsedBytes: 10 * GiB,
      managedResidentBytes: 4 * GiB,
      unmanagedExternalBytes: 6 * GiB,
      futureLeaseBytes: 1536 * MiB,
      reserveBytes: reserve,
      schedulableBytes: 24 * GiB - 10 * GiB - 1536 * MiB - reserve,
      requirementBytes: requirementBytes(6 * GiB, P),
      invariantDeltaBytes: 6 * GiB,
      physicalUsedBytes: 10 * GiB,
    });
  });
  it('uses the envelopes when the driver has no per-process figures (ESTIMATED); physical use is the larger', () => {
    const result = run(request(), snapshot({ device: device({ observedUsedBytes: 3 * GiB, processes: null }), residents: [resident('a', { envelopeBytes: 5 * GiB })] }));
    expect(result.attribution).toBe('ESTIMATED');
    expect(result.breakdown.managedResidentBytes).toBe(5 * GiB);
    expect(result.breakdown.physicalUsedBytes).toBe(5 * GiB);
    expect(result.breakdown.unmanagedExternalBytes).toBe(0);
    expect(result.breakdown.invariantDeltaBytes).toBe(-2 * GiB);
  });
});

describe('verdicts and reasons', () => {
  it('ADMIT / FITS', () => {
    const result = run(request(), snapshot());
    expect(result.verdict).toBe('ADMIT');
    const schedulable = 24 * GiB - 2 * GiB - Math.round(0.05 * 24 * GiB);
    expect(result.reasons).toEqual([{ code: 'FITS', requestedBytes: requirementBytes(6 * GiB, P), schedulableBytes: schedulable }]);
    expect(result.headroomAfterBytes).toBe(schedulable - requirementBytes(6 * GiB, P));
  });

  it('ADMIT_AFTER_EVICTION: lowest priority first, then longest idle, then id; never busy, pinned or higher', () => {
    const residents = [
      resident('bg-recent', { pid: 21, priority: 'background', idleSinceUs: NOW - 10_000_000 }),
      resident('lab-old', { pid: 22, priority: 'lab', idleSinceUs: NOW - 900_000_000 }),
      resident('bg-old', { pid: 23, priority: 'background', idleSinceUs: NOW - 600_000_000 }),
      resident('busy', { pid: 24, priority: 'lab', busy: true }),
      resident('pinned', { pid: 25, priority: 'lab', pinned: true }),
      resident('vip', { pid: 26, priority: 'interactive' }),
    ];
    const processes = residents.map((r) => ({ pid: r.pid, usedBytes: 3 * GiB }));
    const result = run(request({ priority: 'background', peakBytes: 8 * GiB }), snapshot({ device: device({ observedUsedBytes: 18 * GiB, processes }), residents }));
    expect(result.verdict).toBe('ADMIT_AFTER_EVICTION');
    // 4.8 GiB schedulable, 8.8 GiB needed: two 3 GiB engines are enough, and only two are stopped.
    expect(result.evictions.map((e) => e.id)).toEqual(['lab-old', 'bg-old']);
    const schedulable = 24 * GiB - 18 * GiB - Math.round(0.05 * 24 * GiB);
    expect(result.reasons).toEqual([{ code: 'FITS_AFTER_EVICTION', requestedBytes: requirementBytes(8 * GiB, P), schedulableBytes: schedulable, freeableBytes: 6 * GiB }]);
  });

  it('QUEUE / WAIT_FOR_LEASES when loads in progress hold the space', () => {
    const result = run(request({ peakBytes: 12 * GiB }), snapshot({ device: device({ observedUsedBytes: 2 * GiB }), leases: [lease('l', { reservedBytes: 8 * GiB, materializedBytes: 0 })] }));
    expect(result.verdict).toBe('QUEUE');
    expect(result.reasons[0]).toMatchObject({ code: 'WAIT_FOR_LEASES', pendingBytes: 8 * GiB });
  });

  it('QUEUE / WAIT_FOR_BUSY_ENGINES when only busy engines stand in the way', () => {
    const residents = [resident('busy', { pid: 31, busy: true, priority: 'background' })];
    const result = run(request({ peakBytes: 12 * GiB }), snapshot({ device: device({ observedUsedBytes: 10 * GiB, processes: [{ pid: 31, usedBytes: 10 * GiB }] }), residents }));
    expect(result.verdict).toBe('QUEUE');
    expect(result.reasons[0]).toMatchObject({ code: 'WAIT_FOR_BUSY_ENGINES', pendingBytes: 10 * GiB, freeableBytes: 0 });
  });

  it('QUEUE / TELEMETRY_STALE and TELEMETRY_MISSING: nothing is schedulable (UNKNOWN)', () => {
    const stale = run(request(), snapshot({ device: device({ sampledAtUs: NOW - 2_500_000 }) }));
    expect(stale.verdict).toBe('QUEUE');
    expect(stale.attribution).toBe('UNKNOWN');
    expect(stale.breakdown.schedulableBytes).toBe(0);
    expect(stale.reasons).toEqual([{ code: 'TELEMETRY_STALE', requestedBytes: requirementBytes(6 * GiB, P), sampleAgeUs: 2_500_000 }]);
    const missing = run(request(), snapshot({ device: null }));
    expect(missing.reasons).toEqual([{ code: 'TELEMETRY_MISSING', requestedBytes: requirementBytes(6 * GiB, P) }]);
  });

  it('QUEUE / PRESSURE_DEFERS_BACKGROUND for background and lab under ELEVATED and HIGH; interactive goes on', () => {
    for (const pressure of ['ELEVATED', 'HIGH'] as const) {
      for (const priority of ['background', 'lab'] as const) {
        expect(run(request({ priority }), snapshot({ pressure })).reasons[0]).toEqual({ code: 'PRESSURE_DEFERS_BACKGROUND', pressure, requestedBytes: requirementBytes(6 * GiB, P) });
      }
      expect(run(request({ priority: 'interactive' }), snapshot({ pressure })).verdict).toBe('ADMIT');
    }
  });

  it('REJECT_CAPACITY / EXTERNAL_GPU_PRESSURE under CRITICAL pressure', () => {
    const result = run(request(), snapshot({ pressure: 'CRITICAL', device: device({ observedUsedBytes: 23.5 * GiB, processes: [] }) }));
    expect(result.verdict).toBe('REJECT_CAPACITY');
    expect(result.reasons).toEqual([{ code: 'EXTERNAL_GPU_PRESSURE', pressure: 'CRITICAL', requestedBytes: requirementBytes(6 * GiB, P), unmanagedExternalBytes: 23.5 * GiB }]);
  });

  it('REJECT_CAPACITY / EXCEEDS_DEVICE when it can never fit', () => {
    const result = run(request({ peakBytes: 23 * GiB }), snapshot());
    expect(result.reasons).toEqual([{ code: 'EXCEEDS_DEVICE', requestedBytes: requirementBytes(23 * GiB, P), capacityBytes: 24 * GiB - Math.round(0.05 * 24 * GiB) }]);
  });

  it('REJECT_CAPACITY / INSUFFICIENT_CAPACITY when an external process holds the memory', () => {
    const result = run(request({ peakBytes: 6 * GiB }), snapshot({ device: device({ observedUsedBytes: 18 * GiB, processes: [{ pid: 5, usedBytes: 18 * GiB }] }) }));
    expect(result.verdict).toBe('REJECT_CAPACITY');
    expect(result.reasons).toEqual([
      { code: 'INSUFFICIENT_CAPACITY', requestedBytes: requirementBytes(6 * GiB, P), schedulableBytes: 24 * GiB - 18 * GiB - Math.round(0.05 * 24 * GiB), freeableBytes: 0, unmanagedExternalBytes: 18 * GiB },
    ]);
  });

  it('REJECT_HEALTH / DEVICE_FAILED', () => {
    expect(run(request(), snapshot({ device: device({ health: 'FAILED' }) })).reasons).toEqual([{ code: 'DEVICE_FAILED', health: 'FAILED' }]);
  });

  it('REJECT_POLICY / DRAINING, LAB_PAUSED, CAPABILITY_NOT_ALLOWED', () => {
    const controls = { draining: false, labPaused: false, allowedCapabilities: null };
    expect(run(request(), snapshot({ controls: { ...controls, draining: true } })).reasons).toEqual([{ code: 'DRAINING' }]);
    expect(run(request({ priority: 'lab' }), snapshot({ controls: { ...controls, labPaused: true } })).reasons).toEqual([{ code: 'LAB_PAUSED' }]);
    expect(run(request({ priority: 'interactive' }), snapshot({ controls: { ...controls, labPaused: true } })).verdict).toBe('ADMIT');
    expect(run(request({ capability: 'code' }), snapshot({ controls: { ...controls, allowedCapabilities: ['chat'] } })).reasons).toEqual([{ code: 'CAPABILITY_NOT_ALLOWED', capability: 'code' }]);
  });
});

describe('bad input is an error, never a verdict', () => {
  it.each([
    ['request.peakBytes', () => run(request({ peakBytes: Number.NaN }), snapshot())],
    ['request.peakBytes', () => run(request({ peakBytes: -1 }), snapshot())],
    ['device.totalBytes', () => run(request(), snapshot({ device: device({ totalBytes: Number.POSITIVE_INFINITY }) }))],
    ['device.observedUsedBytes', () => run(request(), snapshot({ device: device({ observedUsedBytes: -5 }) }))],
    ['residents[0].envelopeBytes', () => run(request(), snapshot({ residents: [resident('a', { envelopeBytes: Number.NaN })] }))],
    ['leases[0].reservedBytes', () => run(request(), snapshot({ leases: [lease('l', { reservedBytes: undefined as unknown as number })] }))],
    ['request.contextSize', () => run(request({ contextSize: 1.5 }), snapshot())],
  ])('%s', (field, call) => {
    expect(call).toThrowError(PlannerInputError);
    expect(call).toThrowError(field);
  });
});

describe('leases and history', () => {
  it('never counts an expired lease (no_stale_gpu_lease)', () => {
    const book = new LeaseBook();
    book.take('load-1', 8 * GiB, NOW, 5_000_000);
    book.materialize('load-1', 2 * GiB);
    const before = run(request({ peakBytes: 12 * GiB }), snapshot({ leases: book.active(NOW) }));
    expect(before.breakdown.futureLeaseBytes).toBe(6 * GiB);
    const later = NOW + 5_000_001;
    const after = run(request({ peakBytes: 12 * GiB }), snapshot({ nowUs: later, device: device({ sampledAtUs: later }), leases: book.active(later) }));
    expect(after.breakdown.futureLeaseBytes).toBe(0);
    expect(book.active(later)).toEqual([]);
    // Even handed an expired lease directly, the planner ignores it.
    expect(run(request(), snapshot({ leases: [lease('old', { expiresAtUs: NOW })] })).breakdown.futureLeaseBytes).toBe(0);
  });

  it('keeps the last 500 plans', () => {
    const history = new PlanHistory(P.historySize);
    for (let i = 0; i < 520; i++) history.add(run(request({ contextSize: i }), snapshot()));
    expect(history.length).toBe(500);
    expect(history.list()[0]?.request.contextSize).toBe(20);
    expect(history.list({ verdict: 'ADMIT' })).toHaveLength(500);
  });
});
