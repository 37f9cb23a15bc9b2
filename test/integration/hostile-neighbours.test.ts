/**
 * Hostile neighbours against real processes: a data folder with a FIFO or a directory where a
 * file should be, another user's folder, a second server on one folder, a token rotated under an
 * open event stream, more streams than the cap, deeply nested JSON on serve's port and on a
 * built-in engine's port, and the engine port's request timeouts.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADERS_TIMEOUT_MS, IDLE_TIMEOUT_MS, JSON_DEPTH_LIMIT, REQUEST_TIMEOUT_MS } from '../../electron/core/api/http.js';
import { MAX_EVENT_STREAMS } from '../../electron/core/api/server.js';
import { ENGINE_SECRET_ENV } from '../../electron/core/engines/engine-secret.js';
import { parseHostLine, type HostReadyEvent } from '../../electron/core/engines/host-protocol.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { BUILTIN_HOST, CLI, ROOT } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, rawRequest, startServe, type Served } from '../fixtures/serve.js';

const KEY = `GPU-hostile-${process.pid}`;
const ENGINE_KEY = `GPU-hostile-engine-${process.pid}`;
const isRoot = process.getuid?.() === 0;
const TOKEN_A = 'dashboard-token-before-rotation-0123456789ab';
const TOKEN_B = 'dashboard-token-after-rotation-0123456789abc';
let dir = '';
let sim = '';
let tiny = '';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-hostile-'));
  sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' }] }));
  tiny = join(dir, 'tiny.gguf');
  writeGguf(tiny, TINY_GGUF_SPEC);
});

afterAll(() => {
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
});

/** `gpu-share ARGS`, killed after `limitMs` (a FIFO used to hang serve for good). */
function runCli(args: string[], limitMs = 15_000): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

const settingsWith = (token: string): string => `${JSON.stringify({ version: 1, apiPort: 7787, apiToken: token, gatewayTokens: [], launchAtLogin: false, labPaused: false, draining: false, idleUnloadMinutes: null })}\n`;

