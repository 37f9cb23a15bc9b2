/**
 * Plans through `gpu-share serve` on simulated telemetry: the same state planned twice gives the
 * same fingerprint; a sample that stops being renewed (the telemetry file turned unreadable) is
 * TELEMETRY_STALE with its age and the limit, not TELEMETRY_MISSING; and the gateway's queue
 * limit is the policy's, with `--queue-limit` an override recorded in the policy's revision.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlacementPlan, PlanInputs, PolicyView } from '../../electron/core/contract.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { call, startServe, state, until, type Served } from '../fixtures/serve.js';

const KEY = `GPU-planserve-${process.pid}`;
let dir = '';
let sim = '';
const servers: Served[] = [];

const simDevice = (usedBytes: number): string => JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes, processes: null, health: 'OK' }] });

async function serveWithProfile(extraArgs: string[] = []): Promise<Served> {
  const served = await startServe({ dataDir: join(dir, `data-${servers.length}`), sim, extraArgs });
  servers.push(served);
  const created = await call(served, 'POST', '/api/profiles', { id: 'chat', name: 'chat', capabilities: ['chat'], engineKind: 'builtin', contextSize: 256, priority: 'interactive', modelPath: join(dir, 'tiny.gguf') });
  expect(created.status).toBe(201);
  return served;
}

const planChat = async (served: Served): Promise<PlacementPlan> => (await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'chat' })).body;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-plan-serve-'));
  writeGguf(join(dir, 'tiny.gguf'), TINY_GGUF_SPEC);
  sim = join(dir, 'sim.json');
  writeFileSync(sim, simDevice(3 * GiB));
});

afterAll(async () => {
  for (const served of servers) await served.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('plans through serve', () => {
  it('same state, same fingerprint; a stale sample is TELEMETRY_STALE with its age and the limit', async () => {
    const served = await serveWithProfile();
    const first = await planChat(served);
    expect(first).toMatchObject({ verdict: 'ADMIT', policy: 'm10-v1', node: hostname(), accelerator: { key: KEY, name: 'Sim 24GB' }, queue: { depth: 0, maxDepth: 32 } });
    await new Promise((resolve) => setTimeout(resolve, 600)); // a later sample and a later clock
    const again = await planChat(served);
    expect(again.plannedAtUs).toBeGreaterThan(first.plannedAtUs);
    expect(again.fingerprint).toBe(first.fingerprint);

    // The telemetry file turns unreadable: the sampler keeps its last figures, not live from then on.
    writeFileSync(sim, '{ "devices": [ broken');
    const stale = await until(
      async () => {
        const p = await planChat(served);
        return p.reasons[0]?.code === 'TELEMETRY_MISSING' || p.reasons[0]?.code === 'TELEMETRY_STALE' ? p : undefined;
      },
      10_000,
      'a plan on stale telemetry',
      250,
    );
    expect(stale.verdict).toBe('QUEUE');
    expect(stale.reasons).toHaveLength(1);
    expect(stale.reasons[0]).toMatchObject({ code: 'TELEMETRY_STALE', staleAfterUs: 2_000_000 });
    // Stale from the failed read on, not once the last figures are 2 s old: their age is what it
    // is (under the limit, here), and the reason says the query failed.
    expect(stale.reasons[0]).toMatchObject({ queryFailed: true });
    expect(stale.reasons[0]?.sampleAgeUs).toBeGreaterThan(0);
    expect(stale.attribution).toBe('UNKNOWN');
    expect(stale.accelerator).toEqual({ key: KEY, name: 'Sim 24GB' });
    const device = (await state(served)).devices.find((d) => d.key === KEY);
    expect(device?.telemetryProblem).toMatch(/stale/);

    // Fixed again: the same state as before, so the same fingerprint as before.
    writeFileSync(sim, simDevice(3 * GiB));
    const back = await until(
      async () => {
        const p = await planChat(served);
        return p.verdict === 'ADMIT' ? p : undefined;
      },
      10_000,
      'a plan on fresh telemetry again',
      250,
    );
    expect(back.fingerprint).toBe(first.fingerprint);
  }, 60_000);

  it('sizes the gateway queue by the policy; --queue-limit overrides it and says so in the revision', async () => {
    const plain = servers[0] ?? (await serveWithProfile());
    expect((await state(plain)).gateway.queueLimit).toBe(32);
    const overridden = await serveWithProfile(['--queue-limit', '5']);
    expect((await state(overridden)).gateway.queueLimit).toBe(5);
    const p = await planChat(overridden);
    expect(p.policy).toBe('m10-v1+queue.maxDepth=5');
    expect(p.queue).toEqual({ depth: 0, maxDepth: 5 });
    expect((await state(overridden)).policy.revision).toBe('m10-v1+queue.maxDepth=5');

    // Another revision the build knows: the override stays on top, the plans say so, the numbers
    // travel in the state, and the choice is kept in the settings.
    const switched = await call<PolicyView>(overridden, 'PUT', '/api/policy', { revision: 'm10-v1-max-reserve' });
    expect(switched.status).toBe(200);
    expect(switched.body).toMatchObject({ revision: 'm10-v1-max-reserve+queue.maxDepth=5', revisions: ['m10-v1', 'm10-v1-max-reserve'], rules: { reserve: { margin: 'max', runtimeMarginBytes: 256 * 1024 ** 2 }, staleAfterUs: 2_000_000, queue: { maxDepth: 5 } } });
    const under = await planChat(overridden);
    expect(under.policy).toBe('m10-v1-max-reserve+queue.maxDepth=5');
    expect(under.breakdown.reserveBytes).toBe(p.breakdown.reserveBytes - 256 * 1024 ** 2);
    expect((await call<PlacementPlan[]>(overridden, 'GET', '/api/plans')).body.map((x) => x.policy).slice(0, 2)).toEqual(['m10-v1-max-reserve+queue.maxDepth=5', 'm10-v1+queue.maxDepth=5']);
    expect(JSON.parse(readFileSync(join(dir, `data-${servers.indexOf(overridden)}`, 'settings.json'), 'utf8'))).toMatchObject({ policyRevision: 'm10-v1-max-reserve' });
    // One it does not know: 400 naming the field and the known ones; nothing changes.
    const unknown = await call<{ error: { message: string; field: string } }>(overridden, 'PUT', '/api/policy', { revision: 'm11-v9' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ field: 'revision' });
    expect(unknown.body.error.message).toContain('m10-v1, m10-v1-max-reserve');
    expect((await state(overridden)).policy.revision).toBe('m10-v1-max-reserve+queue.maxDepth=5');
    expect((await call(overridden, 'PUT', '/api/policy', { revision: 'm10-v1' })).status).toBe(200);
  }, 60_000);

  it('answers the planner inputs for `gpu-share plan` with the dashboard token only; an unknown device is a 400 naming gpuKey', async () => {
    const served = servers[0] ?? (await serveWithProfile());
    const inputs = await call<PlanInputs>(served, 'GET', '/api/plan-inputs');
    expect(inputs.status).toBe(200);
    expect(inputs.body).toMatchObject({ policy: 'm10-v1', devices: [{ key: KEY, name: 'Sim 24GB' }], snapshot: { accelerator: { key: KEY }, controls: { draining: false, labPaused: false }, queueDepth: 0, residents: [], leases: [] } });
    expect((await call(served, 'GET', '/api/plan-inputs', undefined, null)).status).toBe(401);
    const bad = await call<{ error: { field: string } }>(served, 'GET', '/api/plan-inputs?gpuKey=GPU-nope');
    expect(bad.status).toBe(400);
    expect(bad.body.error.field).toBe('gpuKey');
    expect((await call(served, 'GET', '/api/plan-inputs?gpuKey=bad%2Fkey')).status).toBe(400);
  }, 60_000);
});
