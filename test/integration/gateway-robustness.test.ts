/**
 * What a new user's mistakes do to `gpu-share serve`: a profile whose model file is missing or
 * truncated, a `command` profile behind the gateway, a client that leaves while its engine loads.
 * Each is a clear 400 or 503 with a reason code, never a 500, and the gateway keeps serving from
 * the profiles that work.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineView, LaunchOutcome, ModelEstimateView, PlacementPlan } from '../../electron/core/contract.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { CLI, FAKE_LLAMA_SERVER } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, startServe, state, until, type Served } from '../fixtures/serve.js';

const KEY = `GPU-robust-${process.pid}`;
let dir = '';
let tiny = '';
let small = '';
let sim = '';
let served: Served;

type ErrorBody = { error: { code: string; message: string; field?: string; verdict?: string; reasons?: string[] } };

const profile = (id: string, capability: string, model: string | null, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id,
  name: id,
  capabilities: [capability],
  engineKind: 'builtin',
  modelPath: model,
  contextSize: 256,
  threads: 1,
  priority: 'interactive',
  ...extra,
});

const chat = (model: string, signal?: AbortSignal): Promise<Response> =>
  fetch(`${served.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${served.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    ...(signal === undefined ? {} : { signal }),
  });

/** The CLI, without blocking this process (a blocked event loop keeps dead keep-alive sockets). */
function runCli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-robust-'));
  tiny = join(dir, 'tiny.gguf');
  small = join(dir, 'small.gguf');
  writeGguf(tiny, TINY_GGUF_SPEC);
  writeGguf(small, { embedding: 512, layers: 6, contextLength: 1024, feedForward: 1024, heads: 8, vocab: 1024, type: 'q8_0', seed: 7 });
  sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' }] }));
  // What only the local user may make: a command profile, and a llama-server stand-in (written
  // by the test that uses it) as an executable a profile may name over HTTP.
  served = await startServe({ dataDir: join(dir, 'data'), sim, profiles: [profile('sleeper', 'x', null, { engineKind: 'command', command: '/bin/sleep', args: ['40'] })], executables: [join(dir, 'llama-server')] });
}, 30_000);

afterAll(async () => {
  await served?.stop();
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
});

