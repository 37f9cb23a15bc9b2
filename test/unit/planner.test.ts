/** The planner, one case per verdict and reason code, with the exact byte figures of the formulas. */
import { describe, expect, it } from 'vitest';
import { plan } from '../../electron/core/planner/plan.js';
import { GiB, MiB, POLICY_M10_V1, POLICY_M10_V1_MAX_RESERVE, POLICY_REVISIONS, dynamicReserveBytes, policyByRevision, requirementBytes, switchRevision, withQueueDepth, type PlannerPolicy } from '../../electron/core/planner/policy.js';
import { PlannerInputError, WARNING_CODES, type PlanRequest, type PlannerSnapshot } from '../../electron/core/planner/types.js';
import { snapshotFromSample, usedFraction } from '../../electron/core/planner/snapshot.js';
import type { DeviceSample } from '../../electron/core/telemetry/types.js';
import { LeaseBook } from '../../electron/core/planner/leases.js';
import { PlanHistory } from '../../electron/core/planner/history.js';
import { NOW, device, lease, request, resident, snapshot } from '../fixtures/planner-cases.js';

const P = POLICY_M10_V1;
/** The reserve on the 24 GiB device of the cases: 5 % of it (1.2 GiB) + the 256 MiB runtime margin. */
const RESERVE_24 = Math.round(0.05 * 24 * GiB) + 256 * MiB;
const run = (req: PlanRequest, snap: PlannerSnapshot): ReturnType<typeof plan> => plan(req, snap, P);

