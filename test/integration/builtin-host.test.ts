/** The built-in engine host as a real process on a tiny generated GGUF (CPU, one thread): the
 *  stdout protocol, the llama-server-compatible HTTP API (streamed for real), the registry peer it
 *  joins, SIGTERM, and exiting with its parent. Runs the compiled host (npm run build:ts). */
import { parseEngineCounters } from '../../electron/core/engines/engine-figures.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_SECRET_ENV } from '../../electron/core/engines/engine-secret.js';
import { parseHostLine, type HostEvent, type HostReadyEvent } from '../../electron/core/engines/host-protocol.js';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { procState } from '../fixtures/procs.js';
import { REPO_ROOT, cleanupAfterEach, runCli, uniqueKey } from './cli-process.js';

const HOST = join(REPO_ROOT, 'dist', 'electron', 'core', 'engines', 'builtin', 'engine-host.js');

cleanupAfterEach(); // removes the segment file of every uniqueKey after each test

let dir = '';
let modelPath = '';

beforeAll(() => {
  if (!existsSync(HOST)) throw new Error(`${HOST} is missing: run npm run build:ts first`);
  dir = mkdtempSync(join(tmpdir(), 'builtin-host-test-'));
  modelPath = join(dir, 'tiny-chat.gguf');
  writeGguf(modelPath, { ...TINY_GGUF_SPEC, type: 'q8_0' });
});

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

