/** Property tests of the planner (fast-check). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { plan } from '../../electron/core/planner/plan.js';
import { GiB, POLICY_M10_V1 } from '../../electron/core/planner/policy.js';
import { PlannerInputError, type Lease, type ManagedResident, type PlannerSnapshot } from '../../electron/core/planner/types.js';
import { NOW, device, request, snapshot } from '../fixtures/planner-cases.js';

const bytes = (max: number): fc.Arbitrary<number> => fc.integer({ min: 0, max });
const priority = fc.constantFrom('interactive' as const, 'background' as const, 'lab' as const);

const residentArb = (i: number): fc.Arbitrary<ManagedResident> =>
  fc.record({
    id: fc.constant(`r${i}`),
    pid: fc.constant(100 + i),
    priority,
    pinned: fc.boolean(),
    busy: fc.boolean(),
    idleSinceUs: fc.integer({ min: NOW - 3_600_000_000, max: NOW }),
    envelopeBytes: bytes(8 * GiB),
  });

const leaseArb = (i: number): fc.Arbitrary<Lease> =>
  fc.record({ id: fc.constant(`l${i}`), reservedBytes: bytes(8 * GiB), materializedBytes: bytes(8 * GiB), expiresAtUs: fc.integer({ min: NOW - 10_000_000, max: NOW + 10_000_000 }) });

const world = fc
  .record({
    total: fc.integer({ min: 1 * GiB, max: 96 * GiB }),
    observedFraction: fc.double({ min: 0, max: 1, noNaN: true }),
    perProcess: fc.boolean(),
    residents: fc.integer({ min: 0, max: 8 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => residentArb(i)))),
    leases: fc.integer({ min: 0, max: 4 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => leaseArb(i)))),
    pressure: fc.constantFrom('NORMAL' as const, 'ELEVATED' as const, 'HIGH' as const, 'CRITICAL' as const),
    peak: fc.integer({ min: 1, max: 40 * GiB }),
    priority,
    sampleAge: fc.integer({ min: 0, max: 3_000_000 }),
  })
  .map((w) => {
    const observed = Math.floor(w.total * w.observedFraction);
    const residents: ManagedResident[] = [...w.residents];
    const processes = w.perProcess ? residents.map((r) => ({ pid: r.pid, usedBytes: Math.min(r.envelopeBytes, observed) })) : null;
    const snap: PlannerSnapshot = snapshot({
      device: device({ totalBytes: w.total, observedUsedBytes: observed, processes, sampledAtUs: NOW - w.sampleAge }),
      residents,
      leases: [...w.leases],
      pressure: w.pressure,
    });
    return { snap, req: request({ peakBytes: w.peak, priority: w.priority }) };
  });

function shuffle<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe('planner properties', () => {
  it('never admits beyond what is schedulable (after the evictions it lists)', () => {
    fc.assert(
      fc.property(world, ({ snap, req }) => {
        const p = plan(req, snap, POLICY_M10_V1);
        const freed = p.evictions.reduce((sum, e) => sum + e.freedBytes, 0);
        if (p.verdict === 'ADMIT') expect(p.breakdown.requirementBytes).toBeLessThanOrEqual(p.breakdown.schedulableBytes);
        if (p.verdict === 'ADMIT_AFTER_EVICTION') expect(p.breakdown.requirementBytes).toBeLessThanOrEqual(p.breakdown.schedulableBytes + freed);
        if (p.verdict === 'ADMIT' || p.verdict === 'ADMIT_AFTER_EVICTION') expect(p.headroomAfterBytes).toBeGreaterThanOrEqual(0);
        for (const e of p.evictions) {
          const r = snap.residents.find((x) => x.id === e.id);
          expect(r?.busy).toBe(false);
          expect(r?.pinned).toBe(false);
        }
        expect(p.breakdown.schedulableBytes).toBeGreaterThanOrEqual(0);
        expect(p.breakdown.unmanagedExternalBytes).toBeGreaterThanOrEqual(0);
      }),
      { numRuns: 2000 },
    );
  });

  it('gives the same result and fingerprint whatever the order of residents, leases and processes', () => {
    fc.assert(
      fc.property(world, fc.integer({ min: 1, max: 1_000_000 }), ({ snap, req }, seed) => {
        const a = plan(req, snap, POLICY_M10_V1);
        const device = snap.device === null ? null : { ...snap.device, processes: snap.device.processes === null ? null : shuffle(snap.device.processes, seed + 2) };
        const b = plan(req, { ...snap, device, residents: shuffle(snap.residents, seed), leases: shuffle(snap.leases, seed + 1) }, POLICY_M10_V1);
        expect(b.verdict).toBe(a.verdict);
        expect(b.reasons).toEqual(a.reasons);
        expect(b.evictions).toEqual(a.evictions);
        expect(b.fingerprint).toBe(a.fingerprint);
      }),
      { numRuns: 1000 },
    );
  });

  it('a different input gives a different fingerprint', () => {
    const a = plan(request(), snapshot(), POLICY_M10_V1);
    const b = plan(request({ contextSize: 4096 }), snapshot(), POLICY_M10_V1);
    expect(a.fingerprint).not.toBe(b.fingerprint);
  });

  it('NaN, negative or missing numbers give a clear error, never a verdict', () => {
    const bad = fc.constantFrom(Number.NaN, -1, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY, undefined);
    const where = fc.constantFrom('peak', 'total', 'observed', 'envelope', 'reserved', 'materialized', 'process');
    fc.assert(
      fc.property(world, bad, where, ({ snap, req }, value, field) => {
        const v = value as number;
        const dev = snap.device ?? device();
        const r0 = snap.residents[0] ?? { id: 'x', pid: 1, priority: 'lab' as const, pinned: false, busy: false, idleSinceUs: NOW, envelopeBytes: 1 };
        const l0 = snap.leases[0] ?? { id: 'y', reservedBytes: 1, materializedBytes: 0, expiresAtUs: NOW + 1 };
        const broken: Record<string, () => unknown> = {
          peak: () => plan({ ...req, peakBytes: v }, snap, POLICY_M10_V1),
          total: () => plan(req, { ...snap, device: { ...dev, totalBytes: v } }, POLICY_M10_V1),
          observed: () => plan(req, { ...snap, device: { ...dev, observedUsedBytes: v } }, POLICY_M10_V1),
          envelope: () => plan(req, { ...snap, residents: [{ ...r0, envelopeBytes: v }] }, POLICY_M10_V1),
          reserved: () => plan(req, { ...snap, leases: [{ ...l0, reservedBytes: v }] }, POLICY_M10_V1),
          materialized: () => plan(req, { ...snap, leases: [{ ...l0, materializedBytes: v }] }, POLICY_M10_V1),
          process: () => plan(req, { ...snap, device: { ...dev, processes: [{ pid: 1, usedBytes: v }] } }, POLICY_M10_V1),
        };
        expect(broken[field]).toThrowError(PlannerInputError);
      }),
      { numRuns: 500 },
    );
  });
});