describe('model files', () => {
  it('refuses to add or edit a profile whose model file cannot load, naming modelPath and why', async () => {
    const header = join(dir, 'header.gguf');
    writeFileSync(header, readFileSync(small).subarray(0, 24));
    const partial = join(dir, 'partial.gguf');
    writeFileSync(partial, readFileSync(small).subarray(0, 100_000));
    const text = join(dir, 'secret.gguf');
    writeFileSync(text, 'root:x:0:0:root:/root:/bin/bash\n');
    const cases: [string, RegExp][] = [
      [join(dir, 'absent.gguf'), /no such file/],
      [dir, /not a regular file/],
      [text, /not a GGUF model/],
      [header, /truncated/],
      [partial, /truncated: its contents need \d+ bytes, the file has 100000/],
    ];
    for (const [path, why] of cases) {
      const added = await call<ErrorBody>(served, 'POST', '/api/profiles', profile('bad', 'chat', path));
      expect(added.status, path).toBe(400);
      expect(added.body.error.field).toBe('modelPath');
      expect(added.body.error.message).toMatch(why);
      expect(added.body.error.message).not.toContain('root:x');
    }
    expect((await call<{ id: string }[]>(served, 'GET', '/api/profiles')).body.map((p) => p.id)).toEqual(['sleeper']);
    expect((await call(served, 'POST', '/api/profiles', profile('editable', 'edit', tiny))).status).toBe(201);
    const edited = await call<ErrorBody>(served, 'PUT', '/api/profiles/editable', { modelPath: partial });
    expect(edited.status).toBe(400);
    expect(edited.body.error.field).toBe('modelPath');
    expect((await call(served, 'DELETE', '/api/profiles/editable')).status).toBe(204);
  });

  it('plans a model that went bad after it was added as REJECT_HEALTH with a reason code, and launch says so', async () => {
    const copy = join(dir, 'shrinks.gguf');
    copyFileSync(small, copy);
    expect((await call(served, 'POST', '/api/profiles', profile('shrinks', 'shrinks', copy))).status).toBe(201);
    writeFileSync(copy, readFileSync(small).subarray(0, 100_000));
    const plan = await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'shrinks' });
    expect(plan.status).toBe(200);
    expect(plan.body.verdict).toBe('REJECT_HEALTH');
    expect(plan.body.reasons[0]).toMatchObject({ code: 'MODEL_TRUNCATED', fileBytes: 100_000 });
    writeFileSync(copy, readFileSync(small).subarray(0, 24));
    const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: 'shrinks' });
    expect(launched.status).toBe(200);
    expect(launched.body.engine).toBeNull();
    expect(launched.body.plan.verdict).toBe('REJECT_HEALTH');
    expect(launched.body.plan.reasons[0]?.code).toBe('MODEL_TRUNCATED');
    const failed = (await state(served)).profileFailures.find((f) => f.profileId === 'shrinks');
    expect(failed?.reason).toMatch(/truncated/);
    expect((await call(served, 'DELETE', '/api/profiles/shrinks')).status).toBe(204);
  });

  it('`plan` on a truncated model says REJECT_HEALTH (exit 4), not a stack', async () => {
    const partial = join(dir, 'cli-partial.gguf');
    writeFileSync(partial, readFileSync(small).subarray(0, 100_000));
    const run = await runCli(['plan', '--model', partial, '--sim', sim, '--data-dir', join(dir, 'cli-data'), '--json']);
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(run.status).toBe(4);
    const plan = JSON.parse(run.stdout) as PlacementPlan;
    expect(plan.verdict).toBe('REJECT_HEALTH');
    expect(plan.reasons[0]?.code).toBe('MODEL_TRUNCATED');
    // No --ctx: the model's trained context (1024 here, under the 8192 cap).
    const whole = await runCli(['plan', '--model', small, '--sim', sim, '--data-dir', join(dir, 'cli-data'), '--json']);
    expect(whole.status).toBe(0);
    expect((JSON.parse(whole.stdout) as PlacementPlan).request.contextSize).toBe(1024);
  }, 60_000);

  it('estimates at the context asked for, with the model default when none is given', async () => {
    const at = async (contextSize?: number): Promise<ModelEstimateView> => {
      const answer = await call<ModelEstimateView>(served, 'POST', '/api/estimate', { modelPath: small, ...(contextSize === undefined ? {} : { contextSize }) });
      expect(answer.status).toBe(200);
      return answer.body;
    };
    const byDefault = await at();
    expect(byDefault).toMatchObject({ contextSize: 1024, trainContextSize: 1024, defaultContextSize: 1024, kvCacheType: 'f16' });
    const small4k = await at(4096);
    const large = await at(32_768);
    expect(small4k.contextSize).toBe(4096);
    expect(large.peakBytes).toBeGreaterThan(small4k.peakBytes);
    expect(large.contextBytes ?? 0).toBeGreaterThan(small4k.contextBytes ?? 0);
    expect(large.modelBytes).toBe(small4k.modelBytes);
    const q8 = await call<ModelEstimateView>(served, 'POST', '/api/estimate', { modelPath: small, contextSize: 32_768, kvCacheType: 'q8_0' });
    expect(q8.body.contextBytes ?? 0).toBeLessThan(large.contextBytes ?? 0);
  });

  it('/api/estimate opens only regular .gguf files and never quotes their contents', async () => {
    const notGguf = await call<ErrorBody>(served, 'POST', '/api/estimate', { modelPath: '/etc/passwd' });
    expect(notGguf.status).toBe(400);
    expect(notGguf.body.error.field).toBe('modelPath');
    const text = join(dir, 'words.gguf');
    writeFileSync(text, 'root:x:0:0\n');
    const disguised = await call<ErrorBody>(served, 'POST', '/api/estimate', { modelPath: text });
    expect(disguised.status).toBe(400);
    expect(disguised.body.error.message).toMatch(/not a GGUF model/);
    expect(disguised.body.error.message).not.toContain('root');
    // A truncated model (its header alone) is a 400 saying so, not an INTERNAL in Add a model.
    const header = join(dir, 'estimate-header.gguf');
    writeFileSync(header, readFileSync(small).subarray(0, 24));
    const truncated = await call<ErrorBody>(served, 'POST', '/api/estimate', { modelPath: header });
    expect(truncated.status).toBe(400);
    expect(truncated.body.error).toMatchObject({ code: 'BAD_REQUEST', field: 'modelPath' });
    expect(truncated.body.error.message).toMatch(/truncated/);
    const fifo = join(dir, 'pipe.gguf');
    if (spawnSync('mkfifo', [fifo]).status === 0) {
      const started = Date.now();
      const piped = await call<ErrorBody>(served, 'POST', '/api/estimate', { modelPath: fifo });
      expect(piped.status).toBe(400);
      expect(piped.body.error.message).toMatch(/not a regular file/);
      expect(Date.now() - started).toBeLessThan(5_000);
    }
  });
});

