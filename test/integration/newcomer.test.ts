/**
 * A newcomer with an empty HOME and the README's "First steps" only: the command on PATH as
 * `npm install -g .` puts it there (a link into the clone: that is all it does for a folder, so the
 * test makes the same two links rather than running npm on the shared node_modules), two tiny
 * models from `npm run make-model`, `gpu-share serve`, both models added through the API with the
 * same capability, each answering by its own id through the `openai` client (list, chat, stream),
 * and a `gpu-share launch`ed engine answering a plain request on the URL it prints.
 *
 * The one departure from the README: `serve` and `launch` get `--sim` (a simulated device with a
 * key of this test's own), so that the engines do not join the real host CPU's registry, which
 * other tests on this machine may be using at the same time.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { createInterface } from 'node:readline';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GiB } from '../../electron/core/planner/policy.js';
import { exitOf, ROOT } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';

const KEY = `GPU-newcomer-${process.pid}`;
let dir = '';
let home = '';
let env: NodeJS.ProcessEnv = {};
let sim = '';
const children: ChildProcess[] = [];
let dashboard: { base: string; token: string } | null = null;

/** A command as the user types it (found on PATH), in their home. */
function start(args: string[]): { child: ChildProcess; lines: (pattern: RegExp) => Promise<RegExpExecArray>; stderr: string[] } {
  const child = spawn('gpu-share', args, { cwd: home, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const stderr: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const stdout = createInterface({ input: child.stdout! });
  const lines = (pattern: RegExp): Promise<RegExpExecArray> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} in 60 s:\n${stderr.join('\n')}`)), 60_000);
      stdout.on('line', (line) => {
        const found = pattern.exec(line);
        if (found !== null) {
          clearTimeout(timer);
          resolve(found);
        }
      });
      child.once('exit', (code) => reject(new Error(`gpu-share ${args[0]} exited with ${String(code)}:\n${stderr.join('\n')}`)));
    });
  return { child, lines, stderr };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-newcomer-'));
  home = join(dir, 'home');
  mkdirSync(home);
  // `npm install -g .` in the clone: two links under npm's global prefix.
  const prefix = join(dir, 'npm-global');
  mkdirSync(join(prefix, 'lib', 'node_modules'), { recursive: true });
  mkdirSync(join(prefix, 'bin'));
  symlinkSync(ROOT, join(prefix, 'lib', 'node_modules', 'gpu-share'));
  symlinkSync(join('..', 'lib', 'node_modules', 'gpu-share', 'bin', 'gpu-share.js'), join(prefix, 'bin', 'gpu-share'));
  const { GPU_SHARE_DATA_DIR: _data, XDG_DATA_HOME: _xdg, GPU_SHARE_API_PORT: _port, GPU_SHARE_SIM: _sim, ...rest } = process.env;
  env = { ...rest, HOME: home, PATH: [join(prefix, 'bin'), process.env['PATH'] ?? ''].join(delimiter) };
  sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: [], health: 'OK' }] }));
});

afterAll(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exitOf(child);
      clearTimeout(timer);
    }
  }
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
});

describe('a newcomer, with the README only', () => {
  it('makes two tiny models with npm run make-model', () => {
    mkdirSync(join(home, 'models'));
    for (const [name, seed] of [['a', '1'], ['b', '2']] as const) {
      const made = spawnSync('npm', ['run', '-s', 'make-model', '--', join(home, 'models', `${name}.gguf`), '--seed', seed], { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 });
      expect(made.status, made.stderr).toBe(0);
      expect(statSync(join(home, 'models', `${name}.gguf`)).size).toBeGreaterThan(100_000);
    }
  }, 120_000);

  it('starts gpu-share serve from PATH in an empty HOME and gets the dashboard URL', async () => {
    const started = performance.now();
    const serve = start(['serve', '--port', '0', '--sim', sim]);
    const found = await serve.lines(/^dashboard: (http:\/\/127\.0\.0\.1:\d+)\/#token=([A-Za-z0-9_-]+)$/);
    // Figures go to the benchmark notes; here it only has to start without a build.
    console.log(`newcomer: dashboard URL after ${Math.round(performance.now() - started)} ms`);
    dashboard = { base: found[1] ?? '', token: found[2] ?? '' };
    expect(statSync(join(home, '.local', 'share', 'gpu-share')).mode & 0o777).toBe(0o700);
  }, 60_000);

  it('adds two models with the same capability through the API; each answers by its own id through the openai client (list, chat, stream)', async () => {
    if (dashboard === null) throw new Error('serve did not start');
    const { base, token } = dashboard;
    for (const name of ['chat-a', 'chat-b']) {
      const added = await fetch(`${base}/api/profiles`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name, capabilities: ['chat'], engineKind: 'builtin', modelPath: join(home, 'models', `${name.slice(-1)}.gguf`), contextSize: 256, threads: 1, priority: 'interactive' }),
      });
      expect(added.status, await added.clone().text()).toBe(201);
    }
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: token, maxRetries: 0, timeout: 90_000 });
    const listed: { id: string; owned_by: string }[] = [];
    for await (const model of client.models.list()) listed.push({ id: model.id, owned_by: model.owned_by });
    expect(listed).toEqual([
      { id: 'chat-a', owned_by: 'profile' },
      { id: 'chat-b', owned_by: 'profile' },
      { id: 'chat', owned_by: 'capability' },
    ]);
    for (const id of ['chat-b', 'chat-a']) {
      const { data, response } = await client.chat.completions.create({ model: id, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 }).withResponse();
      expect(data.model).toBe(id);
      expect(data.choices[0]?.message.role).toBe('assistant');
      // The engine that answered is this profile's own.
      expect(response.headers.get('x-gpushare-engine'), id).toMatch(new RegExp(`^${id}-\\d+$`));
      const stream = await client.chat.completions.create({ model: id, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 4, stream: true }).withResponse();
      expect(stream.response.headers.get('x-gpushare-engine'), id).toMatch(new RegExp(`^${id}-\\d+$`));
      let pieces = 0;
      for await (const chunk of stream.data) {
        expect(chunk.model).toBe(id);
        pieces += chunk.choices.length;
      }
      expect(pieces).toBeGreaterThan(0);
    }
  }, 180_000);

  it('launches a model with gpu-share launch; its printed URL answers a plain request, as curl sends it', async () => {
    const launched = start(['launch', '--model', join(home, 'models', 'a.gguf'), '--ctx', '256', '--threads', '1', '--sim', sim]);
    const found = await launched.lines(/^running: .* at (http:\/\/127\.0\.0\.1:\d+);/);
    const answer = await fetch(`${found[1] ?? ''}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 }) });
    expect(answer.status, await answer.clone().text()).toBe(200);
    expect(((await answer.json()) as { object: string }).object).toBe('chat.completion');
    launched.child.kill('SIGINT');
    expect((await exitOf(launched.child)).code).toBe(0);
  }, 90_000);
});
