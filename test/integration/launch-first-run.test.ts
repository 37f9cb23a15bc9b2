/**
 * `gpu-share launch` on a machine that has never run GPU Share (an empty HOME, no data folder):
 * it starts, creates the data folder owner-only, and the URL it prints answers plain requests on
 * loopback as a llama-server the user started would (fetch, and the `openai` client), or asks for
 * the key given with `--api-key`. A launch that fails writes nothing.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { CLI, exitOf } from '../fixtures/procs.js';
import { rawRequest } from '../fixtures/serve.js';
import { removeSegment } from '../fixtures/segments.js';

let dir = '';
let model = '';
let sim = '';
const children: ChildProcess[] = [];
const KEY = `GPU-first-run-${process.pid}`;
let homes = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-first-run-'));
  model = join(dir, 'tiny.gguf');
  writeGguf(model, TINY_GGUF_SPEC);
  sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: [], health: 'OK' }] }));
});
afterAll(() => {
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exitOf(child);
    }
  }
});

/** A home with nothing in it, and the environment of a user who has only that. */
function emptyHome(): { home: string; env: NodeJS.ProcessEnv; dataDir: string } {
  const home = join(dir, `home-${++homes}`);
  mkdirSync(home);
  const { GPU_SHARE_DATA_DIR: _data, XDG_DATA_HOME: _xdg, ...rest } = process.env;
  return { home, env: { ...rest, HOME: home }, dataDir: join(home, '.local', 'share', 'gpu-share') };
}

/** `gpu-share launch ARGS`, on the simulated device unless `onThisMachine`. */
async function launch(env: NodeJS.ProcessEnv, args: string[], onThisMachine = false): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [CLI, 'launch', ...(onThisMachine ? [] : ['--sim', sim]), ...args], { stdio: ['ignore', 'pipe', 'pipe'], env, cwd: dir });
  children.push(child);
  const stderr: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const found = /^running: .* at (http:\/\/127\.0\.0\.1:\d+);/.exec(line);
      if (found?.[1] !== undefined) resolve(found[1]);
    });
    child.once('exit', (code) => reject(new Error(`launch exited ${code}:\n${stderr.join('\n')}`)));
  });
  return { child, url };
}

const chatBody = JSON.stringify({ messages: [{ role: 'user', content: 'Say hi.' }], max_tokens: 4 });

describe('gpu-share launch on a new machine', () => {
  it('runs in an empty HOME, makes the data folder owner-only, and its URL answers plain requests (fetch and the openai client)', async () => {
    const { env, dataDir } = emptyHome();
    // On this machine's own first device (the host CPU where there is no GPU), not a simulated
    // one: only a real device measures the engine's memory, which is then saved in the data
    // folder (where the first launch used to die with ENOENT). The engine is idle but for the
    // few requests below, so it takes nothing from other peers of that registry.
    const { child, url } = await launch(env, ['--model', model, '--ctx', '256', '--threads', '1'], true);
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    expect(existsSync(join(dataDir, 'envelopes.json'))).toBe(true);
    // As curl would send it: no Authorization at all.
    const plain = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody });
    expect(plain.status).toBe(200);
    expect(((await plain.json()) as { object: string }).object).toBe('chat.completion');
    // The openai client insists on some key; the port takes any (none is asked).
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
    const answer = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 });
    expect(answer.choices[0]?.message.role).toBe('assistant');
    let pieces = 0;
    for await (const chunk of await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, stream: true })) pieces += chunk.choices.length;
    expect(pieces).toBeGreaterThan(0);
    // The Host rules stay: a page on another name that resolves here is refused.
    const port = Number(new URL(url).port);
    expect((await rawRequest(port, { method: 'POST', path: '/v1/chat/completions', host: 'attacker.example', headers: { 'content-type': 'application/json' }, body: chatBody })).status).toBe(403);
    child.kill('SIGINT');
    expect((await exitOf(child)).code).toBe(0);
  }, 90_000);

  it('--api-key KEY: requests without it get 401, with it an answer', async () => {
    const { env } = emptyHome();
    const { child, url } = await launch(env, ['--model', model, '--ctx', '256', '--threads', '1', '--api-key', 'sk-local-123']);
    const without = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chatBody });
    expect(without.status).toBe(401);
    expect(((await without.json()) as { error: { message: string } }).error.message).toContain('--api-key');
    const wrong = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sk-wrong', maxRetries: 0, timeout: 60_000 });
    await expect(wrong.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 })).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const right = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sk-local-123', maxRetries: 0, timeout: 60_000 });
    const answer = await right.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 });
    expect(answer.choices[0]?.message.role).toBe('assistant');
    child.kill('SIGINT');
    expect((await exitOf(child)).code).toBe(0);
  }, 90_000);

  it('writes nothing when it fails: an unknown profile, a bad --api-key, a missing model', () => {
    const { home, env } = emptyHome();
    for (const args of [['nosuchprofile'], ['--model', model, '--api-key', 'has space'], ['--model', join(dir, 'missing.gguf')]]) {
      const r = spawnSync(process.execPath, [CLI, 'launch', '--sim', sim, ...args], { encoding: 'utf8', env, cwd: dir, timeout: 30_000 });
      expect(r.status, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(existsSync(join(home, '.local')), args.join(' ')).toBe(false);
    }
    const profile = spawnSync(process.execPath, [CLI, 'launch', '--sim', sim, 'nosuchprofile'], { encoding: 'utf8', env, cwd: dir, timeout: 30_000 });
    expect(profile.stderr).toContain('no profile "nosuchprofile"');
    const key = spawnSync(process.execPath, [CLI, 'launch', '--sim', sim, '--model', model, '--api-key', 'has space'], { encoding: 'utf8', env, cwd: dir, timeout: 30_000 });
    expect(key.stderr).toContain('--api-key');
  }, 60_000);
});
