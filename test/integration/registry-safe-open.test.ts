/**
 * Segments no other user can wedge, with real processes and real segments in /dev/shm: a FIFO, a
 * directory and a symlink at the segment name, another user's 0666 segment with two always-active
 * fake peers of weight 100, another user's 0600 segment and another user's empty 0666 file.
 * `join` and `peers` refuse each with one line naming the segment and why, within 5 s; `run` runs
 * its command unpaced with one warning; `serve` answers /gpu/peers, /props and /metrics for each
 * (the FIFO is its own device) and keeps answering everything else; every name is left exactly as
 * it was. A segment of this user is ours whatever its mode, and --shared-registry accepts another
 * user's. "This user" is the effective uid: a segment root created is root's; one that uid 65534
 * created is another user's, even though root could open it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, type Stats } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEmptySegment, encodeSlot } from '../../electron/core/registry/codec.js';
import { segmentLabel } from '../../electron/core/registry/segment.js';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { call, startServe, type Served } from '../fixtures/serve.js';
import { cleanupAfterEach, runCli, segmentPath, startCli, uniqueKey } from './cli-process.js';

cleanupAfterEach();

const OTHER_UID = 65534;
const isRoot = process.getuid?.() === 0;
const hasSetpriv = spawnSync('setpriv', ['--version']).status === 0;
const canActAsOther = isRoot && hasSetpriv;
const hasMkfifo = spawnSync('mkfifo', ['--version']).status === 0;

/** Runs a shell command as uid/gid 65534 (nobody), so that what it creates belongs to another user. */
function asOtherUser(script: string): void {
  execFileSync('setpriv', [`--reuid=${OTHER_UID}`, `--regid=${OTHER_UID}`, '--clear-groups', 'sh', '-c', script]);
}

/** A registry image with two always-active peers of weight 100 and a heartbeat in the future (so
 *  that it stays alive for the whole test): what a squatter would write to slow us down. */
function squatterImage(): Uint8Array {
  const bytes = encodeEmptySegment();
  const soon = (Date.now() + 60_000) * 1000;
  for (const slot of [0, 1]) encodeSlot(bytes, slot, { pid: 40_000 + slot, weight: 100, active: true, heartbeatUs: soon, bootUs: soon - 1e9, name: `squatter-${slot}` });
  return bytes;
}

type Hostile = { name: string; reason: RegExp; make(key: string): void; otherUser: boolean };

const HOSTILE: Hostile[] = [
  { name: 'a FIFO', reason: /it is a FIFO/, otherUser: false, make: (key) => execFileSync('mkfifo', ['-m', '666', segmentPath(key)]) },
  { name: 'a directory', reason: /it is a directory/, otherUser: false, make: (key) => mkdirSync(segmentPath(key)) },
  {
    name: 'a symlink',
    reason: /it is a symbolic link/,
    otherUser: false,
    make: (key) => {
      // A link to a perfectly valid registry of ours: still refused (the name is a link).
      const target = join(scratch, `target-${key}`);
      writeFileSync(target, encodeEmptySegment(), { mode: 0o600 });
      symlinkSync(target, segmentPath(key));
    },
  },
  {
    name: "another user's 0666 segment with two active peers of weight 100",
    reason: new RegExp(`it belongs to another user \\(uid ${OTHER_UID}\\)`),
    otherUser: true,
    make: (key) => {
      const image = join(scratchShared, `image-${key}`);
      writeFileSync(image, squatterImage(), { mode: 0o644 });
      asOtherUser(`cp '${image}' '${segmentPath(key)}' && chmod 666 '${segmentPath(key)}'`);
    },
  },
  {
    name: "another user's 0600 segment",
    reason: new RegExp(`it belongs to another user \\(uid ${OTHER_UID}\\)`),
    otherUser: true,
    make: (key) => {
      const image = join(scratchShared, `image-${key}`);
      writeFileSync(image, encodeEmptySegment(), { mode: 0o644 });
      asOtherUser(`cp '${image}' '${segmentPath(key)}' && chmod 600 '${segmentPath(key)}'`);
    },
  },
  {
    name: "another user's empty 0666 file",
    reason: new RegExp(`it belongs to another user \\(uid ${OTHER_UID}\\)`),
    otherUser: true,
    make: (key) => asOtherUser(`: > '${segmentPath(key)}' && chmod 666 '${segmentPath(key)}'`),
  },
];

let scratch = '';
/** World-readable, for files another uid copies. */
let scratchShared = '';

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'gpushare-safe-'));
  scratchShared = join(scratch, 'shared');
  mkdirSync(scratchShared);
  chmodSync(scratch, 0o755);
  chmodSync(scratchShared, 0o755);
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** What must not change: type, mode, owner, size, mtime, and the bytes of a regular file. */
function fingerprint(key: string): { stat: Pick<Stats, 'mode' | 'uid' | 'size' | 'mtimeMs' | 'ino'>; bytes: string | null } {
  const stat = lstatSync(segmentPath(key));
  const bytes = stat.isFile() ? readFileSync(segmentPath(key)).toString('hex') : null;
  return { stat: { mode: stat.mode, uid: stat.uid, size: stat.size, mtimeMs: stat.mtimeMs, ino: stat.ino }, bytes };
}

