/** Property tests of the planner (fast-check). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { plan } from '../../electron/core/planner/plan.js';
import { GiB, MiB, POLICY_M10_V1, PRIORITY_RANK, dynamicReserveBytes, requirementBytes, type Priority } from '../../electron/core/planner/policy.js';
import { heldLevel, pressureHoldsBack } from '../../electron/core/planner/pressure.js';
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
    weight: fc.constantFrom(0.5, 1, 2, 3),
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
    queueDepth: fc.integer({ min: 0, max: 40 }),
    weight: fc.constantFrom(0.5, 1, 3),
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
      queueDepth: w.queueDepth,
    });
    return { snap, req: request({ peakBytes: w.peak, priority: w.priority, weight: w.weight }) };
  });

/** What the inputs say is schedulable once the named residents are stopped, worked out here with
 *  docs/planner.md's formulas (not the planner's code). */
function independently(snap: PlannerSnapshot, stopped: readonly string[]): { schedulableAfter: number; usedAfter: number; total: number } {
  const dev = snap.device ?? device();
  const usedBy = (r: ManagedResident): number => (dev.processes === null ? r.envelopeBytes : dev.processes.filter((p) => p.pid === r.pid).reduce((sum, p) => sum + p.usedBytes, 0));
  const managed = snap.residents.reduce((sum, r) => sum + usedBy(r), 0);
  const freed = snap.residents.filter((r) => stopped.includes(r.id)).reduce((sum, r) => sum + usedBy(r), 0);
  const leases = snap.leases.filter((l) => l.expiresAtUs > snap.nowUs).reduce((sum, l) => sum + Math.max(0, l.reservedBytes - l.materializedBytes), 0);
  const reserve = Math.max(1 * GiB, Math.round(0.05 * dev.totalBytes)) + 256 * MiB; // m10-v1: the runtime margin is added
  const usedAfter = Math.max(dev.observedUsedBytes, managed) - freed;
  return { schedulableAfter: Math.max(0, dev.totalBytes - usedAfter - leases - reserve), usedAfter, total: dev.totalBytes };
}

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
  it('never admits beyond what is schedulable after its evictions, nor while pressure left after them holds the load back', () => {
    fc.assert(
      fc.property(world, ({ snap, req }) => {
        const p = plan(req, snap, POLICY_M10_V1);
        for (const e of p.evictions) {
          const r = snap.residents.find((x) => x.id === e.id);
          expect(r?.busy).toBe(false);
          expect(r?.pinned).toBe(false);
          expect(PRIORITY_RANK[r?.priority ?? 'interactive']).toBeLessThanOrEqual(PRIORITY_RANK[req.priority]);
        }
        expect(p.breakdown.schedulableBytes).toBeGreaterThanOrEqual(0);
        expect(p.breakdown.unmanagedExternalBytes).toBeGreaterThanOrEqual(0);
        if (p.verdict !== 'ADMIT' && p.verdict !== 'ADMIT_AFTER_EVICTION') {
          expect(p.evictions).toEqual([]);
          return;
        }
        // The accounting worked out here from the inputs alone, not from the plan's figures.
        const { schedulableAfter, usedAfter, total } = independently(snap, p.evictions.map((e) => e.id));
        expect(p.breakdown.requirementBytes).toBe(requirementBytes(req.peakBytes, POLICY_M10_V1));
        expect(p.breakdown.requirementBytes).toBeLessThanOrEqual(schedulableAfter);
        expect(p.headroomAfterBytes).toBe(schedulableAfter - p.breakdown.requirementBytes);
        if (p.evictions.length > 0) {
          const left = heldLevel(usedAfter / total, POLICY_M10_V1);
          expect(pressureHoldsBack(left, req.priority) && pressureHoldsBack(snap.pressure, req.priority)).toBe(false);
        } else {
          expect(pressureHoldsBack(snap.pressure, req.priority)).toBe(false);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('relieves a CRITICAL device whose pressure is all ours and idle, whatever the figures', () => {
    const allOurs = fc
      .record({
        total: fc.integer({ min: 4 * GiB, max: 96 * GiB }),
        usedFraction: fc.double({ min: 0.97, max: 1, noNaN: true }),
        shares: fc.array(fc.integer({ min: 1, max: 100 }), { minLength: 1, maxLength: 8 }),
        perProcess: fc.boolean(),
        requestPriority: priority,
        peakFraction: fc.double({ min: 0, max: 1, noNaN: true }),
      })
      .map((w) => {
        const observed = Math.ceil(w.total * w.usedFraction);
        const sum = w.shares.reduce((a, b) => a + b, 0);
        const uses = w.shares.map((share) => Math.floor((observed * share) / sum));
        uses[0] = (uses[0] ?? 0) + observed - uses.reduce((a, b) => a + b, 0);
        const allowed = (['lab', 'background', 'interactive'] as Priority[]).filter((p) => PRIORITY_RANK[p] <= PRIORITY_RANK[w.requestPriority]);
        const residents: ManagedResident[] = uses.map((used, i) => ({
          id: `ours${i}`,
          pid: 300 + i,
          priority: allowed[i % allowed.length] ?? 'lab',
          pinned: false,
          busy: false,
          idleSinceUs: NOW - (i + 1) * 1_000_000,
          envelopeBytes: used,
          weight: 1,
        }));
        const capacity = w.total - dynamicReserveBytes(w.total, POLICY_M10_V1);
        const maxPeak = Math.floor((capacity - 128 * MiB) / 1.1);
        const req = request({ priority: w.requestPriority, peakBytes: 1 + Math.floor(w.peakFraction * (maxPeak - 1)) });
        const snap = snapshot({
          pressure: 'CRITICAL',
          device: device({ totalBytes: w.total, observedUsedBytes: observed, processes: w.perProcess ? residents.map((r) => ({ pid: r.pid, usedBytes: r.envelopeBytes })) : null }),
          residents,
        });
        return { req, snap };
      });
    fc.assert(
      fc.property(allOurs, ({ req, snap }) => {
        const p = plan(req, snap, POLICY_M10_V1);
        expect(p.verdict).toBe('ADMIT_AFTER_EVICTION');
        expect(p.reasons.map((r) => r.code)).toEqual(['FITS_AFTER_EVICTION', 'PRESSURE_RELIEVED_BY_EVICTION']);
        expect(p.eligible.pressure).toBe('CRITICAL');
        expect(pressureHoldsBack(p.eligible.pressureAfterEvictions, req.priority)).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it('gives the same result and fingerprint whatever the order of residents, leases and processes, and whenever it is planned', () => {
    fc.assert(
      fc.property(world, fc.integer({ min: 1, max: 1_000_000 }), fc.integer({ min: -1e12, max: 1e12 }), ({ snap, req }, seed, deltaUs) => {
        const a = plan(req, snap, POLICY_M10_V1);
        const dev = snap.device === null ? null : { ...snap.device, processes: snap.device.processes === null ? null : shuffle(snap.device.processes, seed + 2) };
        const b = plan(req, { ...snap, device: dev, residents: shuffle(snap.residents, seed), leases: shuffle(snap.leases, seed + 1) }, POLICY_M10_V1);
        expect(b.verdict).toBe(a.verdict);
        expect(b.reasons).toEqual(a.reasons);
        expect(b.evictions).toEqual(a.evictions);
        expect(b.fingerprint).toBe(a.fingerprint);
        // The same state at another time: every clock value moved by the same amount.
        const shifted: PlannerSnapshot = {
          ...snap,
          nowUs: snap.nowUs + deltaUs,
          device: snap.device === null ? null : { ...snap.device, sampledAtUs: snap.device.sampledAtUs + deltaUs },
          residents: snap.residents.map((r) => ({ ...r, idleSinceUs: r.idleSinceUs + deltaUs })),
          leases: snap.leases.map((l) => ({ ...l, expiresAtUs: l.expiresAtUs + deltaUs })),
        };
        const c = plan(req, shifted, POLICY_M10_V1);
        expect(c.fingerprint).toBe(a.fingerprint);
        expect(c.plannedAtUs - a.plannedAtUs).toBe(deltaUs);
      }),
      { numRuns: 1000 },
    );
  });

  it('a fresh sample of any age and live leases of any expiry give the same fingerprint', () => {
    fc.assert(
      fc.property(world, fc.integer({ min: 0, max: 2_000_000 }), fc.integer({ min: 1, max: 1e9 }), ({ snap, req }, ageUs, leftUs) => {
        const fresh = (age: number): PlannerSnapshot => ({
          ...snap,
          device: snap.device === null ? null : { ...snap.device, sampledAtUs: snap.nowUs - age },
          leases: snap.leases.map((l) => (l.expiresAtUs > snap.nowUs ? { ...l, expiresAtUs: snap.nowUs + leftUs } : l)),
        });
        expect(plan(req, fresh(ageUs), POLICY_M10_V1).fingerprint).toBe(plan(req, fresh(0), POLICY_M10_V1).fingerprint);
      }),
      { numRuns: 500 },
    );
  });

  it('NaN, negative or missing numbers give a clear error, never a verdict', () => {
    const bad = fc.constantFrom(Number.NaN, -1, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY, undefined);
    const where = fc.constantFrom('peak', 'total', 'observed', 'envelope', 'reserved', 'materialized', 'process');
    fc.assert(
      fc.property(world, bad, where, ({ snap, req }, value, field) => {
        const v = value as number;
        const dev = snap.device ?? device();
        const r0 = snap.residents[0] ?? { id: 'x', pid: 1, priority: 'lab' as const, pinned: false, busy: false, idleSinceUs: NOW, envelopeBytes: 1, weight: 1 };
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
