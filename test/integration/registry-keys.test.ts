/**
 * Zero-conf keys with real processes and real segments: `join`, `run` and `peers` without a key use
 * the first device telemetry discovers (cpu-0 here; the first NVIDIA UUID where NVML answers, with
 * the fake libnvidia-ml), `--gpu N` picks the N-th, `devices` lists devices and this user's
 * registries and removes a dead one, and an unknown key says so on stderr without failing.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { buildFakeNvml, fakeUuid, writeFakeNvml } from '../fixtures/fake-nvml/build.js';
import { cleanupAfterEach, runCli, segmentPath, startCli, uniqueKey } from './cli-process.js';

cleanupAfterEach();

/** No NVML library: telemetry falls back to the host CPU (cpu-0), as on this machine and in CI. */
const NO_NVML = { GPU_SHARE_NVML_LIB: '/nonexistent/libnvidia-ml.so.1', GPU_SHARE_SIM: '' };
const BOOT = /^gpu-share: joined \/opencoti-gpu-(\S+) slot (\d+) /;

let dir = '';
let nvml: Record<string, string> = {};
const UUIDS = [fakeUuid(process.pid * 16 + 1), fakeUuid(process.pid * 16 + 2)];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-keys-'));
  const lib = buildFakeNvml(dir);
  const json = join(dir, 'nvml.json');
  writeFakeNvml(json, {
    devices: [
      { uuid: UUIDS[0] ?? '', name: 'NVIDIA Fake A', total: 24 * 2 ** 30, used: 2 ** 30 },
      { uuid: UUIDS[1] ?? '', name: 'NVIDIA Fake B', total: 12 * 2 ** 30, used: 2 ** 30 },
    ],
  });
  nvml = { GPU_SHARE_NVML_LIB: lib, FAKE_NVML_JSON: json, GPU_SHARE_SIM: '' };
}, 60_000);

afterAll(() => {
  for (const uuid of UUIDS) rmSync(segmentPath(uuid), { force: true });
  rmSync(dir, { recursive: true, force: true });
});

const views = (stdout: readonly string[]): GpuPeersView[] => stdout.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as GpuPeersView);