function removeName(key: string): void {
  rmSync(segmentPath(key), { recursive: true, force: true });
}

const runnable = (h: Hostile): boolean => (h.otherUser ? canActAsOther : h.name !== 'a FIFO' || hasMkfifo);

describe('refused without hanging, left untouched', () => {
  for (const hostile of HOSTILE) {
    it.skipIf(!runnable(hostile))(`${hostile.name}: join and peers refuse it in one line; run runs its command unpaced`, async () => {
      const key = uniqueKey('hostile');
      try {
        hostile.make(key);
        const before = fingerprint(key);
        const started = performance.now();
        const joined = await runCli(['join', '--gpu-key', key, '--active'], 5_000);
        expect(performance.now() - started).toBeLessThan(5_000);
        expect(joined.code).toBe(1);
        expect(joined.stderr.filter((l) => l !== '')).toHaveLength(1);
        expect(joined.stderr[0]).toMatch(new RegExp(`^gpu-share: refused shared-memory segment /opencoti-gpu-${key} \\(${segmentPath(key)}\\): `));
        expect(joined.stderr[0]).toMatch(hostile.reason);
        expect(joined.stdout.filter((l) => l !== '')).toEqual([]);

        const peers = await runCli(['peers', '--gpu-key', key, '--json'], 5_000);
        expect(peers.code).toBe(1);
        expect(peers.stderr.filter((l) => l !== '')).toHaveLength(1);
        expect(peers.stderr[0]).toMatch(hostile.reason);

        // Without a key, peers lists the registries it finds by content: a name that is no
        // registry (and no device's) is not one of them, and is neither opened nor mentioned.
        const all = await runCli(['peers', '--json'], 10_000);
        expect(all.code).toBe(0);
        expect(all.stderr.filter((l) => l.includes(key))).toHaveLength(0);

        const run = await runCli(['run', '--gpu-key', key, '--', process.execPath, '-e', 'process.stdout.write("ran"); process.exit(7)'], 10_000);
        expect(run.code).toBe(7);
        expect(run.stdout.join('')).toBe('ran');
        expect(run.stderr.filter((l) => l !== '')).toHaveLength(1);
        expect(run.stderr[0]).toMatch(hostile.reason);
        expect(run.stderr[0]).toMatch(/; running \S+ unpaced$/);

        expect(fingerprint(key)).toEqual(before);
      } finally {
        removeName(key);
      }
    }, 40_000);
  }

  it('a segment of this user is ours whatever its mode; one others can write (0666) is set back to 0600 with one line; a 0-byte one of ours is adopted', async () => {
    const loose = uniqueKey('loose');
    writeFileSync(segmentPath(loose), encodeEmptySegment());
    chmodSync(segmentPath(loose), 0o666);
    const joiner = startCli(['join', '--gpu-key', loose]);
    await joiner.waitForLine(/^gpu-share: joined /, 10_000);
    expect(lstatSync(segmentPath(loose)).mode & 0o777).toBe(0o600);
    expect(joiner.lines('stderr').filter((l) => l.includes('set it back to 0600'))).toEqual([
      `gpu-share: ${segmentLabel(loose, segmentPath(loose))} could be written by other users; set it back to 0600 (registries are per user unless shared: --shared-registry)`,
    ]);
    // 0644: others can read, not write; left as it is.
    const readable = uniqueKey('readable');
    writeFileSync(segmentPath(readable), encodeEmptySegment());
    chmodSync(segmentPath(readable), 0o644);
    const reader = await runCli(['peers', '--gpu-key', readable, '--json']);
    expect(reader.code).toBe(0);
    expect(reader.stderr).toEqual([]);
    expect(lstatSync(segmentPath(readable)).mode & 0o777).toBe(0o644);

    const empty = uniqueKey('empty');
    writeFileSync(segmentPath(empty), new Uint8Array(0), { mode: 0o600 });
    const adopter = startCli(['join', '--gpu-key', empty]);
    await adopter.waitForLine(/^gpu-share: joined \S+ slot 0 /, 10_000);
    expect(lstatSync(segmentPath(empty)).size).toBe(4096);
  }, 30_000);

  it.skipIf(!canActAsOther)("--shared-registry accepts another user's segment and creates ours mode 0666", async () => {
    const theirs = uniqueKey('theirs');
    const image = join(scratchShared, `image-${theirs}`);
    writeFileSync(image, encodeEmptySegment(), { mode: 0o644 });
    asOtherUser(`cp '${image}' '${segmentPath(theirs)}' && chmod 666 '${segmentPath(theirs)}'`);
    const joiner = startCli(['join', '--shared-registry', '--gpu-key', theirs]);
    await joiner.waitForLine(/^gpu-share: joined \S+ slot 0 /, 10_000);

    const fresh = uniqueKey('fresh');
    const creator = startCli(['join', '--shared-registry', '--gpu-key', fresh]);
    await creator.waitForLine(/^gpu-share: joined /, 10_000);
    expect(lstatSync(segmentPath(fresh)).mode & 0o777).toBe(0o666);
    // Without the flag, the same segment is ours (we created it): used, and set back to 0600.
    const plain = await runCli(['peers', '--gpu-key', fresh, '--json']);
    expect(plain.code).toBe(0);
    expect(lstatSync(segmentPath(fresh)).mode & 0o777).toBe(0o600);
  }, 30_000);
});