describe('formulas (m10-v1)', () => {
  it('reserve = max(1 GiB, 5 % of total) + 256 MiB: the goldens for 8, 24, 80 and 141 GiB devices', () => {
    // 8 GiB: 5 % is 0.4 GiB, so 1 GiB + 256 MiB = 1.25 GiB.
    expect(dynamicReserveBytes(8 * GiB, P)).toBe(1_342_177_280);
    // 24 GiB: 5 % = 1.2 GiB (1288490189 B, rounded) + 256 MiB.
    expect(dynamicReserveBytes(24 * GiB, P)).toBe(1_556_925_645);
    // 80 GiB (H100): 4 GiB + 256 MiB.
    expect(dynamicReserveBytes(80 * GiB, P)).toBe(4_563_402_752);
    // 141 GiB (H200): 7.05 GiB (7569879859 B, rounded) + 256 MiB.
    expect(dynamicReserveBytes(141 * GiB, P)).toBe(7_838_315_315);
    expect(dynamicReserveBytes(0, P)).toBe(1 * GiB + 256 * MiB);
    // The runtime margin always counts: it is added, never compared.
    for (const total of [0, 8, 20, 24, 80, 141, 1024].map((g) => g * GiB)) {
      expect(dynamicReserveBytes(total, P)).toBe(Math.max(1 * GiB, Math.round(0.05 * total)) + 256 * MiB);
    }
  });
  it('m10-v1-max-reserve keeps the earlier reading, max(1 GiB, 5 %, 256 MiB), for operators who switch to it', () => {
    expect(dynamicReserveBytes(24 * GiB, POLICY_M10_V1_MAX_RESERVE)).toBe(Math.round(0.05 * 24 * GiB));
    expect(dynamicReserveBytes(8 * GiB, POLICY_M10_V1_MAX_RESERVE)).toBe(1 * GiB);
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
    const reserve = RESERVE_24;
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
    const schedulable = 24 * GiB - 2 * GiB - RESERVE_24;
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
    const schedulable = 24 * GiB - 18 * GiB - RESERVE_24;
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

  it('QUEUE / TELEMETRY_STALE (with the age and the limit) and TELEMETRY_MISSING: nothing is schedulable (UNKNOWN)', () => {
    const stale = run(request(), snapshot({ device: device({ sampledAtUs: NOW - 2_500_000 }) }));
    expect(stale.verdict).toBe('QUEUE');
    expect(stale.attribution).toBe('UNKNOWN');
    expect(stale.breakdown.schedulableBytes).toBe(0);
    expect(stale.reasons).toEqual([{ code: 'TELEMETRY_STALE', requestedBytes: requirementBytes(6 * GiB, P), sampleAgeUs: 2_500_000, staleAfterUs: 2_000_000 }]);
    expect(stale.eligible).toMatchObject({ sampleAgeUs: 2_500_000, staleAfterUs: 2_000_000 });
    expect(stale.headroomAfterBytes).toBe(-requirementBytes(6 * GiB, P));
    // At the limit it is still fresh; a sample stamped past the limit in the future is stale.
    expect(run(request(), snapshot({ device: device({ sampledAtUs: NOW - 2_000_000 }) })).verdict).toBe('ADMIT');
    expect(run(request(), snapshot({ device: device({ sampledAtUs: NOW + 3_000_000 }) })).reasons).toEqual([
      { code: 'TELEMETRY_STALE', requestedBytes: requirementBytes(6 * GiB, P), sampleAgeUs: -3_000_000, staleAfterUs: 2_000_000 },
    ]);
    const missing = run(request(), snapshot({ device: null, accelerator: { key: 'GPU-test', name: null } }));
    expect(missing.reasons).toEqual([{ code: 'TELEMETRY_MISSING', requestedBytes: requirementBytes(6 * GiB, P) }]);
    expect(missing.accelerator).toEqual({ key: 'GPU-test', name: null });
  });

  it('QUEUE / PRESSURE_DEFERS_BACKGROUND for background and lab under ELEVATED and HIGH that no eviction relieves; interactive goes on', () => {
    // 20 GiB of 24 used by an external process (83 %: ELEVATED), 21.75 GiB (90.6 %: HIGH, 0.8 GiB
    // schedulable after the 1.45 GiB reserve); nothing of ours.
    for (const [pressure, used] of [['ELEVATED', 20 * GiB], ['HIGH', 21.75 * GiB]] as const) {
      const snap = snapshot({ pressure, device: device({ observedUsedBytes: used, processes: [{ pid: 7, usedBytes: used }] }) });
      for (const priority of ['background', 'lab'] as const) {
        const result = run(request({ priority, peakBytes: 512 * MiB }), snap);
        expect(result.verdict).toBe('QUEUE');
        expect(result.reasons).toEqual([{ code: 'PRESSURE_DEFERS_BACKGROUND', pressure, pressureAfterEvictions: pressure, requestedBytes: 640 * MiB, freeableBytes: 0, usedAfterEvictionsBytes: used }]);
      }
      expect(run(request({ priority: 'interactive', peakBytes: 512 * MiB }), snap).verdict).toBe('ADMIT');
    }
  });

  it('REJECT_CAPACITY / EXTERNAL_GPU_PRESSURE under CRITICAL pressure that no eviction relieves, with the external bytes', () => {
    const result = run(request(), snapshot({ pressure: 'CRITICAL', device: device({ observedUsedBytes: 23.5 * GiB, processes: [] }) }));
    expect(result.verdict).toBe('REJECT_CAPACITY');
    expect(result.reasons).toEqual([
      { code: 'EXTERNAL_GPU_PRESSURE', pressure: 'CRITICAL', pressureAfterEvictions: 'CRITICAL', requestedBytes: requirementBytes(6 * GiB, P), freeableBytes: 0, usedAfterEvictionsBytes: 23.5 * GiB, unmanagedExternalBytes: 23.5 * GiB },
    ]);
  });

  it('REJECT_CAPACITY / EXCEEDS_DEVICE when it can never fit', () => {
    const result = run(request({ peakBytes: 23 * GiB }), snapshot());
    expect(result.reasons).toEqual([{ code: 'EXCEEDS_DEVICE', requestedBytes: requirementBytes(23 * GiB, P), capacityBytes: 24 * GiB - RESERVE_24 }]);
  });

  it('REJECT_CAPACITY / INSUFFICIENT_CAPACITY when an external process holds the memory', () => {
    const result = run(request({ peakBytes: 6 * GiB }), snapshot({ device: device({ observedUsedBytes: 18 * GiB, processes: [{ pid: 5, usedBytes: 18 * GiB }] }) }));
    expect(result.verdict).toBe('REJECT_CAPACITY');
    expect(result.reasons).toEqual([
      { code: 'INSUFFICIENT_CAPACITY', requestedBytes: requirementBytes(6 * GiB, P), schedulableBytes: 24 * GiB - 18 * GiB - RESERVE_24, freeableBytes: 0, unmanagedExternalBytes: 18 * GiB },
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

describe('pressure is judged on the use left after the plan\'s own evictions', () => {
  const reserve = RESERVE_24; // 1556925645 B
  const lab1 = resident('lab1', { pid: 51, priority: 'lab', idleSinceUs: NOW - 900_000_000 });
  const lab2 = resident('lab2', { pid: 52, priority: 'lab', idleSinceUs: NOW - 300_000_000 });

  it('CRITICAL caused by two idle lab engines of ours: the longer idle is stopped (ADMIT_AFTER_EVICTION), the level shown stays CRITICAL', () => {
    // 23.5 of 24 GiB (97.9 %), all of it ours: lab1 and lab2 use 11.75 GiB each.
    const snap = snapshot({
      pressure: 'CRITICAL',
      device: device({ observedUsedBytes: 23.5 * GiB, processes: [{ pid: 51, usedBytes: 11.75 * GiB }, { pid: 52, usedBytes: 11.75 * GiB }] }),
      residents: [lab2, lab1],
    });
    const result = run(request({ priority: 'lab' }), snap);
    expect(result.verdict).toBe('ADMIT_AFTER_EVICTION');
    expect(result.evictions.map((e) => [e.id, e.freedBytes])).toEqual([['lab1', 11.75 * GiB]]);
    expect(result.reasons).toEqual([
      { code: 'FITS_AFTER_EVICTION', requestedBytes: 7_086_696_038, schedulableBytes: 0, freeableBytes: 11.75 * GiB },
      // 11.75 of 24 GiB is 49 %: under ELEVATED's exit threshold (75 %).
      { code: 'PRESSURE_RELIEVED_BY_EVICTION', pressure: 'CRITICAL', pressureAfterEvictions: 'NORMAL', usedAfterEvictionsBytes: 11.75 * GiB },
    ]);
    expect(result.breakdown.unmanagedExternalBytes).toBe(0);
    expect(result.eligible).toMatchObject({ pressure: 'CRITICAL', pressureAfterEvictions: 'NORMAL' });
    // Worked out again on the use that remains: 24 − 11.75 − 1.45 (reserve) − 6.6 (requirement) GiB.
    expect(result.headroomAfterBytes).toBe(24 * GiB - 11.75 * GiB - reserve - 7_086_696_038);
    expect(result.headroomAfterBytes).toBe(4_509_715_661);
    // The same inputs at NORMAL pressure give the same eviction.
    expect(run(request({ priority: 'lab' }), { ...snap, pressure: 'NORMAL' }).evictions.map((e) => e.id)).toEqual(['lab1']);
  });

  it('HIGH caused by an idle lab engine holds back a background load that fits: the engine is stopped', () => {
    // 21.75 of 24 GiB (90.6 %): 6.25 GiB external, 15.5 GiB our idle lab1. 640 MiB fits in the
    // 0.8 GiB schedulable, but HIGH holds background loads back; without lab1, 6.25 GiB is 26 %: NORMAL.
    const snap = snapshot({
      pressure: 'HIGH',
      device: device({ observedUsedBytes: 21.75 * GiB, processes: [{ pid: 51, usedBytes: 15.5 * GiB }, { pid: 9, usedBytes: 6.25 * GiB }] }),
      residents: [lab1],
    });
    const result = run(request({ priority: 'background', peakBytes: 512 * MiB }), snap);
    expect(result.verdict).toBe('ADMIT_AFTER_EVICTION');
    expect(result.reasons).toEqual([
      { code: 'FITS_AFTER_EVICTION', requestedBytes: 640 * MiB, schedulableBytes: 858_993_459, freeableBytes: 15.5 * GiB },
      { code: 'PRESSURE_RELIEVED_BY_EVICTION', pressure: 'HIGH', pressureAfterEvictions: 'NORMAL', usedAfterEvictionsBytes: 6.25 * GiB },
    ]);
    expect(result.evictions.map((e) => e.id)).toEqual(['lab1']);
    // An interactive load is not held back by HIGH: it fits without stopping anything.
    expect(run(request({ priority: 'interactive', peakBytes: 512 * MiB }), snap)).toMatchObject({ verdict: 'ADMIT', evictions: [] });
  });

  it('stops only as many idle engines as the pressure and the fit need', () => {
    // 23.5 GiB: 14 GiB external, lab1 4.75 GiB, lab2 4.75 GiB (97.9 %: CRITICAL). Without lab1:
    // 18.75 GiB, 78 % (ELEVATED by the exit thresholds), enough for an interactive load of 2.2 GiB
    // (schedulable 24 − 18.75 − 1.2 = 4.05 GiB).
    const snap = snapshot({
      pressure: 'CRITICAL',
      device: device({ observedUsedBytes: 23.5 * GiB, processes: [{ pid: 51, usedBytes: 4.75 * GiB }, { pid: 52, usedBytes: 4.75 * GiB }, { pid: 9, usedBytes: 14 * GiB }] }),
      residents: [lab1, lab2],
    });
    const interactive = run(request({ priority: 'interactive', peakBytes: 2 * GiB }), snap);
    expect(interactive.verdict).toBe('ADMIT_AFTER_EVICTION');
    expect(interactive.evictions.map((e) => e.id)).toEqual(['lab1']);
    expect(interactive.reasons[1]).toEqual({ code: 'PRESSURE_RELIEVED_BY_EVICTION', pressure: 'CRITICAL', pressureAfterEvictions: 'ELEVATED', usedAfterEvictionsBytes: 18.75 * GiB });
    // A lab load is still held back at ELEVATED after one; after both, 14 GiB is 58 %: NORMAL.
    const lab = run(request({ priority: 'lab', peakBytes: 2 * GiB }), snap);
    expect(lab.evictions.map((e) => e.id)).toEqual(['lab1', 'lab2']);
    expect(lab.reasons[1]).toEqual({ code: 'PRESSURE_RELIEVED_BY_EVICTION', pressure: 'CRITICAL', pressureAfterEvictions: 'NORMAL', usedAfterEvictionsBytes: 14 * GiB });
  });

  it('CRITICAL that survives every permitted eviction is external: REJECT_CAPACITY with the external bytes, nothing stopped', () => {
    // 23.5 GiB: 23 GiB external, 0.5 GiB our idle lab1. Without lab1, 23 GiB is 95.8 %: still
    // above CRITICAL's exit threshold (93 %).
    const snap = snapshot({
      pressure: 'CRITICAL',
      device: device({ observedUsedBytes: 23.5 * GiB, processes: [{ pid: 51, usedBytes: 0.5 * GiB }, { pid: 9, usedBytes: 23 * GiB }] }),
      residents: [lab1],
    });
    const result = run(request({ priority: 'interactive', peakBytes: 512 * MiB }), snap);
    expect(result.verdict).toBe('REJECT_CAPACITY');
    expect(result.evictions).toEqual([]);
    expect(result.reasons).toEqual([
      { code: 'EXTERNAL_GPU_PRESSURE', pressure: 'CRITICAL', pressureAfterEvictions: 'CRITICAL', requestedBytes: 640 * MiB, freeableBytes: 0.5 * GiB, usedAfterEvictionsBytes: 23 * GiB, unmanagedExternalBytes: 23 * GiB },
    ]);
    expect(result.eligible).toMatchObject({ pressure: 'CRITICAL', pressureAfterEvictions: 'CRITICAL' });
  });

  it('engines it may not stop (busy, pinned, higher priority) do not relieve pressure', () => {
    const processes = [{ pid: 51, usedBytes: 11.75 * GiB }, { pid: 52, usedBytes: 11.75 * GiB }];
    const critical = (residents: ReturnType<typeof resident>[]): PlannerSnapshot => snapshot({ pressure: 'CRITICAL', device: device({ observedUsedBytes: 23.5 * GiB, processes }), residents });
    const expected = { code: 'EXTERNAL_GPU_PRESSURE', pressure: 'CRITICAL', pressureAfterEvictions: 'CRITICAL', requestedBytes: requirementBytes(6 * GiB, P), freeableBytes: 0, usedAfterEvictionsBytes: 23.5 * GiB, unmanagedExternalBytes: 0 };
    expect(run(request({ priority: 'lab' }), critical([{ ...lab1, busy: true }, { ...lab2, pinned: true }])).reasons).toEqual([expected]);
    expect(run(request({ priority: 'lab' }), critical([{ ...lab1, priority: 'interactive' }, { ...lab2, priority: 'background' }])).reasons).toEqual([expected]);
  });

  it('an ELEVATED level that survives the evictions defers background work, with what they would free', () => {
    // 20 GiB: 19 GiB external, 1 GiB idle lab1. Without it, 19 GiB is 79 %: still ELEVATED.
    const snap = snapshot({ pressure: 'ELEVATED', device: device({ observedUsedBytes: 20 * GiB, processes: [{ pid: 51, usedBytes: 1 * GiB }, { pid: 9, usedBytes: 19 * GiB }] }), residents: [lab1] });
    expect(run(request({ priority: 'background', peakBytes: 512 * MiB }), snap).reasons).toEqual([
      { code: 'PRESSURE_DEFERS_BACKGROUND', pressure: 'ELEVATED', pressureAfterEvictions: 'ELEVATED', requestedBytes: 640 * MiB, freeableBytes: 1 * GiB, usedAfterEvictionsBytes: 19 * GiB },
    ]);
  });

  it('a plan never changes the tracked level: the pressure tracker is fed only by telemetry', () => {
    const snap = snapshot({ pressure: 'CRITICAL', device: device({ observedUsedBytes: 23.5 * GiB, processes: [{ pid: 51, usedBytes: 23.5 * GiB }] }), residents: [lab1] });
    const frozen = Object.freeze({ ...snap, residents: Object.freeze([...snap.residents]) });
    expect(run(request({ priority: 'lab' }), frozen).eligible.pressure).toBe('CRITICAL');
    expect(frozen.pressure).toBe('CRITICAL');
  });
});

describe('fingerprint: canonical inputs and result, nothing from the clock', () => {
  const busyState = (): PlannerSnapshot =>
    snapshot({
      device: device({ observedUsedBytes: 10 * GiB, processes: [{ pid: 11, usedBytes: 3 * GiB }, { pid: 99, usedBytes: 7 * GiB }] }),
      residents: [resident('a', { pid: 11, idleSinceUs: NOW - 60_000_000 })],
      leases: [lease('l1', { reservedBytes: 2 * GiB, materializedBytes: 512 * MiB, expiresAtUs: NOW + 60_000_000 })],
    });
  const later = (snap: PlannerSnapshot, deltaUs: number): PlannerSnapshot => ({
    ...snap,
    nowUs: snap.nowUs + deltaUs,
    device: snap.device === null ? null : { ...snap.device, sampledAtUs: snap.device.sampledAtUs + deltaUs },
    residents: snap.residents.map((r) => ({ ...r, idleSinceUs: r.idleSinceUs + deltaUs })),
    leases: snap.leases.map((l) => ({ ...l, expiresAtUs: l.expiresAtUs + deltaUs })),
  });

  it('the same state planned twice, a second apart, gives the same fingerprint; the record keeps the times', () => {
    const a = run(request({ peakBytes: 12 * GiB }), busyState());
    const b = run(request({ peakBytes: 12 * GiB }), later(busyState(), 1_000_000));
    expect(b.fingerprint).toBe(a.fingerprint);
    expect(b.plannedAtUs - a.plannedAtUs).toBe(1_000_000);
    // Sample age, idle-for and lease expiry differ and change nothing either.
    const older = busyState();
    const c = run(request({ peakBytes: 12 * GiB }), {
      ...older,
      device: older.device === null ? null : { ...older.device, sampledAtUs: NOW - 1_900_000 },
      residents: older.residents.map((r) => ({ ...r, idleSinceUs: NOW - 3_600_000_000 })),
      leases: older.leases.map((l) => ({ ...l, expiresAtUs: NOW + 1 })),
    });
    expect(c.eligible.sampleAgeUs).toBe(1_900_000);
    expect(c.fingerprint).toBe(a.fingerprint);
    // Stale is a different result: a different fingerprint.
    expect(run(request({ peakBytes: 12 * GiB }), { ...older, device: older.device === null ? null : { ...older.device, sampledAtUs: NOW - 2_100_000 } }).fingerprint).not.toBe(a.fingerprint);
  });

  it('the same stale state twice gives the same fingerprint, though its age differs', () => {
    const stale = (age: number): PlannerSnapshot => snapshot({ device: device({ sampledAtUs: NOW - age }) });
    const a = run(request(), stale(2_500_000));
    const b = run(request(), stale(4_000_000));
    expect([a.reasons[0]?.sampleAgeUs, b.reasons[0]?.sampleAgeUs]).toEqual([2_500_000, 4_000_000]);
    expect(b.fingerprint).toBe(a.fingerprint);
  });

  it('one byte of used memory, a lease, a weight, the queue depth or the node changes it', () => {
    const base = run(request(), busyState()).fingerprint;
    const s = busyState();
    const dev = s.device ?? device();
    const changed: [string, string][] = [
      ['one byte observed', run(request(), { ...s, device: { ...dev, observedUsedBytes: dev.observedUsedBytes + 1 } }).fingerprint],
      ['one byte of a process', run(request(), { ...s, device: { ...dev, processes: [{ pid: 11, usedBytes: 3 * GiB + 1 }, { pid: 99, usedBytes: 7 * GiB }] } }).fingerprint],
      ['a lease more', run(request(), { ...s, leases: [...s.leases, lease('l2')] }).fingerprint],
      ['a lease one byte larger', run(request(), { ...s, leases: [lease('l1', { reservedBytes: 2 * GiB + 1, materializedBytes: 512 * MiB })] }).fingerprint],
      ["the request's weight", run(request({ weight: 2 }), s).fingerprint],
      ["a resident's weight", run(request(), { ...s, residents: [resident('a', { pid: 11, weight: 2 })] }).fingerprint],
      ['the queue depth', run(request(), { ...s, queueDepth: 1 }).fingerprint],
      ['the node', run(request(), { ...s, node: 'workstation-2' }).fingerprint],
      ['the policy', plan(request(), s, withQueueDepth(P, 8)).fingerprint],
    ];
    for (const [what, fingerprint] of changed) expect(fingerprint, what).not.toBe(base);
    expect(new Set(changed.map(([, f]) => f)).size).toBe(changed.length);
  });

  it('records the node, the accelerator, the queue and the weights', () => {
    const result = run(request({ weight: 3 }), { ...busyState(), queueDepth: 5 });
    expect(result.node).toBe('workstation-1');
    expect(result.accelerator).toEqual({ key: 'GPU-test', name: 'Test GPU 24GB' });
    expect(result.queue).toEqual({ depth: 5, maxDepth: 32 });
    expect(result.request.weight).toBe(3);
    expect(result.residents).toEqual([{ id: 'a', pid: 11, priority: 'background', busy: false, pinned: false, weight: 1, usedBytes: 3 * GiB }]);
    const overridden = plan(request(), busyState(), withQueueDepth(P, 8));
    expect(overridden.policy).toBe('m10-v1+queue.maxDepth=8');
    expect(overridden.queue.maxDepth).toBe(8);
    expect(withQueueDepth(P, 32)).toBe(P);
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
    ['request.weight', () => run(request({ weight: 0 }), snapshot())],
    ['residents[0].weight', () => run(request(), snapshot({ residents: [resident('a', { weight: Number.NaN })] }))],
    ['snapshot.queueDepth', () => run(request(), snapshot({ queueDepth: -1 }))],
    ['snapshot.node', () => run(request(), snapshot({ node: undefined as unknown as string }))],
    ['request.priority', () => run(request({ priority: 'toString' as unknown as 'lab' }), snapshot())],
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

describe('telemetry gaps (m10-v1: missing or stale telemetry is UNKNOWN, nothing schedulable, QUEUE)', () => {
  const sample = (overrides: Partial<DeviceSample> = {}): DeviceSample => ({
    key: 'GPU-test',
    name: 'Test GPU 24GB',
    totalBytes: 24 * GiB,
    usedBytes: 2 * GiB,
    processes: [],
    utilizationPct: null,
    temperatureC: null,
    powerW: null,
    health: 'OK',
    sampledAtUs: NOW - 100_000,
    source: 'nvml',
    ...overrides,
  });
  const planOn = (s: DeviceSample | null, policy = P): ReturnType<typeof plan> => plan(request(), { ...snapshotFromSample({ nowUs: NOW, node: 'workstation-1', gpuKey: 'GPU-test', sample: s, pressure: 'NORMAL' }), residents: [], leases: [] }, policy);

  it('a failed query after good figures: TELEMETRY_STALE at once with the figures\' age and the limit, never the old figures', () => {
    const result = planOn(sample({ health: 'UNKNOWN', processes: null, sampledAtUs: NOW - 400_000, failure: { atUs: NOW - 100_000, lastGood: true, message: 'nvmlDeviceGetMemoryInfo: UNKNOWN' } }));
    expect(result.verdict).toBe('QUEUE');
    expect(result.attribution).toBe('UNKNOWN');
    expect(result.breakdown.schedulableBytes).toBe(0);
    expect(result.reasons).toEqual([{ code: 'TELEMETRY_STALE', requestedBytes: requirementBytes(6 * GiB, P), sampleAgeUs: 400_000, staleAfterUs: 2_000_000, queryFailed: true }]);
    // The same figures, not failed, 0.4 s old: admitted.
    expect(planOn(sample({ sampledAtUs: NOW - 400_000 })).verdict).toBe('ADMIT');
  });

  it('failed queries before any good figure: TELEMETRY_MISSING (QUEUE), not EXCEEDS_DEVICE on a device of 0 bytes', () => {
    const result = planOn(sample({ totalBytes: 0, usedBytes: 0, health: 'UNKNOWN', processes: null, sampledAtUs: NOW, failure: { atUs: NOW, lastGood: false, message: 'nvmlDeviceGetMemoryInfo: UNKNOWN' } }));
    expect(result.verdict).toBe('QUEUE');
    expect(result.reasons).toEqual([{ code: 'TELEMETRY_MISSING', requestedBytes: requirementBytes(6 * GiB, P) }]);
    expect(result.accelerator).toEqual({ key: 'GPU-test', name: 'Test GPU 24GB' });
  });

  it('a FAILED device stays REJECT_HEALTH, with or without figures', () => {
    expect(planOn(sample({ health: 'FAILED', totalBytes: 0, usedBytes: 0, failure: { atUs: NOW, lastGood: false, message: 'GPU_IS_LOST' } })).reasons[0]?.code).toBe('DEVICE_FAILED');
    expect(planOn(sample({ health: 'FAILED', failure: { atUs: NOW, lastGood: true, message: 'GPU_IS_LOST' } })).verdict).toBe('REJECT_HEALTH');
  });

  it('the staleness limit is the policy\'s', () => {
    const strict: PlannerPolicy = { ...P, revision: 'test-strict', staleAfterUs: 50_000 };
    expect(planOn(sample(), strict).reasons[0]).toMatchObject({ code: 'TELEMETRY_STALE', sampleAgeUs: 100_000, staleAfterUs: 50_000 });
    expect(planOn(sample(), P).verdict).toBe('ADMIT');
  });

  it('the pressure tracker sees no evidence in a failed sample', () => {
    expect(usedFraction(sample({ failure: { atUs: NOW, lastGood: true, message: 'x' } }))).toBeNaN();
    expect(usedFraction(sample())).toBeCloseTo(2 / 24, 9);
  });
});

describe('a context above the trained one', () => {
  it('plans as asked with a CONTEXT_ABOVE_TRAINED warning naming both numbers; the verdict is unchanged', () => {
    const above = run(request({ contextSize: 8192, trainContextSize: 256, peakBytes: 512 * MiB }), snapshot());
    expect(above.verdict).toBe('ADMIT');
    expect(above.reasons).toEqual([
      { code: 'FITS', requestedBytes: 640 * MiB, schedulableBytes: 24 * GiB - 2 * GiB - RESERVE_24 },
      { code: 'CONTEXT_ABOVE_TRAINED', contextSize: 8192, trainContextSize: 256 },
    ]);
    expect(WARNING_CODES).toContain('CONTEXT_ABOVE_TRAINED');
    // Beside a refusal too.
    const refused = run(request({ contextSize: 8192, trainContextSize: 256 }), snapshot({ controls: { draining: true, labPaused: false, allowedCapabilities: null } }));
    expect(refused.reasons.map((r) => r.code)).toEqual(['DRAINING', 'CONTEXT_ABOVE_TRAINED']);
    // At or below the trained context, or not known: no warning, and the same fingerprint as a
    // request that never said.
    const at = run(request({ contextSize: 8192, trainContextSize: 8192 }), snapshot());
    expect(at.reasons.map((r) => r.code)).toEqual(['FITS']);
    expect(run(request({ trainContextSize: null }), snapshot()).fingerprint).toBe(run(request(), snapshot()).fingerprint);
    expect(above.fingerprint).not.toBe(run(request({ contextSize: 8192, trainContextSize: 512, peakBytes: 512 * MiB }), snapshot()).fingerprint);
  });

  it('refuses a trained context that is not a whole number', () => {
    expect(() => run(request({ trainContextSize: -1 }), snapshot())).toThrow(/request.trainContextSize/);
  });
});

describe('policy revisions', () => {
  it('knows m10-v1 (the default) and m10-v1-max-reserve, with queue overrides, and nothing else', () => {
    expect(POLICY_REVISIONS.map((p) => p.revision)).toEqual(['m10-v1', 'm10-v1-max-reserve']);
    expect(policyByRevision('m10-v1')).toBe(POLICY_M10_V1);
    expect(policyByRevision('m10-v1-max-reserve')).toBe(POLICY_M10_V1_MAX_RESERVE);
    expect(policyByRevision('m10-v1+queue.maxDepth=5')).toEqual(withQueueDepth(POLICY_M10_V1, 5));
    expect(policyByRevision('m10-v1-max-reserve+queue.maxDepth=7')?.reserve.margin).toBe('max');
    for (const unknown of ['m11-v1', '', 'm10-v1+queue.maxDepth=0', 'm10-v1+queue.maxDepth=32', 'm10-v1+other=1']) expect(policyByRevision(unknown)).toBeNull();
  });

  it('switching keeps an operator\'s queue override; every number lives in the policy object', () => {
    const overridden = withQueueDepth(POLICY_M10_V1, 5);
    expect(switchRevision(overridden, POLICY_M10_V1_MAX_RESERVE).revision).toBe('m10-v1-max-reserve+queue.maxDepth=5');
    expect(switchRevision(POLICY_M10_V1, POLICY_M10_V1_MAX_RESERVE)).toBe(POLICY_M10_V1_MAX_RESERVE);
    expect(Object.keys(POLICY_M10_V1).sort()).toEqual(['envelopeMargin', 'historySize', 'leaseTtlUs', 'pressure', 'queue', 'recoveryHoldUs', 'reserve', 'revision', 'staleAfterUs']);
    // A plan under another revision says so, and its fingerprint differs.
    const a = run(request(), snapshot());
    const b = plan(request(), snapshot(), POLICY_M10_V1_MAX_RESERVE);
    expect(b.policy).toBe('m10-v1-max-reserve');
    expect(b.breakdown.reserveBytes).toBe(a.breakdown.reserveBytes - 256 * MiB);
    expect(b.fingerprint).not.toBe(a.fingerprint);
  });
});
