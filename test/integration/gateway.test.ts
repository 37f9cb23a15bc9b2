/**
 * The OpenAI-compatible gateway against `gpu-share serve` with real built-in engines: on-demand
 * load by capability, streaming pass-through, 2:1 between two engines pinned to one core, an
 * interactive request overtaking queued background ones, a client leaving the queue, 429 when the
 * queue is full, QUEUE until a busy engine can be evicted, 503 with the plan's verdict.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppState } from '../../electron/core/contract.js';
import { GiB, MiB } from '../../electron/core/planner/policy.js';
import { PACED_GGUF_SPEC, PACED_REQUEST_TOKENS, PACED_WARM_TOKENS, TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { hasTaskset, predictedTokens , PACED_2_1_HIGH, PACED_2_1_LOW } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, startServe, state, streamChat, until, type Served } from '../fixtures/serve.js';

let dir = '';
let tiny = '';
let small = '';
let paced = '';
const BACKGROUND_TOKEN = 'background-token-0123456789abcdefghijklmnop';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-gateway-'));
  tiny = join(dir, 'tiny.gguf');
  small = join(dir, 'small.gguf');
  paced = join(dir, 'paced.gguf');
  writeGguf(tiny, TINY_GGUF_SPEC);
  // Big enough that a token is real work (~1 ms), small enough to load in a moment.
  writeGguf(small, { embedding: 512, layers: 6, contextLength: 1024, feedForward: 1024, heads: 8, vocab: 1024, type: 'q8_0', seed: 7 });
  writeGguf(paced, PACED_GGUF_SPEC);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function simFile(name: string, key: string, totalBytes: number, usedBytes: number): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ devices: [{ key, name: 'Sim', totalBytes, usedBytes, processes: null, health: 'OK' }] }));
  return file;
}

/** A data dir whose settings carry a background-priority gateway token. */
function dataDirWithTokens(name: string): string {
  const dataDir = join(dir, name);
  mkdirSync(dataDir, { recursive: true });
  const settings = { version: 1, apiPort: 7787, apiToken: `dashboard-token-${name}-0123456789abcdefghij`, gatewayTokens: [{ token: BACKGROUND_TOKEN, priority: 'background', label: 'batch jobs' }], launchAtLogin: false, labPaused: false, draining: false, idleUnloadMinutes: null };
  writeFileSync(join(dataDir, 'settings.json'), JSON.stringify(settings));
  return dataDir;
}

const profile = (id: string, capability: string, model: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id,
  name: id,
  capabilities: [capability],
  engineKind: 'builtin',
  modelPath: model,
  contextSize: 1024,
  threads: 1,
  priority: 'background',
  ...extra,
});

