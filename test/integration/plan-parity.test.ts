/**
 * One planner: `gpu-share plan` and `/api/plan` on the same data folder give the same verdict,
 * reasons and fingerprint, over six states of a running `serve` on simulated telemetry: healthy,
 * draining, lab work paused, a load in progress holding a lease, an idle engine of ours that must
 * be stopped to make room, and telemetry that stopped answering. The CLI asks the serve for its
 * inputs (with the folder's token, on the port GPU_SHARE_API_PORT names) and says so in the plan;
 * with no serve it reads the folder's files and says why.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineView, PlacementPlan } from '../../electron/core/contract.js';
import { GiB, MiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { freePort } from '../fixtures/llama-server.js';
import { CLI, FAKE_LLAMA_SERVER } from '../fixtures/procs.js';
import { call, startServe, state, until, type Served } from '../fixtures/serve.js';

const KEY = `GPU-parity-${process.pid}`;
let dir = '';
let model = '';
let sim = '';
let dataDir = '';
let served: Served | null = null;

const simDevice = (usedBytes: number): string => JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes, processes: null, health: 'OK' }] });

function cli(args: string[], port: number | null): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['GPU_SHARE_SIM'];
  if (port === null) delete env['GPU_SHARE_API_PORT'];
  else env['GPU_SHARE_API_PORT'] = String(port);
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'plan', ...args], { env, encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr });
    });
  });
}

/** The same request both ways: the profile's model, context, priority, capability and engine. */
async function both(profileId: string, priority: 'interactive' | 'background' | 'lab'): Promise<{ api: PlacementPlan; cli: PlacementPlan }> {
  if (served === null) throw new Error('no serve');
  const api = (await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId })).body;
  const r = await cli(['--model', model, '--ctx', '256', '--priority', priority, '--capability', 'chat', '--engine', 'builtin', '--data-dir', dataDir, '--json'], served.port);
  expect(r.stdout, r.stderr).not.toBe('');
  return { api, cli: JSON.parse(r.stdout) as PlacementPlan };
}

function expectSame(pair: { api: PlacementPlan; cli: PlacementPlan }, verdict: PlacementPlan['verdict'], codes: string[]): void {
  expect(pair.cli.verdict).toBe(pair.api.verdict);
  expect(pair.api.verdict).toBe(verdict);
  expect(pair.api.reasons.map((r) => r.code)).toEqual(codes);
  // The reasons with their figures; a stale sample's age is clock-derived (the two were planned
  // seconds apart) and, like in the fingerprint, left out.
  const reasons = (p: PlacementPlan): unknown[] => p.reasons.map(({ sampleAgeUs: _sampleAgeUs, ...rest }) => rest);
  expect(reasons(pair.cli)).toEqual(reasons(pair.api));
  expect(pair.cli.fingerprint).toBe(pair.api.fingerprint);
  expect(pair.cli.policy).toBe(pair.api.policy);
  // The evictions without how long each engine has been idle (clock-derived, not in the fingerprint).
  const evictions = (p: PlacementPlan): unknown[] => p.evictions.map(({ idleForUs: _idleForUs, ...rest }) => rest);
  expect(evictions(pair.cli)).toEqual(evictions(pair.api));
  expect(pair.cli.inputs).toMatchObject({ from: 'serve', url: `http://127.0.0.1:${served?.port ?? 0}` });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-plan-parity-'));
  model = join(dir, 'tiny.gguf');
  writeGguf(model, TINY_GGUF_SPEC);
  sim = join(dir, 'sim.json');
  writeFileSync(sim, simDevice(3 * GiB));
  dataDir = join(dir, 'data');
  const profile = (id: string, extra: Record<string, unknown>): Record<string, unknown> => ({ id, name: id, capabilities: ['chat'], engineKind: 'builtin', contextSize: 256, priority: 'interactive', modelPath: model, ...extra });
  const server = join(dir, 'llama-server');
  writeFileSync(server, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_LLAMA_SERVER}" "$@"\n`);
  chmodSync(server, 0o755);
  // The command and the llama-server of the test's own making are the local user's (profiles.json
  // and the added executables): over HTTP serve refuses them.
  served = await startServe({
    dataDir,
    sim,
    profiles: [
      profile('sleeper', { engineKind: 'command', modelPath: null, command: '/bin/sleep', args: ['600'], priority: 'background' }),
      profile('slow', { engineKind: 'llama-server', command: server, args: ['--port', String(await freePort()), '--load-ms', '120000'], priority: 'background' }),
    ],
    executables: [server],
  });
  for (const body of [profile('chat', {}), profile('labchat', { priority: 'lab' })]) {
    const created = await call(served, 'POST', '/api/profiles', body);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  }
}, 60_000);