describe.skipIf(!hasMkfifo)('launch', () => {
  it('runs the built-in engine unpaced, with one warning line, when a FIFO sits at its device\'s registry name', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpushare-safe-launch-'));
    const key = uniqueKey('launch');
    try {
      execFileSync('mkfifo', [segmentPath(key)]);
      const model = join(dir, 'tiny.gguf');
      writeGguf(model, TINY_GGUF_SPEC);
      const sim = join(dir, 'sim.json');
      writeFileSync(sim, JSON.stringify({ devices: [{ key, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: GiB, processes: [], health: 'OK' }] }));
      const launch = startCli(['launch', '--sim', sim, '--data-dir', join(dir, 'data'), '--model', model, '--ctx', '256', '--threads', '1']);
      await launch.waitForLine(/^running: tiny \(builtin/, 60_000);
      const warnings = launch.lines('stderr').filter((l) => l.includes('refused'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(new RegExp(`^tiny: refused shared-memory segment /opencoti-gpu-${key} \\(${segmentPath(key)}\\): it is a FIFO; it was left untouched; running unpaced$`));
      launch.kill('SIGINT');
      expect((await launch.exitWithin(20_000)).code).toBe(0);
      expect(lstatSync(segmentPath(key)).isFIFO()).toBe(true);
    } finally {
      removeName(key);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('serve answers around hostile segments', () => {
  const keys: { hostile: Hostile; key: string }[] = [];
  let served: Served | null = null;
  let dir = '';
  const before = new Map<string, ReturnType<typeof fingerprint>>();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpushare-safe-serve-'));
    for (const [i, hostile] of HOSTILE.filter(runnable).entries()) {
      // Not uniqueKey: those names are removed after each test, these live for the whole block.
      const key = `t-srv-${process.pid}-${i}-${Math.floor(Math.random() * 1e6)}`;
      hostile.make(key);
      keys.push({ hostile, key });
      before.set(key, fingerprint(key));
    }
    // The FIFO (or the first hostile name) is the server's own device: /props reads it.
    const sim = join(dir, 'sim.json');
    writeFileSync(sim, JSON.stringify({ devices: keys.map(({ key }) => ({ key, name: key, totalBytes: 24 * GiB, usedBytes: GiB, processes: null, health: 'OK' })) }));
    served = await startServe({ dataDir: join(dir, 'data'), sim });
  }, 40_000);

  afterAll(async () => {
    await served?.stop();
    for (const { key } of keys) removeName(key);
    rmSync(dir, { recursive: true, force: true });
  });

  const timed = async <T>(work: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const result = await work();
    expect(performance.now() - started).toBeLessThan(5_000);
    return result;
  };

  it('/gpu/peers?gpu_key= of each answers an empty view within 5 s; /props, /metrics and /api/state answer too; nothing was touched', async () => {
    const server = served;
    if (server === null) throw new Error('serve did not start');
    for (const { key } of keys) {
      const answer = await timed(() => call<GpuPeersView>(server, 'GET', `/gpu/peers?gpu_key=${key}`, undefined, null));
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({ gpu_key: key, self: null, peers: [] });
    }
    const props = await timed(() => call<{ opencoti: { gpu_share: { gpu_key: string; peers: unknown[] } } }>(server, 'GET', '/props', undefined, null));
    expect(props.status).toBe(200);
    expect(props.body.opencoti.gpu_share).toMatchObject({ gpu_key: keys[0]?.key, peers: [] });
    const metrics = await timed(() => call<string>(server, 'GET', '/metrics', undefined, null));
    expect(metrics.status).toBe(200);
    // No squatter peer reached our metrics.
    expect(String(metrics.body)).not.toContain('squatter');
    const state = await timed(() => call<{ devices: { key: string; peers: unknown[] }[] }>(server, 'GET', '/api/state'));
    expect(state.status).toBe(200);
    for (const device of state.body.devices) expect(device.peers).toEqual([]);
    // Each refusal was said once in the log, naming the segment and why.
    for (const { hostile, key } of keys) {
      const lines = server.log.filter((l) => l.includes(`/opencoti-gpu-${key}`));
      expect(lines.length, server.log.join('\n')).toBe(1);
      expect(lines[0]).toMatch(hostile.reason);
    }
    for (const { key } of keys) expect(fingerprint(key)).toEqual(before.get(key));
  }, 60_000);

  it('stops promptly on SIGTERM', async () => {
    const server = served;
    if (server === null) throw new Error('serve did not start');
    const started = performance.now();
    await server.stop();
    expect(performance.now() - started).toBeLessThan(5_000);
    served = null;
  }, 20_000);
});