describe('on a roomy device', () => {
  const KEY = `GPU-gw-${process.pid}`;
  let served: Served;
  beforeAll(async () => {
    served = await startServe({ dataDir: dataDirWithTokens('roomy'), sim: simFile('roomy', KEY, 24 * GiB, 1 * GiB) });
    await call(served, 'POST', '/api/profiles', profile('tiny', 'chat', small, { priority: 'interactive' }));
    await call(served, 'POST', '/api/profiles', profile('fast', 'fast', paced, { weight: 2 }));
    await call(served, 'POST', '/api/profiles', profile('slow', 'slow', paced, { weight: 1 }));
  }, 30_000);
  afterAll(async () => {
    await served?.stop();
    removeSegment(KEY);
  });

  it('lists capabilities and loads the engine for one on demand, streaming through', async () => {
    const models = await call<{ data: { id: string }[] }>(served, 'GET', '/v1/models');
    // Each profile by its name, and the capabilities no name shadows ("fast" and "slow" are both).
    expect(models.body.data.map((m) => m.id).sort()).toEqual(['chat', 'fast', 'slow', 'tiny']);
    expect((await state(served)).engines).toEqual([]);
    const answer = await streamChat(served, 'chat', 16);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toContain('text/event-stream');
    expect(answer.headers.get('x-gpushare-queue-position')).toBe('0');
    expect(answer.pieces.length).toBeGreaterThan(0);
    const engines = (await state(served)).engines;
    expect(engines.map((e) => [e.profileId, e.state])).toEqual([['tiny', 'running']]);

    const plain = await call<{ choices: { text: string }[] }>(served, 'POST', '/v1/completions', { model: 'chat', prompt: 'Once upon a time', max_tokens: 8 });
    expect(plain.status).toBe(200);
    expect(typeof plain.body.choices[0]?.text).toBe('string');
    // The log has the requests' shapes and hashes, never their text.
    const logged = served.log.filter((line) => line.startsWith('gateway: '));
    expect(logged.length).toBeGreaterThanOrEqual(2);
    expect(logged.every((line) => /sha256=[0-9a-f]{12}/.test(line))).toBe(true);
    expect(served.log.join('\n')).not.toMatch(/Tell me a story|Once upon a time/);
  }, 60_000);

  it('an interactive request overtakes queued background ones on the same engine', async () => {
    const done: string[] = [];
    const background = [0, 1, 2].map((i) => streamChat(served, 'chat', 600, BACKGROUND_TOKEN).then((a) => (done.push(`bg${i}`), a)));
    await until(async () => ((await state(served)).gateway.queueDepth === 2 ? true : undefined), 10_000, 'two background requests waiting', 20);
    const interactive = await streamChat(served, 'chat', 8);
    done.push('interactive');
    expect(interactive.status).toBe(200);
    // It waited behind the one being served only, not behind the two queued before it.
    expect(interactive.headers.get('x-gpushare-queue-position')).toBe('1');
    await Promise.all(background);
    expect(done.indexOf('interactive')).toBeLessThan(done.indexOf('bg2'));
    expect(done.indexOf('interactive')).toBeLessThanOrEqual(1);
  }, 60_000);

  it('a client that goes away frees its place in the queue', async () => {
    const first = streamChat(served, 'chat', 600);
    await until(async () => ((await state(served)).engines.some((e) => e.busy) || (await state(served)).gateway.queueDepth >= 0 ? true : undefined), 2_000, 'first request');
    const controller = new AbortController();
    const leaving = fetch(`${served.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${served.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 50 }),
      signal: controller.signal,
    }).catch(() => null);
    await until(async () => ((await state(served)).gateway.queueDepth === 1 ? true : undefined), 5_000, 'the second request queued');
    controller.abort();
    await leaving;
    await until(async () => ((await state(served)).gateway.queueDepth === 0 ? true : undefined), 2_000, 'the queue to empty');
    // The engine is still the first request's: the next one waits for it (leaving freed a place in
    // the line, not the engine).
    const next = streamChat(served, 'chat', 4);
    await until(async () => ((await state(served)).gateway.queueDepth === 1 ? true : undefined), 2_000, 'the next request waiting');
    expect((await first).status).toBe(200);
    expect((await next).status).toBe(200);
  }, 60_000);

  it.skipIf(!hasTaskset)('two clients streaming at once to engines of weights 2:1 get tokens 2:1 (clearly paced: 1.5–2.7)', async () => {
    // Load both first, so that the measured stretch has both decoding.
    await Promise.all([streamChat(served, 'fast', 2), streamChat(served, 'slow', 2)]);
    // Only the engines share core 0 (one "device"); the server and this test run elsewhere.
    for (const engine of (await state(served)).engines.filter((e) => e.profileId === 'fast' || e.profileId === 'slow')) {
      expect(spawnSync('taskset', ['-a', '-p', '-c', '0', String(engine.pid)]).status).toBe(0);
    }
    const engines = (await state(served)).engines.filter((e) => e.state === 'running');
    const portOf = (profileId: string): number => engines.find((e) => e.profileId === profileId)?.port ?? 0;
    // Tokens as each engine counts them (a streamed piece may carry more than one token).
    const predicted = (profileId: string): Promise<number> => predictedTokens(portOf(profileId));
    // Each engine first decodes PACED_WARM_TOKENS alone, then back-to-back requests of
    // PACED_REQUEST_TOKENS (the fixture says why).
    for (const capability of ['fast', 'slow']) for (let i = 0; i < PACED_WARM_TOKENS / PACED_REQUEST_TOKENS; i++) await streamChat(served, capability, PACED_REQUEST_TOKENS);
    let running = true;
    const client = async (capability: string): Promise<void> => {
      while (running) await streamChat(served, capability, PACED_REQUEST_TOKENS);
    };
    const clients = [client('fast'), client('slow')];
    await new Promise((r) => setTimeout(r, 1_500)); // both active, shares settled
    const before = { fast: await predicted('fast'), slow: await predicted('slow') };
    await new Promise((r) => setTimeout(r, 8_000));
    const after = { fast: await predicted('fast'), slow: await predicted('slow') };
    running = false;
    await Promise.all(clients);
    const counts = { fast: after.fast - before.fast, slow: after.slow - before.slow };
    const ratio = counts.fast / counts.slow;
    console.info(`gateway 2:1: ${counts.fast} / ${counts.slow} tokens in 8 s, ratio ${ratio.toFixed(3)}`);
    expect(counts.slow, JSON.stringify(counts)).toBeGreaterThan(400);
    expect(ratio, JSON.stringify(counts)).toBeGreaterThan(PACED_2_1_LOW);
    expect(ratio, JSON.stringify(counts)).toBeLessThan(PACED_2_1_HIGH);
    // Both paced themselves, and said by how much they ran past their windows.
    const metrics = (await call<string>(served, 'GET', '/metrics', undefined, null)).body;
    expect(metrics).toMatch(/gpushare_pacer_window_overshoot_seconds_count\{engine="fast-\d+"\} [1-9]/);
  }, 90_000);
});

describe('on a device with room for one engine', () => {
  const KEY = `GPU-gw1-${process.pid}`;
  let served: Served;
  let sim = '';
  // The 1.25 GiB reserve (1 GiB + the 256 MiB runtime margin) leaves 200 MiB: one small engine's
  // requirement (its ~51 MiB peak + 128 MiB) fits; with one resident (its envelope counted), a
  // second does not.
  const TOTAL = GiB + 256 * MiB + 200 * MiB;
  beforeAll(async () => {
    sim = simFile('small', KEY, TOTAL, 0);
    served = await startServe({ dataDir: dataDirWithTokens('small'), sim, extraArgs: ['--queue-limit', '1'] });
    await call(served, 'POST', '/api/profiles', profile('one', 'one', small));
    await call(served, 'POST', '/api/profiles', profile('two', 'two', small));
    await call(served, 'POST', '/api/profiles', profile('three', 'three', tiny, { priority: 'lab' }));
  }, 30_000);
  afterAll(async () => {
    await served?.stop();
    removeSegment(KEY);
  });

  it('answers 429 with Retry-After when the queue is full', async () => {
    const serving = streamChat(served, 'one', 400);
    await until(async () => ((await state(served)).engines.some((e) => e.state === 'running') ? true : undefined), 20_000, 'engine one running');
    const waiting = streamChat(served, 'one', 4);
    await until(async () => ((await state(served)).gateway.queueDepth === 1 ? true : undefined), 5_000, 'one request waiting');
    const refused = await call<{ error: { code: string } }>(served, 'POST', '/v1/chat/completions', { model: 'one', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('rate_limit_exceeded');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await serving).status).toBe(200);
    expect((await waiting).status).toBe(200);
  }, 60_000);

  it('queues a load while a busy engine holds the room, then evicts it once idle', async () => {
    // Busy for as long as the context allows (~900 tokens): a 400-token answer could end on a fast
    // machine before the second request was planned, and then there is nothing to queue behind.
    const busy = streamChat(served, 'one', 900);
    await until(async () => ((await state(served)).gateway.queueDepth === 0 && (await state(served)).engines.some((e) => e.profileId === 'one' && e.state === 'running') ? true : undefined), 5_000, 'one busy');
    const started = Date.now();
    const second = streamChat(served, 'two', 4);
    const queued = await until(async () => {
      const plans = (await call<AppState['plans']>(served, 'GET', '/api/plans')).body;
      return plans.find((p) => p.request.modelKey !== '' && p.verdict === 'QUEUE' && p.plannedAtUs > 0);
    }, 10_000, 'a QUEUE plan for two');
    expect(queued.reasons.map((r) => r.code)).toContain('WAIT_FOR_BUSY_ENGINES');
    expect((await busy).status).toBe(200);
    const answer = await second;
    expect(answer.status).toBe(200);
    const engines = (await state(served)).engines;
    expect(engines.find((e) => e.profileId === 'one' && e.state === 'running')).toBeUndefined();
    expect(engines.find((e) => e.profileId === 'two')?.state).toBe('running');
    const plans = (await call<AppState['plans']>(served, 'GET', '/api/plans')).body;
    expect(plans.find((p) => p.verdict === 'ADMIT_AFTER_EVICTION')?.evictions.length).toBe(1);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);

  it('answers 503 with the verdict and reasons when the plan rejects the load', async () => {
    // Something outside GPU Share takes the whole device.
    writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim', totalBytes: TOTAL, usedBytes: TOTAL, processes: null, health: 'OK' }] }));
    await new Promise((r) => setTimeout(r, 1_200)); // the sampler's next read
    const refused = await call<{ error: { code: string; verdict: string; reasons: string[]; message: string } }>(served, 'POST', '/v1/chat/completions', { model: 'three', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('not_admitted');
    expect(refused.body.error.verdict).toBe('REJECT_CAPACITY');
    expect(refused.body.error.reasons.length).toBeGreaterThan(0);
    expect((await call(served, 'GET', '/gpu/peers', undefined, null)).status).toBe(200);
  }, 30_000);
});