/** A process whose stdout carries host protocol lines. */
class HostProcess {
  readonly events: HostEvent[] = [];
  readonly other: string[] = [];
  readonly stderr: string[] = [];
  private partial = '';
  private readonly listeners = new Set<() => void>();
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(readonly child: ChildProcess) {
    children.add(child);
    child.stdout?.setEncoding('utf8');
    child.stderr?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      const parts = (this.partial + chunk).split('\n');
      this.partial = parts.pop() ?? '';
      for (const line of parts) {
        const event = parseHostLine(line);
        if (event === null) this.other.push(line);
        else this.events.push(event);
      }
      for (const listener of [...this.listeners]) listener();
    });
    child.stderr?.on('data', (chunk: string) => this.stderr.push(chunk));
    this.exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  }

  describe(): string {
    return `events:\n  ${this.events.map((e) => JSON.stringify(e)).join('\n  ')}\nother stdout: ${JSON.stringify(this.other)}\nstderr: ${this.stderr.join('')}`;
  }

  /** The first event (so far or later) that matches; rejects on timeout or exit. */
  waitFor<T extends HostEvent>(match: (event: HostEvent) => event is T, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = this.events.find(match);
        if (found === undefined) return false;
        done();
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no matching host event within ${timeoutMs} ms\n${this.describe()}`));
      }, timeoutMs);
      const onExit = (): void => {
        if (check()) return;
        done();
        reject(new Error(`host exited before the event\n${this.describe()}`));
      };
      const done = (): void => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        this.child.off('close', onExit);
      };
      const listener = (): void => void check();
      if (check()) return;
      this.listeners.add(listener);
      this.child.on('close', onExit);
    });
  }
}

const children = new Set<ChildProcess>();
const extraPids = new Set<number>();

afterEach(async () => {
  for (const pid of extraPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  extraPids.clear();
  const waits: Array<Promise<void>> = [];
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      waits.push(new Promise((resolve) => child.once('close', () => resolve())));
      child.kill('SIGKILL');
    }
  }
  children.clear();
  await Promise.all(waits);
});

const isReady = (event: HostEvent): event is HostReadyEvent => event.event === 'ready';

function hostArgs(gpuKey: string): string[] {
  return [HOST, '--model', modelPath, '--threads', '1', '--port', '0', '--gpu-key', gpuKey, '--weight', '2', '--name', 'tiny-chat', '--ctx', '256'];
}

interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Each data event of the response body with its arrival time (performance.now()). */
  pieces: Array<{ text: string; at: number }>;
  endAt: number;
}

function http(port: number, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: { ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers } }, (res) => {
      res.setEncoding('utf8');
      const pieces: Array<{ text: string; at: number }> = [];
      res.on('data', (text: string) => pieces.push({ text, at: performance.now() }));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: pieces.map((p) => p.text).join(''), pieces, endAt: performance.now() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const json = (result: HttpResult): unknown => JSON.parse(result.body);

async function peersOf(gpuKey: string): Promise<GpuPeersView> {
  const run = await runCli(['peers', '--gpu-key', gpuKey, '--json']);
  expect(run.code, run.stderr.join('\n')).toBe(0);
  return JSON.parse(run.stdout.join('\n')) as GpuPeersView;
}

interface ChatChunk {
  object: string;
  choices: Array<{ index: number; delta: { content?: string; role?: string }; finish_reason: string | null }>;
}

describe('builtin engine host', () => {
  it('loads with progress, serves the llama-server API (streamed), joins the registry and leaves on SIGTERM', async () => {
    const gpuKey = uniqueKey('bhost');
    const host = new HostProcess(spawn(process.execPath, hostArgs(gpuKey), { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] }));
    const ready = await host.waitFor(isReady, 20_000);

    // Progress: monotonic, ends at 100, and all of it before ready.
    const readyIndex = host.events.indexOf(ready);
    const progress = host.events.slice(0, readyIndex).flatMap((e) => (e.event === 'progress' ? [e.pct] : []));
    expect(progress.length, host.describe()).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < progress.length; i++) expect(progress[i] ?? 0).toBeGreaterThanOrEqual(progress[i - 1] ?? 0);
    expect(progress.at(-1)).toBe(100);
    expect(host.events.slice(readyIndex).some((e) => e.event === 'progress')).toBe(false);
    expect(ready.port).toBeGreaterThan(0);
    expect(ready.slot).not.toBeNull();
    expect(host.events.some((e) => e.event === 'fatal')).toBe(false);
    const port = ready.port;

    const health = await http(port, 'GET', '/health');
    expect(health.status).toBe(200);
    expect(json(health)).toEqual({ status: 'ok' });

    const models = await http(port, 'GET', '/v1/models');
    expect(models.status).toBe(200);
    expect(json(models)).toMatchObject({ object: 'list', data: [{ id: 'tiny-chat', object: 'model', owned_by: 'gpu-share' }] });

    // Streaming chat: SSE chunks written as tokens arrive, ending with [DONE].
    const secret = 'a very secret prompt that must never be logged';
    const stream = await http(port, 'POST', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: secret }], max_tokens: 96, temperature: 0, stream: true }));
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(stream.headers['cache-control']).toBe('no-cache');
    const events = stream.body.split('\n\n').filter((block) => block.trim() !== '');
    for (const block of events) expect(block.startsWith('data: ')).toBe(true);
    expect(events.at(-1)).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((block) => JSON.parse(block.slice('data: '.length)) as ChatChunk);
    for (const chunk of chunks) expect(chunk.object).toBe('chat.completion.chunk');
    const contentChunks = chunks.filter((chunk) => (chunk.choices[0]?.delta.content ?? '') !== '');
    expect(contentChunks.length).toBeGreaterThanOrEqual(2);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toMatch(/^(stop|length)$/);
    // Streamed, not buffered: the first content arrived in an earlier read than the end.
    const firstContent = stream.pieces.find((piece) => piece.text.includes('"content":"') && !piece.text.includes('"content":""}'));
    expect(firstContent).toBeDefined();
    expect(stream.pieces.length).toBeGreaterThanOrEqual(2);
    expect(firstContent?.at ?? Number.POSITIVE_INFINITY).toBeLessThan(stream.endAt);
    expect(stream.pieces.indexOf(firstContent ?? { text: '', at: 0 })).toBeLessThan(stream.pieces.length - 1);

    // Non-streaming completion: text, usage, finish reason.
    const completion = await http(port, 'POST', '/v1/completions', JSON.stringify({ prompt: 'the model', max_tokens: 8 }));
    expect(completion.status).toBe(200);
    const body = json(completion) as { object: string; choices: Array<{ text: string; finish_reason: string }>; usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } };
    expect(body.object).toBe('text_completion');
    expect(typeof body.choices[0]?.text).toBe('string');
    expect(body.choices[0]?.text.length).toBeGreaterThan(0);
    expect(body.choices[0]?.finish_reason).toMatch(/^(stop|length)$/);
    expect(body.usage.prompt_tokens).toBeGreaterThan(0);
    expect(body.usage.completion_tokens).toBeGreaterThan(0);
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(8);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);

    // The registry after a generation: our peer, weight 2; with nothing in flight or queued it is
    // known to be idle, and says so 150 ms after its last request (not opencoti's 2 s).
    const view = await peersOf(gpuKey);
    const peer = view.peers.find((p) => p.name === 'tiny-chat');
    expect(peer, JSON.stringify(view)).toBeDefined();
    expect(peer?.pid).toBe(host.child.pid);
    expect(peer?.weight).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await peersOf(gpuKey)).peers.find((p) => p.name === 'tiny-chat')?.active).toBe(false);

    // Bad requests and unknown paths: the error envelope.
    for (const [path, payload] of [
      ['/v1/chat/completions', '{not json'],
      ['/v1/chat/completions', JSON.stringify({ messages: 'hi' })],
      ['/v1/chat/completions', JSON.stringify({ max_tokens: 4 })],
      ['/v1/completions', JSON.stringify({ prompt: 42 })],
      ['/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 'many' })],
      ['/v1/completions', JSON.stringify({ prompt: 'x', stop: [1] })],
    ] as const) {
      const bad = await http(port, 'POST', path, payload);
      expect(bad.status, `${path} ${payload}`).toBe(400);
      expect(json(bad)).toMatchObject({ error: { code: 'invalid_request', message: expect.any(String) } });
    }
    const missing = await http(port, 'GET', '/v2/nothing');
    expect(missing.status).toBe(404);
    expect(json(missing)).toMatchObject({ error: { code: expect.any(String), message: expect.any(String) } });

    const metrics = await http(port, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    const metric = (name: string): number => Number(new RegExp(`^llamacpp:${name} (\\S+)$`, 'm').exec(metrics.body)?.[1] ?? Number.NaN);
    expect(metric('tokens_predicted_total')).toBeGreaterThan(0);
    expect(metric('prompt_tokens_total')).toBeGreaterThan(0);
    expect(metric('requests_processing')).toBe(0);
    expect(metric('requests_deferred')).toBe(0);
    // The time to first token, as a summary the dashboard reads: every answered request counted.
    const ttft = parseEngineCounters(metrics.body);
    expect(ttft.ttftCount).toBeGreaterThanOrEqual(1);
    expect(ttft.ttftSecondsSum).toBeGreaterThan(0);
    expect((ttft.ttftSecondsSum ?? 0) / (ttft.ttftCount ?? 1)).toBeLessThan(60);

    // Logs carry shapes, never the prompt.
    const logs = host.events.flatMap((e) => (e.event === 'log' ? [e.message] : []));
    expect(logs.some((line) => line.includes('chat.completions'))).toBe(true);
    expect(logs.join('\n')).not.toContain('secret');

    host.child.kill('SIGTERM');
    const exit = await Promise.race([host.exited, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no exit after SIGTERM\n${host.describe()}`)), 5_000))]);
    expect(exit).toEqual({ code: 0, signal: null });
    const after = await peersOf(gpuKey);
    expect(after.peers.find((p) => p.name === 'tiny-chat')).toBeUndefined();
  });

  it("answers llama-server's /completion (streamed and not), /props and /gpu/peers, behind the same door", async () => {
    const gpuKey = uniqueKey('bhllama');
    const secret = 'engine-secret-for-the-test';
    const host = new HostProcess(spawn(process.execPath, hostArgs(gpuKey), { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, [ENGINE_SECRET_ENV]: secret } }));
    const { port } = await host.waitFor(isReady, 20_000);
    const auth = { Authorization: `Bearer ${secret}` };

    // /props: what the engine knows, nothing it does not (no seed, top_k or top_p of its own).
    const props = await http(port, 'GET', '/props');
    expect(props.status).toBe(200);
    const propsBody = json(props) as {
      default_generation_settings: { n_ctx: number; is_processing: boolean; params: Record<string, unknown> };
      total_slots: number;
      model_path: string;
      opencoti: { gpu_share: { enabled: boolean; gpu_key: string; self: { pid: number } | null } };
    };
    expect(propsBody.default_generation_settings.n_ctx).toBe(256);
    expect(propsBody.default_generation_settings.is_processing).toBe(false);
    expect(propsBody.default_generation_settings.params).toEqual({ n_predict: -1, temperature: 0.8, stop: [] });
    expect(propsBody.total_slots).toBe(1);
    expect(propsBody.model_path).toBe(modelPath);
    expect(propsBody.opencoti.gpu_share).toMatchObject({ enabled: true, gpu_key: gpuKey, self: { pid: host.child.pid } });

    // /gpu/peers: serve's shape, with this engine as self.
    const peers = await http(port, 'GET', '/gpu/peers');
    expect(peers.status).toBe(200);
    const view = json(peers) as GpuPeersView;
    expect(view.gpu_key).toBe(gpuKey);
    expect(view.self).toMatchObject({ pid: host.child.pid, name: 'tiny-chat', weight: 2 });
    expect(Object.keys(view.self ?? {}).sort()).toEqual(['active', 'busy_pct', 'name', 'pid', 'share_pct', 'weight']);
    expect(view.peers).toEqual([]);
    const observed = (await peersOf(gpuKey)).peers.find((p) => p.pid === host.child.pid);
    expect(observed).toMatchObject({ name: view.self?.name, weight: view.self?.weight });

    // /completion, not streamed.
    const whole = await http(port, 'POST', '/completion', JSON.stringify({ prompt: 'the model', n_predict: 8, temperature: 0 }), auth);
    expect(whole.status, whole.body).toBe(200);
    const body = json(whole) as {
      content: string;
      stop: boolean;
      tokens_predicted: number;
      tokens_evaluated: number;
      stop_type: string;
      stopping_word: string;
      generation_settings: { n_ctx: number; n_predict: number; temperature: number };
      timings: { predicted_n: number; prompt_n: number };
    };
    expect(typeof body.content).toBe('string');
    expect(body.stop).toBe(true);
    expect(body.tokens_predicted).toBeGreaterThan(0);
    expect(body.tokens_predicted).toBeLessThanOrEqual(8);
    expect(body.tokens_evaluated).toBeGreaterThan(0);
    expect(body.stop_type).toMatch(/^(eos|limit)$/);
    expect(body.stopping_word).toBe('');
    expect(body.generation_settings).toMatchObject({ n_ctx: 256, n_predict: 8, temperature: 0 });
    expect(body.timings.predicted_n).toBe(body.tokens_predicted);

    // /completion, streamed: content events with "stop":false, then one with "stop":true; no [DONE].
    const stream = await http(port, 'POST', '/completion', JSON.stringify({ prompt: 'the model', n_predict: 24, temperature: 0, stream: true }), auth);
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    const events = stream.body.split('\n\n').filter((block) => block.trim() !== '');
    for (const block of events) expect(block.startsWith('data: ')).toBe(true);
    const parsed = events.map((block) => JSON.parse(block.slice('data: '.length)) as { content: string; stop: boolean; stop_type?: string; tokens_predicted?: number; tokens_evaluated?: number });
    const last = parsed.at(-1);
    expect(last?.stop).toBe(true);
    expect(last?.stop_type).toMatch(/^(eos|limit)$/);
    const pieces = parsed.slice(0, -1);
    expect(pieces.length).toBeGreaterThanOrEqual(2);
    for (const piece of pieces) expect(piece).toMatchObject({ content: expect.any(String), stop: false });
    expect(pieces.map((piece) => piece.content).join('').length).toBeGreaterThan(0);
    expect(last?.tokens_predicted).toBeGreaterThan(0);
    // Each piece carries the running counts, as llama-server's do (clients count tokens by them).
    const counts = pieces.map((piece) => piece.tokens_predicted ?? -1);
    expect(counts[0]).toBeGreaterThanOrEqual(1);
    for (let i = 1; i < counts.length; i++) expect(counts[i]).toBeGreaterThanOrEqual(counts[i - 1] ?? 0);
    expect(counts.at(-1)).toBeLessThanOrEqual(last?.tokens_predicted ?? 0);
    for (const piece of pieces) expect(piece.tokens_evaluated).toBe(last?.tokens_evaluated);
    expect(stream.pieces.length).toBeGreaterThanOrEqual(2);

    // Bad bodies: 400 naming the field.
    for (const [payload, param] of [
      [{ prompt: 42 }, 'prompt'],
      [{ prompt: 'x', n_predict: 'many' }, 'n_predict'],
      [{ prompt: 'x', temperature: -1 }, 'temperature'],
      [{ prompt: 'x', grammar: 'root ::= "a"' }, 'grammar'],
    ] as const) {
      const bad = await http(port, 'POST', '/completion', JSON.stringify(payload), auth);
      expect(bad.status, JSON.stringify(payload)).toBe(400);
      expect(json(bad)).toMatchObject({ error: { code: 'invalid_request', param, message: expect.stringContaining(param) } });
    }

    // The door: no secret, a wrong one, another content type, another Host.
    const noSecret = await http(port, 'POST', '/completion', JSON.stringify({ prompt: 'x', n_predict: 1 }));
    expect(noSecret.status).toBe(401);
    expect(noSecret.headers['www-authenticate']).toBe('Bearer');
    expect((await http(port, 'POST', '/completion', JSON.stringify({ prompt: 'x', n_predict: 1 }), { Authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await http(port, 'POST', '/completion', JSON.stringify({ prompt: 'x', n_predict: 1 }), { ...auth, 'Content-Type': 'text/plain' })).status).toBe(415);
    for (const path of ['/props', '/gpu/peers']) expect((await http(port, 'GET', path, undefined, { Host: 'attacker.example' })).status, path).toBe(403);
    expect((await http(port, 'POST', '/props', '{}', auth)).status).toBe(405);
  });

  it('without a registry: /gpu/peers is 404 and /props says gpu_share is not enabled, and why', async () => {
    const args = hostArgs('unused');
    const host = new HostProcess(spawn(process.execPath, args.slice(0, args.indexOf('--gpu-key')).concat(['--ctx', '256']), { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] }));
    const { port, slot } = await host.waitFor(isReady, 20_000);
    expect(slot).toBeNull();
    const peers = await http(port, 'GET', '/gpu/peers');
    expect(peers.status).toBe(404);
    expect(json(peers)).toMatchObject({ error: { code: 'not_found', message: expect.stringContaining('registry') } });
    const props = json(await http(port, 'GET', '/props')) as Record<string, unknown>;
    expect(props['opencoti']).toEqual({ gpu_share: { enabled: false, gpu_key: '', self: null, peers: [], reason: expect.stringContaining('without a GPU registry') as unknown } });
    expect(props['total_slots']).toBe(1);
  });

  it('exits within 2 s when its parent dies', async () => {
    const gpuKey = uniqueKey('bhorph');
    // An intermediate parent that starts the host (stdin ignored: only the ppid watch can notice)
    // and then is killed with SIGKILL. The host inherits our pipe as stdout.
    const script = [
      "const { spawn } = require('node:child_process');",
      "const child = spawn(process.execPath, JSON.parse(process.argv[1]), { stdio: ['ignore', 'inherit', 'inherit'] });",
      "process.stderr.write('CHILD ' + child.pid + '\\n');",
      'setInterval(() => {}, 1 << 30);',
    ].join('\n');
    const parent = new HostProcess(spawn(process.execPath, ['-e', script, JSON.stringify(hostArgs(gpuKey))], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] }));
    await parent.waitFor(isReady, 20_000);
    const childPid = Number(/CHILD (\d+)/.exec(parent.stderr.join(''))?.[1]);
    expect(Number.isInteger(childPid) && childPid > 0, parent.describe()).toBe(true);
    extraPids.add(childPid);
    expect((await peersOf(gpuKey)).peers.some((p) => p.pid === childPid)).toBe(true);

    const killedAt = performance.now();
    parent.child.kill('SIGKILL');
    const gone = (): boolean => {
      const state = procState(childPid);
      return state === null || state === 'Z';
    };
    while (!gone() && performance.now() - killedAt < 4_000) await new Promise((resolve) => setTimeout(resolve, 20));
    const tookMs = performance.now() - killedAt;
    expect(gone(), parent.describe()).toBe(true);
    expect(tookMs).toBeLessThan(2_000);
    expect((await peersOf(gpuKey)).peers.some((p) => p.pid === childPid)).toBe(false);
  });

  it('rejects bad flags with exit 2 and one line naming the flag', async () => {
    for (const [args, flag] of [
      [['--bogus'], '--bogus'],
      [['--ctx', '256'], '--model'],
      [['--model', 'x.gguf'], '--ctx'],
      [['--model', 'x.gguf', '--ctx', 'lots'], '--ctx'],
      [['--model', 'x.gguf', '--ctx', '256', '--port', '70000'], '--port'],
      [['--model', 'x.gguf', '--ctx', '256', '--gpu-key', 'bad/key'], '--gpu-key'],
      [['--model', 'x.gguf', '--ctx', '256', '--gpu-key', 'k', '--weight', '-1'], '--weight'],
    ] as const) {
      const proc = new HostProcess(spawn(process.execPath, [HOST, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] }));
      const exit = await proc.exited;
      expect(exit.code, args.join(' ')).toBe(2);
      const lines = proc.stderr.join('').trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(flag);
      expect(proc.events).toEqual([]);
    }
  });

  it('parses host protocol lines and never throws on junk', () => {
    expect(parseHostLine('{"event":"progress","pct":42}')).toEqual({ event: 'progress', pct: 42 });
    expect(parseHostLine('{"event":"ready","port":8080,"slot":null}')).toEqual({ event: 'ready', port: 8080, slot: null });
    expect(parseHostLine(' {"event":"ready","port":8080,"slot":3} ')).toEqual({ event: 'ready', port: 8080, slot: 3 });
    expect(parseHostLine('{"event":"log","level":"warn","message":"m"}')).toEqual({ event: 'log', level: 'warn', message: 'm' });
    expect(parseHostLine('{"event":"fatal","message":"boom"}')).toEqual({ event: 'fatal', message: 'boom' });
    for (const junk of [
      '',
      'llama.cpp says hi',
      '{',
      '[]',
      'null',
      '{"event":"progress","pct":101}',
      '{"event":"progress","pct":"5"}',
      '{"event":"ready","port":0,"slot":null}',
      '{"event":"ready","port":80}',
      '{"event":"ready","port":80,"slot":16}',
      '{"event":"log","level":"debug","message":"m"}',
      '{"event":"fatal"}',
      '{"event":"other"}',
      `{"event":"log","level":"info","message":"${'x'.repeat(70_000)}"}`,
      '\u0000\uFFFD{}',
    ]) {
      expect(parseHostLine(junk), junk.slice(0, 60)).toBeNull();
    }
  });
});
