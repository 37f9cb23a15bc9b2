/**
 * `gpu-share serve` end to end on a simulated device with real engines: every endpoint, the
 * security rules (Host allow-list, token, no CORS, body limit, field checks — the server keeps
 * serving after each), profiles, launch with progress events, a weight change reaching the
 * registry, stop, and kill (the killed engine's slot freed at once).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppEvent, EngineView, LaunchOutcome, PlacementPlan, Profile } from '../../electron/core/contract.js';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { BURN_ENGINE } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, openEvents, rawRequest, startServe, state, until, type Served } from '../fixtures/serve.js';

const KEY = `GPU-serve-${process.pid}`;
let dir = '';
let served: Served;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-serve-'));
  writeGguf(join(dir, 'tiny.gguf'), TINY_GGUF_SPEC);
  const sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' }] }));
  // A command profile is the local user's to make (never over HTTP): written before serve starts.
  served = await startServe({ dataDir: join(dir, 'data'), sim, profiles: [{ id: 'burner', name: 'burner', capabilities: ['burn'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--duration-s', '60'], contextSize: 256, priority: 'background' }] });
}, 30_000);

afterAll(async () => {
  await served?.stop();
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
});

const stillServing = async (): Promise<void> => {
  expect((await call(served, 'GET', '/gpu/peers', undefined, null)).status).toBe(200);
};

describe('security', () => {
  it('refuses a Host that is not its loopback address, empty included, before any handler', async () => {
    for (const host of [`evil.example:${served.port}`, '', `127.0.0.1:${served.port + 1}`, 'localhost']) {
      const answer = await rawRequest(served.port, { path: '/gpu/peers', host });
      expect(answer.status, host).toBe(403);
      expect(JSON.parse(answer.text)).toMatchObject({ error: { code: 'FORBIDDEN' } });
    }
    expect((await rawRequest(served.port, { path: '/gpu/peers', host: null })).status).toBe(403);
    for (const host of [`localhost:${served.port}`, `127.0.0.1:${served.port}`, `[::1]:${served.port}`]) {
      expect((await rawRequest(served.port, { path: '/gpu/peers', host })).status, host).toBe(200);
    }
    await stillServing();
  });

  it('needs the token for control and the gateway, compared exactly', async () => {
    expect((await call(served, 'GET', '/api/state', undefined, null)).status).toBe(401);
    expect((await call(served, 'GET', '/api/state', undefined, `${served.token}x`)).status).toBe(401);
    expect((await call(served, 'GET', '/api/state', undefined, served.token.slice(1))).status).toBe(401);
    expect((await call(served, 'GET', '/v1/models', undefined, null)).status).toBe(401);
    const bad = await rawRequest(served.port, { path: '/api/state', headers: { authorization: `Basic ${served.token}` } });
    expect(bad.status).toBe(401);
    expect((await call(served, 'GET', '/api/state')).status).toBe(200);
    await stillServing();
  });

  it('sends no CORS headers and answers no preflight', async () => {
    const preflight = await rawRequest(served.port, {
      method: 'OPTIONS',
      path: '/api/state',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    expect(preflight.status).toBe(403);
    const simple = await rawRequest(served.port, { path: '/gpu/peers', headers: { origin: 'http://evil.example' } });
    for (const answer of [preflight, simple]) {
      expect(Object.keys(answer.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    }
    await stillServing();
  });

  it('limits bodies to 1 MiB', async () => {
    const big = Buffer.alloc(1024 * 1024 + 10, 0x20);
    const answer = await rawRequest(served.port, { method: 'PUT', path: '/api/policy', headers: { authorization: `Bearer ${served.token}`, 'content-type': 'application/json' }, body: big });
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.text)).toMatchObject({ error: { code: 'TOO_LARGE' } });
    await stillServing();
  });

  it('names the field of every bad input with a 400', async () => {
    const cases: [string, string, unknown, string][] = [
      ['PUT', '/api/policy', '{"labPaused": tru', 'body'],
      ['PUT', '/api/policy', { labPaused: 'yes' }, 'labPaused'],
      ['PUT', '/api/policy', { idleUnloadMinutes: -1 }, 'idleUnloadMinutes'],
      ['PUT', '/api/policy', { surprise: 1 }, 'surprise'],
      ['POST', '/api/engines', {}, 'profileId'],
      ['POST', '/api/plan', [], 'body'],
      // A misspelt field is refused by name, not ignored.
      ['POST', '/api/plan', { profileId: 'fields', profileID: 'fields' }, 'profileID'],
      ['PUT', '/api/profiles/fields', { contextsize: 512 }, 'contextsize'],
      ['PUT', '/api/profiles/fields', { env: { HF_HOME: 7 } }, 'env'],
      ['PUT', '/api/engines/x-1/weight', { weight: 0 }, 'weight'],
      ['PUT', '/api/engines/x-1/weight', { weight: '2' }, 'weight'],
      ['PUT', '/api/engines/x-1/weight', { weight: 1e9 }, 'weight'],
      ['POST', '/api/profiles', { name: 'x', capabilities: ['chat'], engineKind: 'warp-drive', contextSize: 512, priority: 'interactive', modelPath: '/m.gguf' }, 'engineKind'],
      ['POST', '/api/profiles', { name: 'x', capabilities: 'chat', engineKind: 'builtin', contextSize: 512, priority: 'interactive', modelPath: '/m.gguf' }, 'capabilities'],
      ['POST', '/api/estimate', { modelPath: 7 }, 'modelPath'],
      ['POST', '/v1/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'hi' }] }, 'model'],
    ];
    // The gateway's checks need a capability to exist.
    await call(served, 'POST', '/api/profiles', { id: 'fields', name: 'fields', capabilities: ['fieldcheck'], engineKind: 'builtin', contextSize: 256, priority: 'background', modelPath: join(dir, 'tiny.gguf') });
    const chat = (extra: Record<string, unknown>): Record<string, unknown> => ({ model: 'fieldcheck', messages: [{ role: 'user', content: 'hi' }], ...extra });
    cases.push(
      ['POST', '/v1/chat/completions', chat({ max_tokens: -5 }), 'max_tokens'],
      ['POST', '/v1/chat/completions', chat({ max_tokens: 1e12 }), 'max_tokens'],
      ['POST', '/v1/chat/completions', chat({ max_tokens: 2.5 }), 'max_tokens'],
      ['POST', '/v1/chat/completions', chat({ stream: 'yes' }), 'stream'],
      ['POST', '/v1/chat/completions', chat({ temperature: 'hot' }), 'temperature'],
      ['POST', '/v1/chat/completions', chat({ messages: 'hi' }), 'messages'],
      ['POST', '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 5 }] }), 'messages[0].content'],
      ['POST', '/v1/completions', { model: 'fieldcheck', prompt: 12 }, 'prompt'],
      ['POST', '/v1/chat/completions', '{"model":', 'body'],
    );
    for (const [method, path, body, field] of cases) {
      const answer = await call<{ error: { code: string; field?: string; param?: string; type?: string; message: string } }>(served, method, path, body);
      // The gateway answers as OpenAI's API does: a model that names nothing is 404, the field is `param`.
      const openAi = path.startsWith('/v1/');
      expect(answer.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(openAi && field === 'model' ? 404 : 400);
      if (openAi) {
        expect(answer.body.error.type).toBe('invalid_request_error');
        expect(answer.body.error.param, answer.body.error.message).toBe(field);
      } else {
        expect(answer.body.error.code).toBe('BAD_REQUEST');
        expect(answer.body.error.field, answer.body.error.message).toBe(field);
      }
    }
    expect((await call(served, 'DELETE', '/api/profiles/fields')).status).toBe(204);
    await stillServing();
  });

  it('answers a malformed %-escape in the path with a 400, on the API and for files', async () => {
    for (const path of ['/api/engines/%E0%A4%A/stop', '/%E0%A4%A.js']) {
      const answer = await rawRequest(served.port, { method: path.startsWith('/api') ? 'POST' : 'GET', path, headers: { authorization: `Bearer ${served.token}` } });
      expect(answer.status, path).toBe(400);
      expect(JSON.parse(answer.text)).toMatchObject({ error: { code: 'BAD_REQUEST', field: 'path' } });
    }
    await stillServing();
  });

  it('answers unknown paths and methods with the error envelope', async () => {
    const missing = await call<{ error: { code: string } }>(served, 'GET', '/api/nothing');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('NOT_FOUND');
    const wrongMethod = await call<{ error: { code: string } }>(served, 'DELETE', '/api/state');
    expect(wrongMethod.status).toBe(404);
    expect((await call(served, 'POST', '/api/engines/nope-1/stop')).status).toBe(404);
  });
});

describe('visibility', () => {
  it('serves /gpu/peers, /props and /metrics without a token', async () => {
    const peers = await call<GpuPeersView>(served, 'GET', '/gpu/peers', undefined, null);
    expect(peers.body).toEqual({ gpu_key: KEY, self: null, peers: [] });
    expect((await call<GpuPeersView>(served, 'GET', `/gpu/peers?gpu_key=${KEY}`, undefined, null)).body.gpu_key).toBe(KEY);
    const badKey = await call<{ error: { field: string } }>(served, 'GET', '/gpu/peers?gpu_key=no%20spaces', undefined, null);
    expect(badKey.status).toBe(400);
    expect(badKey.body.error.field).toBe('gpu_key');
    const props = await call<{ opencoti: { gpu_share: { enabled: boolean; gpu_key: string } } }>(served, 'GET', '/props', undefined, null);
    expect(props.body.opencoti.gpu_share).toMatchObject({ enabled: true, gpu_key: KEY });
    const metrics = await call<string>(served, 'GET', '/metrics', undefined, null);
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    expect(metrics.body).toContain(`gpushare_vram_bytes{gpu_key="${KEY}",part="total",engine=""} ${24 * GiB}`);
    expect(metrics.body).toContain('gpushare_plans_total{verdict="ADMIT"}');
    expect(metrics.body).toContain('gpushare_gateway_queue_depth 0');
  });
});

describe('profiles, engines, weights, plans', () => {
  it('creates, updates, lists and deletes profiles', async () => {
    const input = { id: 'crud', name: 'CRUD model', capabilities: ['crud'], engineKind: 'builtin', contextSize: 256, priority: 'lab', modelPath: join(dir, 'tiny.gguf') };
    const created = await call<Profile>(served, 'POST', '/api/profiles', input);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: 'crud', weight: null, gpuLayers: 99 });
    expect((await call(served, 'POST', '/api/profiles', input)).status).toBe(409);
    const updated = await call<Profile>(served, 'PUT', '/api/profiles/crud', { contextSize: 512 });
    expect(updated.body.contextSize).toBe(512);
    expect((await call<Profile[]>(served, 'GET', '/api/profiles')).body.map((p) => p.id)).toContain('crud');
    expect((await call(served, 'PUT', '/api/profiles/none', { contextSize: 512 })).status).toBe(404);
    expect((await call(served, 'DELETE', '/api/profiles/crud')).status).toBe(204);
    expect((await call(served, 'DELETE', '/api/profiles/crud')).status).toBe(404);
  });

  it('launches a built-in engine with progress, changes its weight in the registry within a heartbeat, stops it', async () => {
    await call(served, 'POST', '/api/profiles', { id: 'tiny', name: 'tiny-chat', capabilities: ['chat'], engineKind: 'builtin', contextSize: 256, threads: 1, priority: 'interactive', modelPath: join(dir, 'tiny.gguf') });
    const events = await openEvents(served);
    try {
      const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: 'tiny' });
      expect(launched.status).toBe(202);
      expect(launched.body.plan.verdict).toBe('ADMIT');
      const engine = launched.body.engine!;
      expect(engine.state).toBe('loading');
      const running = await events.next((e): e is Extract<AppEvent, { type: 'engine' }> => e.type === 'engine' && e.engine.id === engine.id && e.engine.state === 'running');
      expect(running.engine.port).toBeGreaterThan(0);
      const progress = events.events.filter((e): e is Extract<AppEvent, { type: 'progress' }> => e.type === 'progress' && e.engineId === engine.id).map((e) => e.pct);
      expect(progress.length).toBeGreaterThan(1);
      expect(progress.at(-1)).toBe(100);
      expect([...progress].sort((a, b) => a - b)).toEqual(progress);

      const row = await until(async () => (await state(served)).devices[0]?.peers.find((p) => p.engineId === engine.id), 5_000, 'the engine in the registry');
      expect(row).toMatchObject({ name: 'tiny-chat', kind: 'builtin', weight: 3 });
      const peers = await call<GpuPeersView>(served, 'GET', '/gpu/peers', undefined, null);
      expect(peers.body.peers.map((p) => p.name)).toContain('tiny-chat');

      const changed = Date.now();
      const weighted = await call<EngineView>(served, 'PUT', `/api/engines/${engine.id}/weight`, { weight: 2.5 });
      expect(weighted.status).toBe(200);
      expect(weighted.body.weight).toBe(2.5);
      await until(async () => ((await call<GpuPeersView>(served, 'GET', '/gpu/peers', undefined, null)).body.peers.find((p) => p.name === 'tiny-chat')?.weight === 2.5 ? true : undefined), 1_000, 'the new weight in /gpu/peers', 20);
      expect(Date.now() - changed).toBeLessThan(1_000);
      // Kept in the profile: the next launch starts with it.
      expect((await call<Profile[]>(served, 'GET', '/api/profiles')).body.find((p) => p.id === 'tiny')?.weight).toBe(2.5);

      // Its decode rate, read from its own /metrics every 2 s: 0 while idle (once read twice), then
      // above 0 over the interval in which it decoded.
      const idle = await until(async () => (await state(served)).engines.find((e) => e.id === engine.id)?.tokensPerSecond ?? undefined, 8_000, 'a first decode rate');
      expect(idle).toBe(0);
      const chat = await call<{ usage?: { completion_tokens?: number } }>(served, 'POST', '/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: 'hello' }], max_tokens: 48, seed: 1 });
      expect(chat.status).toBe(200);
      const rate = await until(async () => {
        const perSecond = (await state(served)).engines.find((e) => e.id === engine.id)?.tokensPerSecond ?? null;
        return perSecond !== null && perSecond > 0 ? perSecond : undefined;
      }, 8_000, 'a decode rate above 0');
      expect(rate).toBeLessThan(10_000);

      const stopped = await call<EngineView>(served, 'POST', `/api/engines/${engine.id}/stop`);
      expect(stopped.body.state).toBe('stopped');
      expect((await call(served, 'PUT', `/api/engines/${engine.id}/weight`, { weight: 1 })).status).toBe(409);
    } finally {
      events.close();
    }
  }, 60_000);

  it('kills an engine: the supervisor frees its slot at once (the row leaves within 1 s, nothing ages out)', async () => {
    const events = await openEvents(served);
    try {
      const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: 'burner' });
      const engine = launched.body.engine!;
      await until(async () => (await state(served)).devices[0]?.peers.find((p) => p.engineId === engine.id), 10_000, 'the burner in the registry');
      const killedAt = Date.now();
      const killed = await call<EngineView>(served, 'POST', `/api/engines/${engine.id}/kill`);
      expect(killed.body.state).toBe('stopped');
      expect(killed.body.exitSignal).toBe('SIGKILL');
      expect(killed.body.exitedAtUs).toBeGreaterThan(0);
      await until(async () => ((await state(served)).devices[0]?.peers.some((p) => p.name === 'burner') === false ? true : undefined), 3_000, 'the row to leave', 20);
      expect(Date.now() - killedAt).toBeLessThan(1_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(events.events.filter((e) => e.type === 'aged-out')).toEqual([]);
    } finally {
      events.close();
    }
  }, 30_000);

  it('estimates a model file for the add-model form', async () => {
    const estimate = await call<{ fileBytes: number; peakBytes: number; peakSource: string }>(served, 'POST', '/api/estimate', { modelPath: join(dir, 'tiny.gguf') });
    expect(estimate.status).toBe(200);
    expect(estimate.body.fileBytes).toBeGreaterThan(0);
    expect(estimate.body.peakBytes).toBeGreaterThan(estimate.body.fileBytes);
    const missing = await call<{ error: { field: string } }>(served, 'POST', '/api/estimate', { modelPath: join(dir, 'absent.gguf') });
    expect(missing.status).toBe(400);
    expect(missing.body.error.field).toBe('modelPath');
  });

  it('plans dry-runs, keeps them, and honours the policy', async () => {
    await call(served, 'POST', '/api/profiles', { id: 'labwork', name: 'lab work', capabilities: ['lab'], engineKind: 'builtin', contextSize: 256, priority: 'lab', modelPath: join(dir, 'tiny.gguf') });
    const dry = await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'labwork' });
    expect(dry.body.verdict).toBe('ADMIT');
    expect((await state(served)).engines.filter((e) => e.profileId === 'labwork')).toEqual([]);
    expect((await call(served, 'POST', '/api/plan', { profileId: 'ghost' })).status).toBe(404);
    const paused = await call<{ labPaused: boolean }>(served, 'PUT', '/api/policy', { labPaused: true });
    expect(paused.body.labPaused).toBe(true);
    const refused = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: 'labwork' });
    expect(refused.status).toBe(200);
    expect(refused.body.engine).toBeNull();
    expect(refused.body.plan).toMatchObject({ verdict: 'REJECT_POLICY', reasons: [{ code: 'LAB_PAUSED' }] });
    await call(served, 'PUT', '/api/policy', { labPaused: false });
    const plans = await call<PlacementPlan[]>(served, 'GET', '/api/plans');
    expect(plans.body[0]?.verdict).toBe('REJECT_POLICY');
    expect(plans.body.map((p) => p.fingerprint)).toContain(dry.body.fingerprint);
    const metrics = await call<string>(served, 'GET', '/metrics', undefined, null);
    expect(metrics.body).toMatch(/gpushare_plans_total\{verdict="REJECT_POLICY"\} [1-9]/);
  });
});
