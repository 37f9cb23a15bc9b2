/**
 * A command engine that ends right after it starts, behind the gateway of a real `serve` (issue
 * 32, item 6). It used to be launched again by every request (29 requests → 29 launches), never
 * marked failed, and its crashed entries stayed in the state (36 after 8 minutes). Now: launches
 * back off (1, 2, 4, 8 s), the fifth end within 60 s holds the profile failed with its last
 * output, every request meanwhile is a 503 naming why without a launch, only the newest ended
 * engine stays listed, and the dashboard's launch starts it again.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppState } from '../../electron/core/contract.js';
import { ProfileStore } from '../../electron/core/engines/profiles.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, startServe, type Served } from '../fixtures/serve.js';

const KEY = `GPU-crashloop-${process.pid}`;
const REQUESTS = 29;
let dir = '';
let served: Served;

const chat = async (): Promise<{ status: number; message: string }> => {
  const response = await fetch(`${served.base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${served.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'flaky', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    signal: AbortSignal.timeout(20_000),
  });
  const body = (await response.json()) as { error?: { message?: string } };
  return { status: response.status, message: body.error?.message ?? '' };
};

/** How many times the engine was started: each start adds one line to its marker file. */
const launches = (): number => {
  const path = join(dir, 'starts.log');
  return existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter((l) => l === 'start').length : 0;
};

const FLAKY_PORT = 20_000 + (process.pid % 20_000);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-crashloop-'));
  const sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' }] }));
  // A command profile is the local user's (profiles.json), not something made over HTTP.
  const dataDir = join(dir, 'data');
  new ProfileStore({ dataDir }).create({
    id: 'flaky',
    name: 'flaky',
    capabilities: ['flaky'],
    engineKind: 'command',
    modelPath: null,
    command: '/bin/sh',
    // Runs (it listens on its port, so it counts as started), says why and exits with 3.
    args: ['-c', `echo start >> ${join(dir, 'starts.log')}; echo "flaky: config missing" >&2; exec "${process.execPath}" -e "require('net').createServer().listen(${FLAKY_PORT}, '127.0.0.1', () => setTimeout(() => process.exit(3), 300))"`, 'flaky', '--port', String(FLAKY_PORT)],
    contextSize: 256,
    priority: 'interactive',
  } as Parameters<ProfileStore['create']>[0]);
  served = await startServe({ dataDir, sim });
}, 30_000);

afterAll(async () => {
  await served?.stop();
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
});

describe('crash loop behind the gateway', () => {
  it(`${REQUESTS} requests for an engine that exits at once: a handful of launches with back-off, then 503s naming the failure, no relaunch`, async () => {
    const answers: { status: number; message: string }[] = [];
    // One request every 800 ms: over 23 s, well past the 1 + 2 + 4 + 8 s of back-off before the
    // fifth start.
    for (let i = 0; i < REQUESTS; i++) {
      answers.push(await chat());
      await new Promise((resolve) => setTimeout(resolve, 800));
    }
    const started = launches();
    console.log(`crash loop: ${REQUESTS} requests → ${started} launches; answers ${JSON.stringify(Object.entries(answers.reduce<Record<string, number>>((c, a) => ({ ...c, [a.status]: (c[a.status] ?? 0) + 1 }), {})))}; last: ${answers.at(-1)?.message ?? ''}`);
    expect(answers.every((a) => a.status === 503), JSON.stringify(answers)).toBe(true);
    expect(started).toBe(5);
    expect(answers.some((a) => /next start in \d/.test(a.message))).toBe(true);
    // The fifth end holds it failed, with its last output.
    const failure = async (): Promise<string | undefined> => (await call<AppState>(served, 'GET', '/api/state')).body.profileFailures.find((f) => f.profileId === 'flaky')?.reason;
    const deadline = Date.now() + 10_000;
    while ((await failure()) === undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await failure()).toMatch(/ended by itself 5 times.*flaky: config missing/);
    // More requests: 503s naming the failure, and nothing more is started.
    for (let i = 0; i < 5; i++) {
      const answer = await chat();
      expect(answer.status).toBe(503);
      expect(answer.message).toMatch(/ended by itself 5 times.*restarted from the dashboard/);
    }
    expect(launches()).toBe(5);
    const state = (await call<AppState>(served, 'GET', '/api/state')).body;
    // Only the newest ended engine of the profile is listed.
    expect(state.engines.filter((e) => e.profileId === 'flaky')).toHaveLength(1);
  }, 120_000);

  it('the dashboard launch starts it again', async () => {
    const before = launches();
    const launched = await call<{ engine: unknown }>(served, 'POST', '/api/engines', { profileId: 'flaky' });
    expect(launched.status).toBeLessThan(300);
    const deadline = Date.now() + 10_000;
    while (launches() === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(launches()).toBe(before + 1);
  }, 30_000);
});