afterAll(async () => {
  await served?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const engineOf = async (profileId: string): Promise<EngineView | undefined> => (served === null ? undefined : (await state(served)).engines.find((e) => e.profileId === profileId && (e.state === 'loading' || e.state === 'running')));

describe('gpu-share plan and /api/plan: one planner', () => {
  it('same verdict, reasons and fingerprint over six states; the plan says where its inputs came from', async () => {
    if (served === null) throw new Error('no serve');
    // 1. Healthy.
    const healthy = await both('chat', 'interactive');
    expectSame(healthy, 'ADMIT', ['FITS']);
    const requirement = healthy.api.breakdown.requirementBytes;

    // 2. Draining.
    expect((await call(served, 'PUT', '/api/policy', { draining: true })).status).toBe(200);
    expectSame(await both('chat', 'interactive'), 'REJECT_POLICY', ['DRAINING']);
    expect((await call(served, 'PUT', '/api/policy', { draining: false })).status).toBe(200);

    // 3. Lab work paused (a lab request).
    expect((await call(served, 'PUT', '/api/policy', { labPaused: true })).status).toBe(200);
    expectSame(await both('labchat', 'lab'), 'REJECT_POLICY', ['LAB_PAUSED']);
    expect((await call(served, 'PUT', '/api/policy', { labPaused: false })).status).toBe(200);

    // 4. A live lease: an engine that loads for two minutes holds its requirement.
    expect((await call(served, 'POST', '/api/engines', { profileId: 'slow' })).status).toBe(202);
    const slow = await until(() => engineOf('slow'), 15_000, 'the slow engine loading');
    const leased = await both('chat', 'interactive');
    expectSame(leased, 'ADMIT', ['FITS']);
    expect(leased.api.breakdown.futureLeaseBytes).toBeGreaterThan(0);
    expect(leased.api.fingerprint).not.toBe(healthy.api.fingerprint);
    await call(served, 'POST', `/api/engines/${slow.id}/stop`);
    await until(async () => ((await engineOf('slow')) === undefined ? true : undefined), 20_000, 'the slow engine stopped');

    // 5. An idle engine of ours (256 MiB by its envelope) that must be stopped for the model to fit.
    expect((await call(served, 'POST', '/api/engines', { profileId: 'sleeper' })).status).toBe(202);
    await until(async () => ((await engineOf('sleeper'))?.state === 'running' ? true : undefined), 15_000, 'the sleeper running');
    const reserve = Math.round(0.05 * 24 * GiB) + 256 * MiB;
    writeFileSync(sim, simDevice(24 * GiB - reserve - requirement + 64 * MiB));
    const evicting = await until(
      async () => {
        const pair = await both('chat', 'interactive');
        return pair.api.verdict === 'ADMIT_AFTER_EVICTION' && pair.cli.verdict === pair.api.verdict ? pair : undefined;
      },
      30_000,
      'a plan that stops the idle engine',
      250,
    );
    expectSame(evicting, 'ADMIT_AFTER_EVICTION', ['FITS_AFTER_EVICTION']);
    expect(evicting.api.evictions.map((e) => e.id)).toEqual([(await engineOf('sleeper'))?.id]);

    // 6. Telemetry that stopped answering: stale at once, from both.
    writeFileSync(sim, '{ "devices": [ broken');
    await until(async () => ((await call<PlacementPlan>(served!, 'POST', '/api/plan', { profileId: 'chat' })).body.reasons[0]?.code === 'TELEMETRY_STALE' ? true : undefined), 10_000, 'a stale plan', 100);
    const stale = await both('chat', 'interactive');
    expectSame(stale, 'QUEUE', ['TELEMETRY_STALE']);
    expect(stale.cli.reasons[0]).toMatchObject({ staleAfterUs: 2_000_000, queryFailed: true });
  }, 240_000);

  it('with no serve for the folder, plans from its files and says why; a drain set in its settings still holds', async () => {
    const good = join(dir, 'good.json');
    writeFileSync(good, simDevice(3 * GiB));
    const port = await freePort();
    const fresh = await cli(['--model', model, '--ctx', '256', '--data-dir', join(dir, 'no-serve'), '--sim', good, '--json'], port);
    const p = JSON.parse(fresh.stdout) as PlacementPlan;
    expect(p.verdict).toBe('ADMIT');
    expect(p.inputs).toMatchObject({ from: 'files' });
    expect(p.inputs?.from === 'files' ? p.inputs.why : '').toMatch(/settings\.json/);
    // The serve above is gone; its settings (token and all) stay, with drain set in the file.
    await served?.stop();
    served = null;
    const settingsFile = join(dataDir, 'settings.json');
    const settings = JSON.parse(readFileSync(settingsFile, 'utf8')) as Record<string, unknown>;
    writeFileSync(settingsFile, JSON.stringify({ ...settings, apiPort: port, draining: true }));
    const files = await cli(['--model', model, '--ctx', '256', '--data-dir', dataDir, '--sim', good, '--json'], null);
    const q = JSON.parse(files.stdout) as PlacementPlan;
    expect(q.verdict).toBe('REJECT_POLICY');
    expect(q.reasons.map((x) => x.code)).toEqual(['DRAINING']);
    expect(q.inputs).toEqual({ from: 'files', dataDir, why: `no serve or app answers on 127.0.0.1:${port}` });
    expect(files.code).toBe(4);
  }, 120_000);
});
