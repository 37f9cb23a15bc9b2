import { describe, expect, it } from 'vitest';
import { VERDICTS } from '../../../electron/core/planner/types.js';
import { evictionLines, filterPlans, planAsked, planHeadline, reasonLines, shortFingerprint, verdictChip } from './plan-words.js';
import { GiB, placementPlan } from '../test/fixtures.js';

const names: Record<string, string> = { 'coder-1': 'coder', 'embed-1': 'embed', 'qwen-chat-1': 'qwen-chat' };
const nameOf = (id: string): string => names[id] ?? id;

describe('plan words', () => {
  it('has a chip for every verdict', () => {
    const labels = VERDICTS.map((v) => verdictChip(v).label);
    expect(new Set(labels).size).toBe(VERDICTS.length);
    expect(verdictChip('REJECT_CAPACITY')).toMatchObject({ label: 'does not fit', tone: 'bad' });
    expect(verdictChip('ADMIT').tone).toBe('ok');
  });

  it('says a rejection with its figures and what to do', () => {
    const plan = placementPlan({
      verdict: 'REJECT_CAPACITY',
      reasons: [{ code: 'INSUFFICIENT_CAPACITY', requestedBytes: 6.2 * GiB, schedulableBytes: 3.1 * GiB, freeableBytes: 0, unmanagedExternalBytes: 5 * GiB }],
      residents: [
        { id: 'coder-1', pid: 2, priority: 'background', busy: true, pinned: false, weight: 1, usedBytes: 8 * GiB },
        { id: 'qwen-chat-1', pid: 1, priority: 'interactive', busy: true, pinned: true, weight: 3, usedBytes: 9 * GiB },
      ],
    });
    expect(planHeadline(plan, nameOf)).toBe('REJECT_CAPACITY: needs 6.20 GiB, 3.10 GiB schedulable — stop "coder" or close the external process using 5.00 GiB');
    expect(reasonLines(plan)).toEqual(['INSUFFICIENT_CAPACITY: needs 6.20 GiB, 3.10 GiB schedulable, 0 B freeable; 5.00 GiB used by other processes']);
  });

  it('names another device that would take it, as the core found it', () => {
    const plan = placementPlan({
      verdict: 'REJECT_CAPACITY',
      reasons: [{ code: 'INSUFFICIENT_CAPACITY', requestedBytes: 6.2 * GiB, schedulableBytes: 0, freeableBytes: 0, unmanagedExternalBytes: 23 * GiB }],
      residents: [{ id: 'qwen-chat-1', pid: 1, priority: 'interactive', busy: true, pinned: false, weight: 3, usedBytes: 1 * GiB }],
      elsewhere: { key: 'GPU-b', name: 'Sim B 24GB', index: 1, verdict: 'ADMIT', headroomAfterBytes: 15 * GiB },
    });
    expect(planHeadline(plan, nameOf)).toBe('REJECT_CAPACITY: needs 6.20 GiB, 0 B schedulable — stop "qwen-chat" or close the external process using 23.00 GiB or launch it on GPU 1 "Sim B 24GB", which has room');
    expect(planHeadline({ ...plan, elsewhere: null }, nameOf)).not.toContain('launch it on');
  });

  it('explains a model larger than the device', () => {
    const plan = placementPlan({ verdict: 'REJECT_CAPACITY', reasons: [{ code: 'EXCEEDS_DEVICE', requestedBytes: 30 * GiB, capacityBytes: 22.8 * GiB }] });
    expect(planHeadline(plan, nameOf)).toBe('REJECT_CAPACITY: needs 30.00 GiB, more than this device can offer (22.80 GiB) — use a smaller model or fewer GPU layers');
  });

  it('names the engines an eviction stops', () => {
    const plan = placementPlan({
      verdict: 'ADMIT_AFTER_EVICTION',
      reasons: [{ code: 'FITS_AFTER_EVICTION', requestedBytes: 4 * GiB, schedulableBytes: 1 * GiB, freeableBytes: 3.5 * GiB }],
      evictions: [{ id: 'embed-1', pid: 5, priority: 'lab', freedBytes: 3.5 * GiB, idleForUs: 720e6 }],
      breakdown: { ...placementPlan().breakdown, schedulableBytes: 1 * GiB },
    });
    expect(planHeadline(plan, nameOf)).toBe('ADMIT_AFTER_EVICTION: needs 4.00 GiB, 1.00 GiB schedulable — stops idle "embed" first, freeing 3.50 GiB');
    expect(evictionLines(plan, nameOf)).toEqual(['stop "embed" (lab, idle 12 min, frees 3.50 GiB)']);
    expect(reasonLines(plan)[0]).toBe('FITS_AFTER_EVICTION: needs 4.00 GiB, 1.00 GiB schedulable + 3.50 GiB freed by stopping idle engines');
  });

  it('says why a plan waits and what a policy forbids', () => {
    const queued = placementPlan({ verdict: 'QUEUE', reasons: [{ code: 'WAIT_FOR_LEASES', requestedBytes: 4 * GiB, schedulableBytes: 2 * GiB, pendingBytes: 3 * GiB }] });
    expect(planHeadline(queued, nameOf)).toBe('QUEUE: WAIT_FOR_LEASES: needs 4.00 GiB; 2.00 GiB schedulable now, 3.00 GiB held by loads in progress — it is planned again on the next change');
    const lab = placementPlan({ verdict: 'REJECT_POLICY', reasons: [{ code: 'LAB_PAUSED' }] });
    expect(planHeadline(lab, nameOf)).toMatch(/^REJECT_POLICY: lab work is paused — resume it/);
    const health = placementPlan({ verdict: 'REJECT_HEALTH', reasons: [{ code: 'DEVICE_FAILED', health: 'FAILED' }], device: { key: 'k', name: 'n', health: 'FAILED' } });
    expect(planHeadline(health, nameOf)).toBe('REJECT_HEALTH: the device reports FAILED — nothing is placed on it until it recovers');
  });

  it('says a stale sample with its age and the limit, and tells it from no sample at all', () => {
    const stale = placementPlan({ verdict: 'QUEUE', reasons: [{ code: 'TELEMETRY_STALE', requestedBytes: 4 * GiB, sampleAgeUs: 4_200_000, staleAfterUs: 2_000_000 }] });
    expect(planHeadline(stale, nameOf)).toBe('QUEUE: TELEMETRY_STALE: the device\'s last sample is 4.2 s old (limit 2.0 s) — it is planned again when a fresh sample arrives; check the GPU driver if it does not');
    expect(reasonLines(stale)).toEqual(['TELEMETRY_STALE: the last sample is 4.2 s old, past the 2.0 s limit; nothing is schedulable until a fresh one arrives']);
    const future = placementPlan({ verdict: 'QUEUE', reasons: [{ code: 'TELEMETRY_STALE', requestedBytes: 4 * GiB, sampleAgeUs: -3_000_000, staleAfterUs: 2_000_000 }] });
    expect(planHeadline(future, nameOf)).toContain('last sample is stamped 3.0 s in the future (limit 2.0 s)');
    const missing = placementPlan({ verdict: 'QUEUE', reasons: [{ code: 'TELEMETRY_MISSING', requestedBytes: 4 * GiB }] });
    expect(planHeadline(missing, nameOf)).toBe('QUEUE: TELEMETRY_MISSING: no telemetry for this device yet — it is planned again when a sample arrives; check the GPU driver if none does');
  });

  it('says a failed query as such, whatever the age of the last good figures, and a context above the trained one as a warning', () => {
    const failed = placementPlan({ verdict: 'QUEUE', reasons: [{ code: 'TELEMETRY_STALE', requestedBytes: 4 * GiB, sampleAgeUs: 400_000, staleAfterUs: 2_000_000, queryFailed: true }] });
    expect(planHeadline(failed, nameOf)).toBe("QUEUE: TELEMETRY_STALE: the device's latest query failed (its last good figures are 0.4 s old and not used) — it is planned again when a query succeeds; check the GPU driver if none does");
    expect(reasonLines(failed)[0]).toMatch(/^TELEMETRY_STALE: the device's latest query failed; its last good figures are 0.4 s old/);
    const above = placementPlan({ verdict: 'ADMIT', reasons: [{ code: 'FITS', requestedBytes: GiB, schedulableBytes: 10 * GiB }, { code: 'CONTEXT_ABOVE_TRAINED', contextSize: 8192, trainContextSize: 256 }] });
    expect(planHeadline(above, nameOf)).toMatch(/ · warning: a context of 8192 tokens is above the 256 the model was trained for$/);
    expect(reasonLines(above)[1]).toMatch(/^CONTEXT_ABOVE_TRAINED \(warning\): a context of 8192 tokens is above the 256/);
  });

  it('says when pressure is ours to relieve, and when it is not', () => {
    const relieved = placementPlan({
      verdict: 'ADMIT_AFTER_EVICTION',
      reasons: [
        { code: 'FITS_AFTER_EVICTION', requestedBytes: 6.6 * GiB, schedulableBytes: 0, freeableBytes: 11.75 * GiB },
        { code: 'PRESSURE_RELIEVED_BY_EVICTION', pressure: 'CRITICAL', pressureAfterEvictions: 'NORMAL', usedAfterEvictionsBytes: 11.75 * GiB },
      ],
      evictions: [{ id: 'embed-1', pid: 5, priority: 'lab', freedBytes: 11.75 * GiB, idleForUs: 900e6 }],
      breakdown: { ...placementPlan().breakdown, schedulableBytes: 0, requirementBytes: 6.6 * GiB },
    });
    expect(planHeadline(relieved, nameOf)).toBe('ADMIT_AFTER_EVICTION: needs 6.60 GiB, 0 B schedulable — stops idle "embed" first, freeing 11.75 GiB (memory pressure CRITICAL → NORMAL)');
    expect(reasonLines(relieved)[1]).toBe('PRESSURE_RELIEVED_BY_EVICTION: memory pressure is CRITICAL, NORMAL once the idle engines are stopped (11.75 GiB left in use)');
    const external = placementPlan({
      verdict: 'REJECT_CAPACITY',
      reasons: [{ code: 'EXTERNAL_GPU_PRESSURE', pressure: 'CRITICAL', pressureAfterEvictions: 'CRITICAL', requestedBytes: 640 * 1024 ** 2, freeableBytes: 0.5 * GiB, usedAfterEvictionsBytes: 23 * GiB, unmanagedExternalBytes: 23 * GiB }],
    });
    expect(planHeadline(external, nameOf)).toBe('REJECT_CAPACITY: memory pressure is CRITICAL even after stopping the idle engines it may — close the external processes using 23.00 GiB');
    expect(reasonLines(external)).toEqual(['EXTERNAL_GPU_PRESSURE: memory pressure is CRITICAL, still CRITICAL after stopping every idle engine it may (512.0 MiB freed, 23.00 GiB left in use): 23.00 GiB is used by processes GPU Share did not start']);
  });

  it('describes the request and shortens the fingerprint', () => {
    expect(planAsked(placementPlan())).toBe('chat · llama-server · 3.60 GiB peak (estimated) · ctx 8,192 · interactive');
    // A profile's plan names the profile (its model id): two profiles of one capability differ.
    const base = placementPlan();
    expect(planAsked({ request: { ...base.request, profileName: 'chat-b' } })).toBe('chat-b (chat) · llama-server · 3.60 GiB peak (estimated) · ctx 8,192 · interactive');
    expect(shortFingerprint('a1b2c3d4e5f6a7b8c9d0')).toBe('a1b2c3d4e5');
    expect(shortFingerprint('abc')).toBe('abc');
  });

  it('filters the history by verdict', () => {
    const plans = [placementPlan({ verdict: 'ADMIT' }), placementPlan({ verdict: 'QUEUE' }), placementPlan({ verdict: 'ADMIT' })];
    expect(filterPlans(plans, 'ALL')).toHaveLength(3);
    expect(filterPlans(plans, 'ADMIT')).toHaveLength(2);
    expect(filterPlans(plans, 'REJECT_HEALTH')).toEqual([]);
  });
});
