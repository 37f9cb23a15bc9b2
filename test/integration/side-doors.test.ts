/**
 * The doors around the gateway and the state `serve` keeps on disk, against real `serve`
 * processes: an engine's own port refuses requests that skip the gateway, slow or oversized bodies
 * do not hold connections, a token deleted from settings.json stops working at once and is never
 * written back, the dashboard token cannot smuggle code into the built-in engine, and the data
 * folder survives corrupt files, crashes' leftovers and a busy port.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { spawn } from 'node:child_process';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppState, LaunchOutcome } from '../../electron/core/contract.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { HEADERS_TIMEOUT_MS, IDLE_TIMEOUT_MS, REQUEST_TIMEOUT_MS, TOKEN_CHECK_INTERVAL_MS } from '../../electron/core/api/server.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { CLI } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, rawRequest, startServe, state, until, type Served } from '../fixtures/serve.js';

const KEY = `GPU-doors-${process.pid}`;
const GATEWAY_TOKEN = 'gateway-token-to-revoke-0123456789abcdefghij';
let dir = '';
let tiny = '';
let sim = '';
let dataDir = '';
let served: Served;

type ErrorBody = { error: { code: string; message: string; field?: string } };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-doors-'));
  tiny = join(dir, 'tiny.gguf');
  writeGguf(tiny, TINY_GGUF_SPEC);
  sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' }] }));
  dataDir = join(dir, 'data');
  mkdirSync(dataDir);
  const settings = { version: 1, apiPort: 7787, apiToken: 'dashboard-token-doors-0123456789abcdefghijkl', gatewayTokens: [{ token: GATEWAY_TOKEN, priority: 'background', label: 'revoke me' }], launchAtLogin: false, labPaused: false, draining: false, idleUnloadMinutes: null };
  writeFileSync(join(dataDir, 'settings.json'), JSON.stringify(settings));
  chmodSync(join(dataDir, 'settings.json'), 0o644);
  // What earlier crashes left: conf's and the envelopes' temporary files, one holding a token.
  writeFileSync(join(dataDir, 'settings.json.tmp-1796400000abc123'), JSON.stringify(settings));
  writeFileSync(join(dataDir, 'envelopes.json.4242.tmp'), '{}');
  // Command profiles are the local user's to make (never over HTTP): written before serve starts.
  served = await startServe({ dataDir, sim, profiles: (['finishes', 'fails'] as const).map((id) => ({ id, name: id, capabilities: [id], engineKind: 'command', command: id === 'finishes' ? '/bin/true' : '/bin/false', contextSize: 256, priority: 'lab' })) });
}, 30_000);

afterAll(async () => {
  await served?.stop();
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
});

describe("an engine's own port", () => {
  it('refuses another Host, a body that is not JSON, and a request without its secret; the gateway gets through', async () => {
    expect((await call(served, 'POST', '/api/profiles', { id: 'door', name: 'door', capabilities: ['door'], engineKind: 'builtin', modelPath: tiny, contextSize: 256, threads: 1, priority: 'interactive' })).status).toBe(201);
    const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: 'door' });
    expect(launched.status).toBe(202);
    const engine = await until(async () => (await state(served)).engines.find((e) => e.profileId === 'door' && e.state === 'running'), 30_000, 'the engine running');
    const port = engine.port ?? 0;
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    const rebinding = await rawRequest(port, { method: 'POST', path: '/v1/chat/completions', host: 'attacker.example', headers: { 'content-type': 'text/plain' }, body });
    expect(rebinding.status).toBe(403);
    const simplePost = await rawRequest(port, { method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'text/plain' }, body });
    expect(simplePost.status).toBe(415);
    const noSecret = await rawRequest(port, { method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body });
    expect(noSecret.status).toBe(401);
    expect((await rawRequest(port, { path: '/health' })).status).toBe(200);
    const through = await call(served, 'POST', '/v1/chat/completions', { model: 'door', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    expect(through.status).toBe(200);
    await call(served, 'POST', `/api/engines/${engine.id}/stop`);
  }, 60_000);

  it('a built-in profile may not set NODE_OPTIONS, LD_PRELOAD, LD_AUDIT or DYLD_* in its environment', async () => {
    for (const name of ['NODE_OPTIONS', 'LD_PRELOAD', 'LD_AUDIT', 'DYLD_INSERT_LIBRARIES']) {
      const added = await call<ErrorBody>(served, 'POST', '/api/profiles', { name: 'sneaky', capabilities: ['sneaky'], engineKind: 'builtin', modelPath: tiny, contextSize: 256, priority: 'lab', env: { [name]: '--require /tmp/x.cjs' } });
      expect(added.status, name).toBe(400);
      expect(added.body.error.field).toBe('env');
      expect(added.body.error.message).toContain(name);
    }
    const edited = await call<ErrorBody>(served, 'PUT', '/api/profiles/door', { env: { NODE_OPTIONS: '--require /tmp/x.cjs' } });
    expect(edited.status).toBe(400);
    expect((await call(served, 'PUT', '/api/profiles/door', { env: { MY_SETTING: '1' } })).status).toBe(200);
  });
});

describe('serve', () => {
  it('closes a refused request that declares a body over the limit instead of draining it', async () => {
    const socket = connect(served.port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('utf8')));
    socket.on('error', () => undefined);
    const started = Date.now();
    socket.write(`POST /api/profiles HTTP/1.1\r\nHost: 127.0.0.1:${served.port}\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n`);
    // A byte now and then, as a slow client would.
    const drip = setInterval(() => socket.writable && socket.write('x'), 200);
    const at = await Promise.race([closed, new Promise<number>((resolve) => setTimeout(() => resolve(-1), 5_000))]);
    clearInterval(drip);
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 401/);
    expect(at, 'the connection is still open after 5 s').toBeGreaterThan(0);
    expect(at - started).toBeLessThan(3_000);
    expect((await call(served, 'GET', '/api/state')).status).toBe(200);
  });

  it('cuts off slow headers, a slow body under the limit and an idle connection', async () => {
    const watch = (first: string, drip: string | null): Promise<number> =>
      new Promise((resolve) => {
        const socket = connect(served.port, '127.0.0.1');
        const started = Date.now();
        let timer: NodeJS.Timeout | undefined;
        const giveUp = setTimeout(() => socket.destroy(), 60_000);
        socket.on('error', () => undefined);
        socket.once('close', () => {
          clearInterval(timer);
          clearTimeout(giveUp);
          resolve(Date.now() - started);
        });
        socket.once('connect', () => {
          socket.write(first);
          if (drip !== null) timer = setInterval(() => socket.writable && socket.write(drip), 2_000);
        });
      });
    const host = `Host: 127.0.0.1:${served.port}\r\n`;
    const [headers, body, idle] = await Promise.all([
      // Headers that never end, a line every 2 s.
      watch(`GET /api/state HTTP/1.1\r\n${host}`, 'X-Slow: 1\r\n'),
      // An unauthenticated body under the 1 MiB limit, a byte every 2 s.
      watch(`POST /api/state HTTP/1.1\r\n${host}Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n`, 'x'),
      // A connection that sends nothing at all.
      watch('', null),
    ]);
    expect(headers, 'slow headers closed by the headers timeout').toBeLessThan(HEADERS_TIMEOUT_MS + 8_000);
    expect(body, 'a slow body closed by the request timeout').toBeLessThan(REQUEST_TIMEOUT_MS + 10_000);
    expect(idle, 'a connection that sends nothing closed').toBeLessThan(IDLE_TIMEOUT_MS + 8_000);
    expect((await call(served, 'GET', '/api/state')).status).toBe(200);
  }, 70_000);

  it('takes the bearer scheme in any case', async () => {
    const lower = await fetch(`${served.base}/api/state`, { headers: { authorization: `bearer ${served.token}` } });
    expect(lower.status).toBe(200);
    const upper = await fetch(`${served.base}/v1/models`, { headers: { authorization: `BEARER ${GATEWAY_TOKEN}` } });
    expect(upper.status).toBe(200);
  });

  it('a gateway token deleted from settings.json stops working within 1 s and is never written back', async () => {
    const file = join(dataDir, 'settings.json');
    const models = (): Promise<Response> => fetch(`${served.base}/v1/models`, { headers: { authorization: `Bearer ${GATEWAY_TOKEN}` } });
    expect((await models()).status).toBe(200);
    // One keep-alive connection, its last request under the token, idle when the token goes.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const onConnection = async (method: string, path: string, token: string, body?: string): Promise<{ status: number; localPort: number }> => {
      const { status, localPort } = await rawRequest(served.port, { method, path, agent, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { body }) });
      return { status, localPort };
    };
    const underToken = await onConnection('GET', '/v1/models', GATEWAY_TOKEN);
    expect(underToken.status).toBe(200);
    const settings = JSON.parse(readFileSync(file, 'utf8')) as { gatewayTokens: unknown[] };
    settings.gatewayTokens = [];
    writeFileSync(file, JSON.stringify(settings));
    const revoked = Date.now();
    await until(async () => ((await models()).status === 401 ? true : undefined), 1_000, 'the deleted token refused', 50);
    expect(Date.now() - revoked).toBeLessThan(1_000);
    // The idle connection was only forgotten, not closed under its client: a request under another
    // token goes through on it after several checks of the tokens.
    await new Promise((resolve) => setTimeout(resolve, 3 * TOKEN_CHECK_INTERVAL_MS));
    const afterwards = await onConnection('PUT', '/api/policy', served.token, JSON.stringify({ labPaused: false }));
    expect(afterwards).toEqual({ status: 200, localPort: underToken.localPort });
    agent.destroy();
    expect((await call(served, 'PUT', '/api/policy', { labPaused: false })).status).toBe(200);
    expect(readFileSync(file, 'utf8')).not.toContain(GATEWAY_TOKEN);
    expect((await models()).status).toBe(401);
  });
});

describe('engines that end by themselves', () => {
  it('one that exits 0 has "exited", one that exits 1 "crashed"', async () => {
    for (const [id, expected] of [['finishes', 'exited'], ['fails', 'crashed']] as const) {
      const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: id });
      const engineId = launched.body.engine?.id ?? '';
      const ended = await until(async () => (await state(served)).engines.find((e) => e.id === engineId && e.state !== 'loading' && e.state !== 'running'), 15_000, `${id} to end`);
      expect(ended.state, id).toBe(expected);
      expect(ended.exitCode).toBe(expected === 'exited' ? 0 : 1);
    }
  }, 40_000);
});

describe('the data folder', () => {
  it('at start: crash leftovers removed, data files owner-only', () => {
    const names = readdirSync(dataDir);
    expect(names.filter((n) => n.includes('.tmp'))).toEqual([]);
    expect(statSync(join(dataDir, 'settings.json')).mode & 0o777).toBe(0o600);
  });

  it('a corrupt or empty settings.json is set aside, the defaults used, and the dashboard told', async () => {
    for (const content of ['{"version": 1, "apiPort": ', '']) {
      const data = join(dir, `corrupt-${content.length}`);
      mkdirSync(data);
      writeFileSync(join(data, 'settings.json'), content);
      const other = await startServe({ dataDir: data, sim });
      try {
        const kept = readdirSync(data).filter((n) => n.startsWith('settings.json.bad-'));
        expect(kept.length).toBe(1);
        expect(readFileSync(join(data, kept[0] ?? ''), 'utf8')).toBe(content);
        const snapshot = (await call<AppState>(other, 'GET', '/api/state')).body;
        expect(snapshot.dataProblems.join('\n')).toContain('settings.json.bad-');
      } finally {
        await other.stop();
      }
    }
  }, 60_000);

  it('serve on a busy port prints one line suggesting --port 0 and leaves nothing behind', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    const data = join(dir, 'busy');
    try {
      const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [CLI, 'serve', '--port', String(port), '--data-dir', data, '--sim', sim], { stdio: ['ignore', 'pipe', 'pipe'] });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
        child.on('close', (code) => resolve({ code, stderr }));
      });
      expect(run.code).toBe(1);
      const lines = run.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/in use.*--port 0/);
      expect(existsSync(data)).toBe(false);
    } finally {
      blocker.close();
    }
  }, 30_000);
});
