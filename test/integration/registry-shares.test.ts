/**
 * Shares on a real registry: `gpu-share join` processes at 20:1 and at sixteen weights 8 … 0.1.
 * `peers --json` and serve's /gpu/peers show the plain ratio w/Σw, while the TDM windows serve
 * derives from the same segment use the floored window shares (docs/pacing.md: 90.50/9.50; 14.77,
 * 7.39, 7.39, 13 × 5.42 %).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeviceView } from '../../electron/core/contract.js';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, startServe, state, until, type Served } from '../fixtures/serve.js';
import { cleanupAfterEach, runCli, startCli, uniqueKey, type CliProcess } from './cli-process.js';

cleanupAfterEach();

const KEY_20_1 = uniqueKey('s20');
const KEY_16 = uniqueKey('s16');
const SIXTEEN = [8, 4, 4, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0.5, 0.5, 0.25, 0.1];
let dir = '';
let served: Served;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-shares-'));
  const sim = join(dir, 'sim.json');
  const device = (key: string) => ({ key, name: key, totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' });
  writeFileSync(sim, JSON.stringify({ devices: [device(KEY_20_1), device(KEY_16)] }));
  served = await startServe({ dataDir: join(dir, 'data'), sim });
}, 30_000);

afterAll(async () => {
  await served?.stop();
  for (const key of [KEY_20_1, KEY_16]) removeSegment(key);
  rmSync(dir, { recursive: true, force: true });
});

/** Joins one active peer per weight, in slot order (one after another). */
async function joinAll(key: string, weights: readonly number[]): Promise<CliProcess[]> {
  const procs: CliProcess[] = [];
  for (const [i, weight] of weights.entries()) {
    const proc = startCli(['join', '--gpu-key', key, '--weight', String(weight), '--name', `p${i}`, '--active']);
    await proc.waitForLine(/^gpu-share: joined /, 20_000);
    procs.push(proc);
  }
  return procs;
}

async function observedShares(key: string): Promise<number[]> {
  const run = await runCli(['peers', '--gpu-key', key, '--json']);
  expect(run.code, run.stderr.join('\n')).toBe(0);
  const view = JSON.parse(run.stdout[0] ?? '') as GpuPeersView;
  return view.peers.map((peer) => peer.share_pct);
}

async function deviceOf(key: string, peers: number): Promise<DeviceView> {
  return until(
    async () => {
      const device = (await state(served)).devices.find((d) => d.key === key);
      return device !== undefined && device.schedule !== null && device.schedule.windows.length === peers ? device : undefined;
    },
    10_000,
    `a schedule of ${peers} windows on ${key}`,
  );
}

const pct2 = (x: number): number => Number((x * 100).toFixed(2));

describe('plain shares shown, floored windows scheduled', () => {
  it('20:1 reads 95.24 / 4.76; its windows are 90.50 / 9.50 % of a 400 ms period', async () => {
    const procs = await joinAll(KEY_20_1, [20, 1]);
    expect(await observedShares(KEY_20_1)).toEqual([95.24, 4.76]);
    const api = await call<GpuPeersView>(served, 'GET', `/gpu/peers?gpu_key=${KEY_20_1}`, undefined, null);
    expect(api.body.peers.map((p) => p.share_pct)).toEqual([95.24, 4.76]);
    const device = await deviceOf(KEY_20_1, 2);
    expect(device.peers.map((p) => p.sharePct)).toEqual([95.24, 4.76]);
    const schedule = device.schedule;
    if (schedule === null) throw new Error('no schedule');
    expect(schedule.periodUs).toBe(400_000);
    expect(schedule.windows.map((w) => pct2(w.lengthUs / schedule.periodUs))).toEqual([90.5, 9.5]);
    // The small peer waits the period less its own window.
    expect(schedule.windows[1]?.stallBoundUs).toBe(400_000 - (schedule.windows[1]?.lengthUs ?? 0));
    for (const proc of procs) proc.kill('SIGTERM');
  }, 60_000);

  it('16 peers weighted 8 … 0.1 read in proportion to their weights; their windows are 14.77, 7.39, 7.39, 13 × 5.42 %', async () => {
    const procs = await joinAll(KEY_16, SIXTEEN);
    const total = SIXTEEN.reduce((a, b) => a + b, 0);
    const expected = SIXTEEN.map((w) => Math.round((w / total) * 10_000) / 100);
    expect(await observedShares(KEY_16)).toEqual(expected);
    const device = await deviceOf(KEY_16, 16);
    expect(device.peers.map((p) => p.sharePct)).toEqual(expected);
    const schedule = device.schedule;
    if (schedule === null) throw new Error('no schedule');
    expect(schedule.windows.map((w) => Number(((w.lengthUs / schedule.periodUs) * 100).toFixed(1)))).toEqual([14.8, 7.4, 7.4, ...new Array<number>(13).fill(5.4)]);
    for (const proc of procs) proc.kill('SIGTERM');
  }, 120_000);
});