describe('serve on a hostile data folder', () => {
  it('a FIFO at settings.json, profiles.json or envelopes.json: one line naming it, exit 1, never waited on', async () => {
    for (const name of ['settings.json', 'profiles.json', 'envelopes.json']) {
      const data = join(dir, `fifo-${name}`);
      mkdirSync(data, { mode: 0o700 });
      execFileSync('mkfifo', [join(data, name)]);
      const run = await runCli(['serve', '--port', '0', '--data-dir', data, '--sim', sim]);
      expect(run.code, `${name}: ${run.stderr}`).toBe(1);
      expect(run.ms, name).toBeLessThan(10_000);
      expect(run.stderr, name).toContain(`${join(data, name)}: is a FIFO, not a regular file`);
      expect(run.stderr, name).not.toMatch(/\n\s+at /);
    }
  }, 60_000);

  it('a directory at settings.json: one line, no stack trace', async () => {
    const data = join(dir, 'dir-settings');
    mkdirSync(join(data, 'settings.json'), { recursive: true, mode: 0o700 });
    chmodSync(data, 0o700);
    const run = await runCli(['serve', '--port', '0', '--data-dir', data, '--sim', sim]);
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([`gpu-share: settings file ${join(data, 'settings.json')}: is a directory, not a regular file: refused (not read, not followed); remove it`]);
  }, 30_000);

  it.skipIf(!isRoot)("another user's data folder (chown 65534) is refused before its token is read", async () => {
    const data = join(dir, 'theirs');
    mkdirSync(data, { mode: 0o700 });
    writeFileSync(join(data, 'settings.json'), settingsWith(TOKEN_A));
    chownSync(join(data, 'settings.json'), 65534, 65534);
    chownSync(data, 65534, 65534);
    const run = await runCli(['serve', '--port', '0', '--data-dir', data, '--sim', sim]);
    expect(run.code).toBe(1);
    expect(run.stdout).not.toContain(TOKEN_A);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toContain(`data folder ${data}: belongs to user 65534, not to this user`);
  }, 30_000);

  it('a data folder others can write is made private with one line', async () => {
    const data = join(dir, 'open');
    mkdirSync(data);
    chmodSync(data, 0o777);
    const served = await startServe({ dataDir: data, sim });
    try {
      expect(statSync(data).mode & 0o777).toBe(0o700);
      expect(served.log).toContain(`data: folder ${data} was open to other users (mode 777); made it this user's only (0700)`);
    } finally {
      await served.stop();
    }
  }, 30_000);

  it('a second serve on the same folder refuses with one line naming the first; gpu-share engines still works', async () => {
    const data = join(dir, 'shared');
    const first = await startServe({ dataDir: data, sim });
    try {
      const second = await runCli(['serve', '--port', '0', '--data-dir', data, '--sim', sim]);
      expect(second.code).toBe(1);
      const lines = second.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^gpu-share: data folder ${data} is in use by serve \\(pid ${first.child.pid} on .+, started .+\\): one server per data folder`));
      const engines = await runCli(['engines', '--data-dir', data]);
      expect(engines.code).toBe(0);
      expect((await call(first, 'GET', '/api/state')).status).toBe(200);
    } finally {
      await first.stop();
    }
    // Released at exit: the next one starts.
    const third = await startServe({ dataDir: data, sim });
    await third.stop();
  }, 60_000);
});

describe('serve: streams and bodies', () => {
  let served: Served;
  let data = '';
  beforeAll(async () => {
    data = join(dir, 'streams');
    mkdirSync(data, { mode: 0o700 });
    writeFileSync(join(data, 'settings.json'), settingsWith(TOKEN_A), { mode: 0o600 });
    served = await startServe({ dataDir: data, sim });
  }, 30_000);
  afterAll(async () => {
    await served?.stop();
  });

  it('rotating the token ends an event stream opened with the old one within 1 s, and it never carries the new token', async () => {
    const stream = await new Promise<{ received: () => string; ended: Promise<number> }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: served.port, path: '/api/events', headers: { authorization: `Bearer ${TOKEN_A}` } }, (res) => {
        expect(res.statusCode).toBe(200);
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        const ended = new Promise<number>((done) => {
          res.on('close', () => done(Date.now()));
          res.on('error', () => done(Date.now()));
        });
        resolve({ received: () => text, ended });
      });
      req.on('error', reject);
      req.end();
    });
    await new Promise((r) => setTimeout(r, 500));
    const before = stream.received().length;
    expect(before).toBeGreaterThan(0);
    const file = join(data, 'settings.json');
    writeFileSync(`${file}.new`, settingsWith(TOKEN_B), { mode: 0o600 });
    const rotatedAt = Date.now();
    renameSync(`${file}.new`, file);
    served.token = TOKEN_B;
    const endedAt = await Promise.race([stream.ended, new Promise<number>((r) => setTimeout(() => r(-1), 5_000))]);
    expect(endedAt, 'the stream still runs 5 s after the rotation').toBeGreaterThan(0);
    // Within 1 s by design (a check every 250 ms); the margin is for a loaded machine.
    expect(endedAt - rotatedAt).toBeLessThan(2_000);
    expect(stream.received().slice(before)).not.toContain(TOKEN_B);
    expect((await call(served, 'GET', '/api/state', undefined, TOKEN_A)).status).toBe(401);
    expect((await call(served, 'GET', '/api/state', undefined, TOKEN_B)).status).toBe(200);
  }, 30_000);

  it(`at most ${MAX_EVENT_STREAMS} event streams: the next is a 429 naming the limit`, async () => {
    const controllers: AbortController[] = [];
    try {
      for (let i = 0; i < MAX_EVENT_STREAMS; i++) {
        const controller = new AbortController();
        controllers.push(controller);
        const response = await fetch(`${served.base}/api/events`, { headers: { authorization: `Bearer ${served.token}` }, signal: controller.signal });
        expect(response.status).toBe(200);
      }
      const over = await call<{ error: { code: string; message: string } }>(served, 'GET', '/api/events');
      expect(over.status).toBe(429);
      expect(over.body.error.message).toContain(`${MAX_EVENT_STREAMS} are open, the limit`);
      // The rest of the API answers all the same.
      expect((await call(served, 'GET', '/props', undefined, null)).status).toBe(200);
    } finally {
      for (const c of controllers) c.abort();
    }
  }, 30_000);

  it('deeply nested JSON is a 400 naming the limit, on the control API and the gateway', async () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    for (const path of ['/api/plan', '/api/profiles', '/v1/chat/completions']) {
      const answer = await call<{ error: { message: string } }>(served, 'POST', path, deep);
      expect(answer.status, path).toBe(400);
      expect(answer.body.error.message, path).toContain(`nested deeper than ${JSON_DEPTH_LIMIT} levels`);
    }
    const fine = await call(served, 'POST', '/api/plan', `{"profileId":"none","x":${'['.repeat(10)}${']'.repeat(10)}}`);
    expect(fine.status).not.toBe(500);
  }, 30_000);
});

describe("a built-in engine's own port", () => {
  const secret = 'engine-secret-for-the-hostile-test';
  let child: ReturnType<typeof spawn> | null = null;
  let port = 0;
  beforeAll(async () => {
    child = spawn(process.execPath, [BUILTIN_HOST, '--model', tiny, '--name', 'hostile', '--port', '0', '--threads', '1', '--ctx', '256', '--gpu-key', ENGINE_KEY], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, [ENGINE_SECRET_ENV]: secret } });
    port = await new Promise<number>((resolve, reject) => {
      let partial = '';
      const timer = setTimeout(() => reject(new Error('the engine was not ready in 30 s')), 30_000);
      child?.stdout?.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          const event = parseHostLine(line);
          if (event?.event === 'ready') {
            clearTimeout(timer);
            resolve((event as HostReadyEvent).port);
          }
        }
      });
    });
  }, 40_000);
  afterAll(() => {
    child?.kill('SIGKILL');
    removeSegment(ENGINE_KEY);
  });

  it('deeply nested JSON is a 400 naming the limit', async () => {
    const deep = `{"prompt":"x","n_predict":1,"x":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    for (const path of ['/completion', '/v1/chat/completions']) {
      const answer = await rawRequest(port, { method: 'POST', path, headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` }, body: deep });
      expect(answer.status, `${path}: ${answer.text}`).toBe(400);
      expect(answer.text).toContain(`nested deeper than ${JSON_DEPTH_LIMIT} levels`);
    }
  }, 30_000);

  it("cuts off slow headers, a slow body without a token and an idle connection, as serve's port does", async () => {
    const watch = (first: string, drip: string | null): Promise<number> =>
      new Promise((resolve) => {
        const socket = connect(port, '127.0.0.1');
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
    const host = `Host: 127.0.0.1:${port}\r\n`;
    const [headers, body, idle] = await Promise.all([
      watch(`GET /health HTTP/1.1\r\n${host}`, 'X-Slow: 1\r\n'),
      watch(`POST /completion HTTP/1.1\r\n${host}Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n`, 'x'),
      watch('', null),
    ]);
    expect(headers, 'slow headers closed by the headers timeout').toBeLessThan(HEADERS_TIMEOUT_MS + 8_000);
    expect(body, 'a slow body closed by the request timeout').toBeLessThan(REQUEST_TIMEOUT_MS + 10_000);
    expect(idle, 'a connection that sends nothing closed').toBeLessThan(IDLE_TIMEOUT_MS + 8_000);
  }, 70_000);
});