describe('commands without a key use the first device', () => {
  it('join, peers and run on cpu-0 when NVML does not answer', async () => {
    const joiner = startCli(['join', '--active', '--name', 'keyless'], { env: NO_NVML });
    const boot = await joiner.waitForLine(BOOT, 15_000);
    expect(BOOT.exec(boot.text)?.[1]).toBe('cpu-0');

    const peers = await runCli(['peers', '--json'], 15_000, { env: NO_NVML });
    expect(peers.code, peers.stderr.join('\n')).toBe(0);
    const cpu = views(peers.stdout).find((v) => v.gpu_key === 'cpu-0');
    expect(cpu?.peers.map((p) => p.pid)).toContain(joiner.pid);

    const run = await runCli(['run', '--', process.execPath, '-e', 'setTimeout(() => {}, 300)'], 20_000, { env: NO_NVML });
    expect(run.code, run.stderr.join('\n')).toBe(0);
    expect(run.stderr.find((l) => BOOT.test(l))).toMatch(/\/opencoti-gpu-cpu-0 /);
    joiner.kill('SIGTERM');
    expect(await joiner.exitWithin(10_000)).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('the first NVIDIA UUID where NVML answers; --gpu 1 the second; devices lists both', async () => {
    const first = startCli(['join', '--active', '--name', 'on-a'], { env: nvml });
    expect(BOOT.exec((await first.waitForLine(BOOT, 15_000)).text)?.[1]).toBe(UUIDS[0]);
    const second = startCli(['join', '--gpu', '1', '--name', 'on-b'], { env: nvml });
    expect(BOOT.exec((await second.waitForLine(BOOT, 15_000)).text)?.[1]).toBe(UUIDS[1]);

    const run = await runCli(['run', '--', process.execPath, '-e', 'setTimeout(() => {}, 300)'], 20_000, { env: nvml });
    expect(run.code, run.stderr.join('\n')).toBe(0);
    expect(run.stderr.find((l) => BOOT.test(l))).toContain(`/opencoti-gpu-${UUIDS[0]} `);

    const peers = await runCli(['peers', '--json'], 15_000, { env: nvml });
    const byKey = new Map(views(peers.stdout).map((v) => [v.gpu_key, v]));
    expect(byKey.get(UUIDS[0] ?? '')?.peers.map((p) => p.name)).toEqual(['on-a']);
    expect(byKey.get(UUIDS[1] ?? '')?.peers.map((p) => p.name)).toEqual(['on-b']);

    const devices = await runCli(['devices', '--json'], 15_000, { env: nvml });
    expect(devices.code, devices.stderr.join('\n')).toBe(0);
    const listing = JSON.parse(devices.stdout[0] ?? '') as { devices: { index: number; key: string; name: string; totalBytes: number; source: string }[]; segments: { key: string; path: string; alive: number | null }[] };
    expect(listing.devices).toEqual([
      { index: 0, key: UUIDS[0], name: 'NVIDIA Fake A', totalBytes: 24 * 2 ** 30, source: 'nvml' },
      { index: 1, key: UUIDS[1], name: 'NVIDIA Fake B', totalBytes: 12 * 2 ** 30, source: 'nvml' },
    ]);
    const ours = listing.segments.filter((s) => UUIDS.includes(s.key));
    expect(ours).toHaveLength(2);
    // Found by content, each named by the device key that hashes to its file name.
    expect(ours).toEqual(expect.arrayContaining(UUIDS.map((key) => ({ key, path: segmentPath(key), alive: 1, problem: null }))));

    const table = await runCli(['devices'], 15_000, { env: nvml });
    expect(table.stdout.join('\n')).toMatch(/^0\s+GPU-\S+\s+NVIDIA Fake A\s+24\.00 GiB\s+nvml$/m);

    const bad = await runCli(['join', '--gpu', '2'], 15_000, { env: nvml });
    expect(bad.code).toBe(2);
    expect(bad.stderr.join('\n')).toContain('--gpu 2: there is no device 2');
    for (const proc of [first, second]) proc.kill('SIGTERM');
  }, 90_000);
});

describe('a GPU without a UUID', () => {
  it('is keyed gpu- + the first 12 hex digits of sha256("<name>|<PCI bus id>"), and join uses that key', async () => {
    const json = join(dir, 'no-uuid.json');
    const name = `NVIDIA Fake NoUUID ${process.pid}`;
    writeFakeNvml(json, { devices: [{ uuid: 'unused', uuidSupported: false, pciBusId: '00000000:41:00.0', name, total: 8 * 2 ** 30, used: 0 }] });
    const key = `gpu-${createHash('sha256').update(`${name}|00000000:41:00.0`).digest('hex').slice(0, 12)}`;
    try {
      const env = { ...nvml, FAKE_NVML_JSON: json };
      const devices = await runCli(['devices', '--json'], 15_000, { env });
      expect(devices.code, devices.stderr.join('\n')).toBe(0);
      expect((JSON.parse(devices.stdout[0] ?? '') as { devices: { key: string }[] }).devices.map((d) => d.key)).toEqual([key]);
      const joiner = startCli(['join', '--name', 'no-uuid'], { env });
      expect(BOOT.exec((await joiner.waitForLine(BOOT, 15_000)).text)?.[1]).toBe(key);
      joiner.kill('SIGTERM');
      await joiner.exitWithin(10_000);
    } finally {
      rmSync(segmentPath(key), { force: true });
    }
  }, 40_000);
});

describe('devices and unknown keys', () => {
  it('devices --remove refuses a registry with a live peer and removes one without', async () => {
    const key = uniqueKey('rm');
    const joiner = startCli(['join', '--gpu-key', key]);
    await joiner.waitForLine(BOOT, 15_000);
    const refused = await runCli(['devices', '--remove', key]);
    expect(refused.code).toBe(1);
    expect(refused.stderr.join('\n')).toContain('has 1 live peer; not removed');
    expect(existsSync(segmentPath(key))).toBe(true);
    joiner.kill('SIGTERM');
    await joiner.exitWithin(10_000);
    const removed = await runCli(['devices', '--remove', key]);
    expect(removed.code, removed.stderr.join('\n')).toBe(0);
    expect(removed.stdout).toContain(`removed /opencoti-gpu-${key} (${segmentPath(key)})`);
    expect(existsSync(segmentPath(key))).toBe(false);
    const again = await runCli(['devices', '--remove', key]);
    expect(again.code).toBe(1);
    expect(again.stderr.join('\n')).toContain('there is no registry segment');
  }, 40_000);

  it('devices finds registries by content: a key no device has is shown as unknown key (<hex>.sem); a .sem file that is no registry is not listed', async () => {
    const key = uniqueKey('bycontent');
    const joiner = startCli(['join', '--gpu-key', key]);
    await joiner.waitForLine(BOOT, 15_000);
    // A POSIX semaphore of a cosmopolitan program lives beside the registries under the same
    // kind of name; it is no registry.
    const other = uniqueKey('sem');
    writeFileSync(segmentPath(other), new Uint8Array(32));
    const devices = await runCli(['devices', '--json'], 15_000, { env: NO_NVML });
    expect(devices.code, devices.stderr.join('\n')).toBe(0);
    const segments = (JSON.parse(devices.stdout[0] ?? '') as { segments: { key: string; path: string; alive: number | null }[] }).segments;
    const fileName = segmentPath(key).slice('/dev/shm/'.length);
    expect(segments).toContainEqual({ key: `unknown key (${fileName})`, path: segmentPath(key), alive: 1, problem: null });
    expect(segments.some((s) => s.path === segmentPath(other))).toBe(false);
    const table = await runCli(['devices'], 15_000, { env: NO_NVML });
    expect(table.stdout.join('\n')).toContain(`unknown key (${fileName})`);
    joiner.kill('SIGTERM');
    await joiner.exitWithin(10_000);
  }, 40_000);

  it('peers on an unknown key says so on stderr with the known ones, prints the empty view and exits 0', async () => {
    const key = uniqueKey('unknown');
    const run = await runCli(['peers', '--gpu-key', key, '--json'], 15_000, { env: NO_NVML });
    expect(run.code).toBe(0);
    expect(run.stderr).toHaveLength(1);
    expect(run.stderr[0]).toMatch(new RegExp(`^gpu-share: no device has the key ${key} and no registry exists for it yet; devices: 0: cpu-0 `));
    expect(JSON.parse(run.stdout[0] ?? '')).toEqual({ gpu_key: key, self: null, peers: [] });
    // Once someone joins, the same command is quiet.
    const joiner = startCli(['join', '--gpu-key', key]);
    await joiner.waitForLine(BOOT, 15_000);
    const known = await runCli(['peers', '--gpu-key', key, '--json'], 15_000, { env: NO_NVML });
    expect(known.stderr).toEqual([]);
    expect((JSON.parse(known.stdout[0] ?? '') as GpuPeersView).peers).toHaveLength(1);
  }, 40_000);
});