describe('the gateway', () => {
  it('skips a profile that failed to load, never answers 500, and serves from the one that works', async () => {
    const doomed = join(dir, 'doomed.gguf');
    copyFileSync(tiny, doomed);
    // The broken profile comes first: the gateway tries it before the working one.
    expect((await call(served, 'POST', '/api/profiles', profile('broken', 'chat', doomed))).status).toBe(201);
    expect((await call(served, 'POST', '/api/profiles', profile('works', 'chat', tiny))).status).toBe(201);
    rmSync(doomed);
    const first = await chat('chat');
    expect(first.status).toBe(200);
    const failures = (await state(served)).profileFailures;
    expect(failures.map((f) => f.profileId)).toEqual(['broken']);
    const engine = (await state(served)).engines.find((e) => e.profileId === 'works' && e.state === 'running') as EngineView;
    expect((await call(served, 'POST', `/api/engines/${engine.id}/kill`)).status).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await chat('chat')).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    // Only the working profile was ever started.
    expect(new Set((await state(served)).engines.map((e) => e.profileId))).toEqual(new Set(['works']));

    // A capability whose only profile is broken: 503 with the verdict and the reason, then the
    // profile is skipped until it is edited.
    const gone = join(dir, 'gone.gguf');
    copyFileSync(tiny, gone);
    expect((await call(served, 'POST', '/api/profiles', profile('lonely', 'lonely', gone))).status).toBe(201);
    rmSync(gone);
    const refused = await chat('lonely');
    expect(refused.status).toBe(503);
    const body = (await refused.json()) as ErrorBody;
    expect(body.error.verdict).toBe('REJECT_HEALTH');
    expect(body.error.reasons).toEqual(['MODEL_MISSING']);
    const skipped = await chat('lonely');
    expect(skipped.status).toBe(503);
    expect(((await skipped.json()) as ErrorBody).error.message).toMatch(/last load failed/);
    // Edited to a file that works: tried again.
    expect((await call(served, 'PUT', '/api/profiles/lonely', { modelPath: tiny })).status).toBe(200);
    expect((await state(served)).profileFailures.map((f) => f.profileId)).toEqual(['broken']);
    expect((await chat('lonely')).status).toBe(200);
    expect(served.log.join('\n')).not.toMatch(/\n\s+at |INTERNAL/);
    for (const e of (await state(served)).engines.filter((x) => x.state === 'running')) await call(served, 'POST', `/api/engines/${e.id}/stop`);
    for (const id of ['broken', 'works', 'lonely']) await call(served, 'DELETE', `/api/profiles/${id}`);
  }, 90_000);

  it('does not route to a command profile that declares no port: 503 at once, nothing started', async () => {
    const started = Date.now();
    const answers = await Promise.all([chat('x'), chat('x')]);
    expect(answers.map((a) => a.status)).toEqual([503, 503]);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(((await answers[0]!.json()) as ErrorBody).error.reasons).toEqual(['NO_HTTP_ENGINE']);
    expect((await state(served)).engines.filter((e) => e.profileId === 'sleeper')).toEqual([]);
    await call(served, 'DELETE', '/api/profiles/sleeper');
  });

  it('a client that leaves while its engine loads cancels the load, unless another request waits for it', async () => {
    // A llama-server stand-in that takes its time to load.
    const server = join(dir, 'llama-server');
    writeFileSync(server, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_LLAMA_SERVER}" "$@"\n`);
    chmodSync(server, 0o755);
    const slowPort = await freePort();
    expect((await call(served, 'POST', '/api/profiles', profile('slow', 'slow', tiny, { engineKind: 'llama-server', command: server, args: ['--port', String(slowPort), '--load-ms', '60000'] }))).status).toBe(201);
    const leaving = new AbortController();
    const alone = chat('slow', leaving.signal).catch(() => null);
    const loading = await until(async () => (await state(served)).engines.find((e) => e.profileId === 'slow' && e.state === 'loading'), 15_000, 'the slow engine loading');
    leaving.abort();
    await alone;
    await until(async () => ((await state(served)).engines.find((e) => e.id === loading.id)?.state === 'stopped' ? true : undefined), 10_000, 'the abandoned load to stop');

    const sharedPort = await freePort();
    expect((await call(served, 'POST', '/api/profiles', profile('shared', 'shared', tiny, { engineKind: 'llama-server', command: server, args: ['--port', String(sharedPort), '--load-ms', '3000'] }))).status).toBe(201);
    const first = new AbortController();
    const left = chat('shared', first.signal).catch(() => null);
    await until(async () => (await state(served)).engines.find((e) => e.profileId === 'shared' && e.state === 'loading'), 15_000, 'the shared engine loading');
    const stays = chat('shared');
    await new Promise((r) => setTimeout(r, 300));
    first.abort();
    await left;
    // The stand-in answers 401 without the secret the gateway adds: the request reached it and
    // got through its --api-key.
    const answer = await stays;
    expect(answer.status, await answer.clone().text()).toBe(200);
    expect(answer.headers.get('x-gpushare-engine')).toMatch(/^shared-/);
    const engines = (await state(served)).engines.filter((e) => e.profileId === 'shared');
    expect(engines.map((e) => e.state)).toEqual(['running']);
    for (const e of engines) await call(served, 'POST', `/api/engines/${e.id}/stop`);
  }, 60_000);
});

