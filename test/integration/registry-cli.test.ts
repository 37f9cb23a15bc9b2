/**
 * The registry end to end: real `gpu-share join` / `gpu-share peers` processes on real POSIX
 * shared-memory segments (/dev/shm/<hex>.sem, docs/registry.md), each test on its own unique key. Every
 * child a test starts is killed and every segment removed after it (cleanupAfterEach), pass or
 * fail.
 */
import { closeSync, openSync, readFileSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import {
  cleanupAfterEach,
  runCli,
  segmentPath,
  sleep,
  startCli,
  uniqueKey,
  type CliProcess,
  type CliRun,
  type OutputLine,
} from './cli-process.js';

cleanupAfterEach();

// ---- the ABI v1 layout (docs/registry.md), written out here so the tests do not trust the product's ----
const SEGMENT_SIZE = 4096;
const HEADER_SIZE = 16;
const SLOT_SIZE = 88;
const SLOT_COUNT = 16;
const slotBase = (slot: number): number => HEADER_SIZE + SLOT_SIZE * slot;
const OFF = { pid: 0, seq: 4, boot_us: 8, weight: 16, active: 20, heartbeat_us: 24, busy_ppm: 32, name: 36, owner_pid: 84 } as const;

function validHeader(bytes: Uint8Array): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  bytes.set([0x4f, 0x43, 0x47, 0x50, 0x55, 0, 0, 0], 0); // "OCGPU\0\0\0"
  view.setUint32(8, 1, true);
  view.setUint32(12, SLOT_COUNT, true);
}

function readSlotPid(gpuKey: string, slot: number): number {
  const bytes = readFileSync(segmentPath(gpuKey));
  return bytes.readUInt32LE(slotBase(slot) + OFF.pid);
}

function readSlotHeartbeat(gpuKey: string, slot: number): bigint {
  const bytes = readFileSync(segmentPath(gpuKey));
  return bytes.readBigInt64LE(slotBase(slot) + OFF.heartbeat_us);
}

/** Polls a slot's raw heartbeat word every 5 ms; resolves with the performance.now() at which it
 *  was first seen to change. */
async function waitForHeartbeatChange(gpuKey: string, slot: number, timeoutMs: number): Promise<number> {
  const initial = readSlotHeartbeat(gpuKey, slot);
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    await sleep(5);
    if (readSlotHeartbeat(gpuKey, slot) !== initial) return performance.now();
  }
  throw new Error(`the heartbeat of slot ${slot} of ${gpuKey} did not change within ${timeoutMs} ms`);
}

// ---- the /gpu/peers JSON ----
interface SelfJson {
  pid: number;
  name: string;
  weight: number;
  share_pct: number;
  busy_pct: number;
  active: boolean;
}
interface PeerJson extends SelfJson {
  heartbeat_age_ms: number;
}
interface PeersViewJson {
  gpu_key: string;
  self: SelfJson | null;
  peers: PeerJson[];
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isSelf = (value: unknown): value is SelfJson =>
  isRecord(value) &&
  typeof value['pid'] === 'number' &&
  typeof value['name'] === 'string' &&
  typeof value['weight'] === 'number' &&
  typeof value['share_pct'] === 'number' &&
  typeof value['busy_pct'] === 'number' &&
  typeof value['active'] === 'boolean';
const isPeer = (value: unknown): value is PeerJson => isRecord(value) && typeof value['heartbeat_age_ms'] === 'number' && isSelf(value);

/** The view of one JSON line, or null when the line is not one. */
function tryParseView(text: string): PeersViewJson | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isRecord(value) || typeof value['gpu_key'] !== 'string') return null;
  const self = value['self'];
  const peers = value['peers'];
  if (!(self === null || isSelf(self)) || !Array.isArray(peers) || !peers.every(isPeer)) return null;
  return { gpu_key: value['gpu_key'], self, peers };
}

function parseView(text: string): PeersViewJson {
  const view = tryParseView(text);
  if (view === null) throw new Error(`not a /gpu/peers JSON line: ${text}`);
  return view;
}

/** `peers --json` as a one-shot observer. */
async function observe(gpuKey: string): Promise<{ run: CliRun; view: PeersViewJson }> {
  const run = await runCli(['peers', '--gpu-key', gpuKey, '--json']);
  expect(run.code, run.stderr.join('\n')).toBe(0);
  expect(run.stdout.filter((line) => line !== '')).toHaveLength(1);
  return { run, view: parseView(run.stdout[0] ?? '') };
}

// ---- joiners ----
const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');

function bootLinePattern(gpuKey: string): RegExp {
  return new RegExp(`^gpu-share: joined /opencoti-gpu-${escapeRegExp(gpuKey)} slot (\\d+) \\(weight ([0-9.e+-]+), (\\d+) peers? alive\\)$`);
}

interface Boot {
  slot: number;
  weight: number;
  alive: number;
  line: OutputLine;
}

function parseBoot(gpuKey: string, line: OutputLine): Boot {
  const match = bootLinePattern(gpuKey).exec(line.text);
  if (match === null) throw new Error(`not a boot line: ${line.text}`);
  return { slot: Number(match[1]), weight: Number(match[2]), alive: Number(match[3]), line };
}

interface PeerSpec {
  name: string;
  weight: number;
  active: boolean;
  watch?: boolean;
}

interface Peer {
  proc: CliProcess;
  spec: PeerSpec;
  boot: Boot;
}

function joinArgs(gpuKey: string, spec: PeerSpec): string[] {
  return [
    'join',
    '--gpu-key',
    gpuKey,
    '--weight',
    String(spec.weight),
    '--name',
    spec.name,
    ...(spec.active ? ['--active'] : []),
    ...(spec.watch === true ? ['--watch', '--interval', '100'] : []),
  ];
}

/**
 * How long after its boot line a joiner is given before anything may signal it. `join` prints the
 * boot line *before* it installs its SIGINT/SIGTERM handlers, so a signal sent within ~5 ms of
 * the boot line kills it by default action and leaves its slot occupied (see the skipped test
 * at the end of this file).
 */
const SIGNAL_SETTLE_MS = 150;

/** Starts one joiner and waits for its boot line (the first line it prints). */
async function join(gpuKey: string, spec: PeerSpec): Promise<Peer> {
  const proc = startCli(joinArgs(gpuKey, spec));
  const line = await proc.waitForLine(() => true, 10_000);
  const boot = parseBoot(gpuKey, line);
  expect(boot.weight).toBe(spec.weight);
  await sleep(SIGNAL_SETTLE_MS);
  return { proc, spec, boot };
}

/** Starts joiners one after another (so they take slots 0, 1, 2, … of a fresh segment). */
async function joinInOrder(gpuKey: string, specs: readonly PeerSpec[]): Promise<Peer[]> {
  const peers: Peer[] = [];
  for (const spec of specs) peers.push(await join(gpuKey, spec));
  return peers;
}

/** The first --watch view at or after stdout line `fromIndex` that satisfies `accept`. */
async function waitForView(peer: Peer, accept: (view: PeersViewJson) => boolean, timeoutMs: number, fromIndex = 0): Promise<{ view: PeersViewJson; line: OutputLine; index: number }> {
  const line = await peer.proc.waitForLine(
    (text) => {
      const view = tryParseView(text);
      return view !== null && accept(view);
    },
    timeoutMs,
    { fromIndex },
  );
  return { view: parseView(line.text), line, index: peer.proc.stdout.indexOf(line) };
}

/** Shares by name from an observer's view. */
function sharesByName(view: PeersViewJson): Record<string, number> {
  return Object.fromEntries(view.peers.map((peer) => [peer.name, peer.share_pct]));
}

async function stopAll(peers: readonly Peer[], signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  for (const peer of peers) peer.proc.kill(signal);
  const results = await Promise.all(peers.map((peer) => peer.proc.exitWithin(10_000)));
  for (const result of results) expect(result).toEqual({ code: 0, signal: null });
}

describe('gpu-share join / peers on a real registry', () => {
  describe('shares among three joiners', () => {
    it('2,1,1 all active: each --watch view shows itself and the other two; peers --json shows 50/25/25', async () => {
      const key = uniqueKey('shares');
      const specs: PeerSpec[] = [
        { name: 'heavy', weight: 2, active: true, watch: true },
        { name: 'light-a', weight: 1, active: true, watch: true },
        { name: 'light-b', weight: 1, active: true, watch: true },
      ];
      const peers = await joinInOrder(key, specs);
      expect(peers.map((peer) => peer.boot.slot)).toEqual([0, 1, 2]);
      expect(peers.map((peer) => peer.boot.alive)).toEqual([1, 2, 3]);
      expect(new Set(peers.map((peer) => peer.proc.pid)).size).toBe(3);
      const expectedShare: Record<string, number> = { heavy: 50, 'light-a': 25, 'light-b': 25 };

      for (const peer of peers) {
        // Wait until this peer sees both others, then judge the view after that one.
        const seen = await waitForView(peer, (view) => view.peers.length === 2, 5_000);
        const { view } = await waitForView(peer, () => true, 5_000, seen.index + 1);
        expect(view.gpu_key).toBe(key);
        expect(view.self).not.toBeNull();
        expect(view.self?.pid).toBe(peer.proc.pid);
        expect(view.self?.name).toBe(peer.spec.name);
        expect(view.self?.weight).toBe(peer.spec.weight);
        expect(view.self?.active).toBe(true);
        expect(view.self?.share_pct).toBeCloseTo(expectedShare[peer.spec.name] ?? Number.NaN, 1);
        const others = peers.filter((other) => other !== peer);
        expect(view.peers.map((p) => p.pid).sort()).toEqual(others.map((other) => other.proc.pid).sort());
        expect(view.peers.map((p) => p.name).sort()).toEqual(others.map((other) => other.spec.name).sort());
        for (const other of view.peers) {
          expect(other.heartbeat_age_ms).toBeGreaterThanOrEqual(0);
          expect(other.heartbeat_age_ms).toBeLessThan(3_000);
        }
      }

      const { view } = await observe(key);
      expect(view.gpu_key).toBe(key);
      expect(view.self).toBeNull();
      expect(view.peers).toHaveLength(3);
      const shares = sharesByName(view);
      expect(shares['heavy']).toBeCloseTo(50, 1);
      expect(shares['light-a']).toBeCloseTo(25, 1);
      expect(shares['light-b']).toBeCloseTo(25, 1);
      const total = view.peers.reduce((sum, peer) => sum + peer.share_pct, 0);
      expect(total).toBeCloseTo(100, 1);
      for (const peer of view.peers) {
        const spec = specs.find((s) => s.name === peer.name);
        expect(peer.weight).toBe(spec?.weight);
        expect(peer.active).toBe(true);
      }

      await stopAll(peers);
    });

    it('2 active, 1 and 1 idle: the active one gets 100, the idle ones 0', async () => {
      const key = uniqueKey('idle');
      const peers = await joinInOrder(key, [
        { name: 'busy', weight: 2, active: true },
        { name: 'idle-a', weight: 1, active: false },
        { name: 'idle-b', weight: 1, active: false },
      ]);
      const { view } = await observe(key);
      expect(view.self).toBeNull();
      expect(view.peers).toHaveLength(3);
      expect(sharesByName(view)).toEqual({ busy: 100, 'idle-a': 0, 'idle-b': 0 });
      expect(Object.fromEntries(view.peers.map((peer) => [peer.name, peer.active]))).toEqual({ busy: true, 'idle-a': false, 'idle-b': false });
      await stopAll(peers);
    });

    it('2 active, 1 active, 1 idle: 66.67 / 33.33 / 0', async () => {
      const key = uniqueKey('mixed');
      const peers = await joinInOrder(key, [
        { name: 'two', weight: 2, active: true },
        { name: 'one', weight: 1, active: true },
        { name: 'idle', weight: 1, active: false },
      ]);
      const { view } = await observe(key);
      expect(view.peers).toHaveLength(3);
      const shares = sharesByName(view);
      expect(shares['two']).toBeCloseTo(66.67, 1);
      expect(shares['one']).toBeCloseTo(33.33, 1);
      expect(shares['idle']).toBe(0);
      await stopAll(peers);
    });
  });

  it('kill -9: survivors drop the dead peer 2.5–3.6 s later, and a new joiner reclaims its slot', async () => {
    const key = uniqueKey('kill9');
    const peers = await joinInOrder(key, [
      { name: 'p0', weight: 1, active: true, watch: true },
      { name: 'p1', weight: 1, active: true, watch: true },
      { name: 'p2', weight: 1, active: true, watch: true },
    ]);
    expect(peers.map((peer) => peer.boot.slot)).toEqual([0, 1, 2]);
    const [first, victim, last] = peers;
    if (first === undefined || victim === undefined || last === undefined) throw new Error('three peers expected');
    const survivors = [first, last];
    for (const survivor of survivors) await waitForView(survivor, (view) => view.peers.length === 2, 5_000);

    const victimPid = victim.proc.pid;
    // Kill mid-way between two heartbeats (they come every 500 ms), so that neither an early nor a
    // late heartbeat timer moves the expected drop (3 s after the last heartbeat a survivor saw,
    // i.e. about 2.75 s after the kill) out of 2.5–3.6 s.
    const lastHeartbeat = await waitForHeartbeatChange(key, 1, 2_000);
    await sleep(Math.max(0, lastHeartbeat + 250 - performance.now()));
    const fromIndex = survivors.map((survivor) => survivor.proc.stdout.length);
    expect(victim.proc.kill('SIGKILL')).toBe(true);
    const killedAt = performance.now();
    expect(await victim.proc.exitWithin(5_000)).toEqual({ code: null, signal: 'SIGKILL' });

    const drops = await Promise.all(
      survivors.map(async (survivor, i) => {
        const { view, line } = await waitForView(survivor, (v) => !v.peers.some((peer) => peer.pid === victimPid), 8_000, fromIndex[i]);
        expect(view.self?.pid).toBe(survivor.proc.pid);
        expect(view.peers.map((peer) => peer.pid)).toEqual(survivors.filter((s) => s !== survivor).map((s) => s.proc.pid));
        return line.at - killedAt;
      }),
    );
    for (const drop of drops) {
      expect(drop).toBeGreaterThanOrEqual(2_500);
      expect(drop).toBeLessThanOrEqual(3_600);
    }

    // The raw slot still holds the dead pid (nobody frees it but a reclaiming joiner).
    expect(readSlotPid(key, 1)).toBe(victimPid);
    const newcomer = await join(key, { name: 'newcomer', weight: 1, active: true });
    expect(newcomer.boot.slot).toBe(1);
    expect(newcomer.boot.alive).toBe(3);
    expect(readSlotPid(key, 1)).toBe(newcomer.proc.pid);

    await stopAll([first, last, newcomer]);
  }, 30_000);

  it('17 joiners at once: 16 get slots 0..15, one fails with "registry full (16 slots)"; SIGTERM frees all', async () => {
    const key = uniqueKey('full');
    const boot = bootLinePattern(key);
    const procs = Array.from({ length: 17 }, (_, i) => startCli(['join', '--gpu-key', key, '--name', `j${i}`]));
    type Outcome = { proc: CliProcess; slot: number } | { proc: CliProcess; slot: null };
    const outcomes: Outcome[] = await Promise.all(
      procs.map(async (proc): Promise<Outcome> => {
        try {
          const line = await proc.waitForLine(boot, 40_000);
          return { proc, slot: parseBoot(key, line).slot };
        } catch (error) {
          if (proc.isRunning) throw error;
          return { proc, slot: null };
        }
      }),
    );
    const joined = outcomes.filter((outcome): outcome is { proc: CliProcess; slot: number } => outcome.slot !== null);
    const failed = outcomes.filter((outcome) => outcome.slot === null);
    expect(joined).toHaveLength(16);
    expect(joined.map((outcome) => outcome.slot).sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => i));
    expect(failed).toHaveLength(1);
    const loser = failed[0]?.proc;
    if (loser === undefined) throw new Error('one failed joiner expected');
    const loserExit = await loser.exit();
    expect(loserExit.signal).toBeNull();
    expect(loserExit.code).not.toBe(0);
    expect(loserExit.code).not.toBeNull();
    expect(loser.lines('stderr').join('\n')).toContain('registry full (16 slots)');
    expect(loser.lines('stdout').filter((line) => line !== '')).toEqual([]);

    // Every winner holds its own slot in the raw segment.
    const bytes = readFileSync(segmentPath(key));
    for (const { proc, slot } of joined) expect(bytes.readUInt32LE(slotBase(slot) + OFF.pid)).toBe(proc.pid);

    await sleep(SIGNAL_SETTLE_MS);
    for (const { proc } of joined) proc.kill('SIGTERM');
    const exits = await Promise.all(joined.map(({ proc }) => proc.exitWithin(15_000)));
    for (const result of exits) expect(result).toEqual({ code: 0, signal: null });

    const { view } = await observe(key);
    expect(view.peers).toEqual([]);
    const after = readFileSync(segmentPath(key));
    for (let slot = 0; slot < SLOT_COUNT; slot++) expect(after.readUInt32LE(slotBase(slot) + OFF.pid)).toBe(0);
  }, 60_000);

  describe('foreign segments are reported and never written', () => {
    const cases: { name: string; bytes: () => Uint8Array }[] = [
      {
        name: 'wrong magic',
        bytes: () => {
          const bytes = new Uint8Array(randomBytes(SEGMENT_SIZE));
          validHeader(bytes);
          bytes[4] = 0x58; // "OCGPX"
          return bytes;
        },
      },
      {
        name: 'wrong version',
        bytes: () => {
          const bytes = new Uint8Array(randomBytes(SEGMENT_SIZE));
          validHeader(bytes);
          new DataView(bytes.buffer).setUint32(8, 2, true);
          return bytes;
        },
      },
      {
        name: 'wrong slot count',
        bytes: () => {
          const bytes = new Uint8Array(randomBytes(SEGMENT_SIZE));
          validHeader(bytes);
          new DataView(bytes.buffer).setUint32(12, 8, true);
          return bytes;
        },
      },
      {
        name: 'wrong size (8192 bytes, valid header)',
        bytes: () => {
          const bytes = new Uint8Array(randomBytes(2 * SEGMENT_SIZE));
          validHeader(bytes);
          return bytes;
        },
      },
      { name: 'wrong size (100 bytes)', bytes: () => new Uint8Array(randomBytes(100)) },
    ];

    for (const foreign of cases) {
      it(foreign.name, async () => {
        const key = uniqueKey('foreign');
        const path = segmentPath(key);
        const original = foreign.bytes();
        writeFileSync(path, original, { mode: 0o600 });
        const before = statSync(path);
        // Let a later write (if any) show up as a different mtime.
        await sleep(20);

        const [joinRun, peersRun] = await Promise.all([
          runCli(['join', '--gpu-key', key, '--active']),
          runCli(['peers', '--gpu-key', key, '--json']),
        ]);
        for (const run of [joinRun, peersRun]) {
          const stderr = run.stderr.join('\n');
          expect(run.code, stderr).toBe(1);
          expect(run.signal).toBeNull();
          expect(stderr).toContain(`/opencoti-gpu-${key}`);
          expect(stderr).toContain('is not a GPU Share registry');
          expect(run.stdout.filter((line) => line !== '')).toEqual([]);
        }

        const after = readFileSync(path);
        expect(after.length).toBe(original.length);
        expect(Buffer.compare(after, Buffer.from(original))).toBe(0);
        const afterStat = statSync(path);
        expect(afterStat.size).toBe(before.size);
        expect(afterStat.mtimeMs).toBe(before.mtimeMs);
      });
    }
  });

  it('interop: a slot written by another program with node:fs is a peer until its heartbeat stops', async () => {
    const key = uniqueKey('interop');
    const path = segmentPath(key);
    const EXTERNAL_PID = 4242;
    const slot = 0;
    const bytes = new Uint8Array(SEGMENT_SIZE);
    validHeader(bytes);
    const view = new DataView(bytes.buffer);
    const base = slotBase(slot);
    const wallUs = (): bigint => BigInt(Date.now()) * 1000n;
    view.setUint32(base + OFF.pid, EXTERNAL_PID, true);
    view.setUint32(base + OFF.seq, 0, true);
    view.setBigInt64(base + OFF.boot_us, wallUs() - 60_000_000n, true);
    view.setFloat32(base + OFF.weight, 3, true);
    view.setUint32(base + OFF.active, 1, true);
    view.setBigInt64(base + OFF.heartbeat_us, wallUs(), true);
    view.setUint32(base + OFF.busy_ppm, 0, true);
    // An opencoti peer leaves our words in its alignment holes zero: seq 0, owner_pid 0 (= pid).
    view.setUint32(base + OFF.owner_pid, 0, true);
    bytes.set(new TextEncoder().encode('external'), base + OFF.name);
    writeFileSync(path, bytes, { mode: 0o600 });

    const fd = openSync(path, 'r+');
    let lastWriteAt = performance.now();
    const heartbeat = Buffer.alloc(8);
    const beat = (): void => {
      heartbeat.writeBigInt64LE(wallUs());
      writeSync(fd, heartbeat, 0, 8, base + OFF.heartbeat_us);
      lastWriteAt = performance.now();
    };
    let refresher: NodeJS.Timeout | null = setInterval(beat, 200);
    try {
      const joiner = await join(key, { name: 'joiner', weight: 1, active: true });
      expect(joiner.boot.slot).toBe(1);
      expect(joiner.boot.alive).toBe(2);

      const { view: seen } = await observe(key);
      expect(seen.peers).toHaveLength(2);
      const external = seen.peers.find((peer) => peer.name === 'external');
      expect(external).toMatchObject({ pid: EXTERNAL_PID, weight: 3, active: true });
      expect(external?.share_pct).toBeCloseTo(75, 1);
      const mine = seen.peers.find((peer) => peer.name === 'joiner');
      expect(mine?.pid).toBe(joiner.proc.pid);
      expect(mine?.share_pct).toBeCloseTo(25, 1);

      // The external slot was never written by gpu-share (only its heartbeat moves, by us).
      const raw = readFileSync(path);
      const withoutHeartbeat = (buf: Uint8Array): Uint8Array =>
        Uint8Array.from([...buf.subarray(base, base + OFF.heartbeat_us), ...buf.subarray(base + OFF.heartbeat_us + 8, base + SLOT_SIZE)]);
      expect(withoutHeartbeat(raw)).toEqual(withoutHeartbeat(bytes));

      // Stop refreshing: one-shot observers keep listing it for ~3 s after the last write, then
      // no longer. Observers start every 200 ms from 1.5 s to 4 s after the last write.
      clearInterval(refresher);
      refresher = null;
      const stoppedAt = lastWriteAt;
      const runs: Promise<{ run: CliRun; listed: boolean }>[] = [];
      for (let offset = 1_500; offset <= 4_000; offset += 200) {
        const wait = stoppedAt + offset - performance.now();
        if (wait > 0) await sleep(wait);
        runs.push(observe(key).then(({ run, view: v }) => ({ run, listed: v.peers.some((peer) => peer.pid === EXTERNAL_PID) })));
      }
      const results = await Promise.all(runs);
      const timeline = results.map(({ run, listed }) => `start +${Math.round(run.startedAt - stoppedAt)} ms, exit +${Math.round(run.exitedAt - stoppedAt)} ms: ${listed ? 'listed' : 'gone'}`).join('\n');
      for (const { run, listed } of results) {
        // Read before its heartbeat was 2.9 s old: still alive.
        if (run.exitedAt < stoppedAt + 2_900) expect(listed, timeline).toBe(true);
        // Read after it was more than 3.1 s old: dead.
        if (run.startedAt > stoppedAt + 3_100) expect(listed, timeline).toBe(false);
      }
      const firstGone = results.find(({ listed }) => !listed);
      expect(firstGone, timeline).toBeDefined();
      expect((firstGone?.run.startedAt ?? Number.POSITIVE_INFINITY) - stoppedAt, timeline).toBeLessThanOrEqual(3_500);
      // The joiner is unaffected.
      const { view: last } = await observe(key);
      expect(last.peers.map((peer) => peer.pid)).toEqual([joiner.proc.pid]);
      expect(last.peers[0]?.share_pct).toBe(100);

      await stopAll([joiner]);
    } finally {
      if (refresher !== null) clearInterval(refresher);
      closeSync(fd);
    }
  }, 30_000);

  it('bad flags exit 2 with one line naming the flag; --help exits 0', async () => {
    const key = uniqueKey('flags');
    const bad: { args: string[]; flag: string }[] = [
      { args: ['join', '--gpu-key', 'bad key'], flag: '--gpu-key' },
      { args: ['join', '--gpu-key', 'k'.repeat(41)], flag: '--gpu-key' },
      { args: ['join', '--gpu-key', key, '--weight', '0'], flag: '--weight' },
      { args: ['join', '--gpu-key', key, '--weight', '-1'], flag: '--weight' },
      { args: ['join', '--gpu-key', key, '--weight', 'abc'], flag: '--weight' },
      { args: ['join', '--gpu-key', key, '--weight', 'inf'], flag: '--weight' },
      { args: ['join', '--gpu-key', key, '--name', 'n'.repeat(48)], flag: '--name' },
      { args: ['join', '--gpu-key', key, '--name', '€'.repeat(16)], flag: '--name' },
      { args: ['peers', '--gpu-key', key, '--interval', '5'], flag: '--interval' },
    ];
    expect(Buffer.byteLength('€'.repeat(16), 'utf8')).toBe(48);
    const runs = await Promise.all(bad.map(({ args }) => runCli(args)));
    bad.forEach(({ args, flag }, i) => {
      const run = runs[i];
      if (run === undefined) throw new Error('missing run');
      const context = `gpu-share ${args.join(' ')}\n${run.stderr.join('\n')}`;
      expect(run.code, context).toBe(2);
      expect(run.signal).toBeNull();
      const stderrLines = run.stderr.filter((line) => line.trim() !== '');
      expect(stderrLines, context).toHaveLength(1);
      expect(stderrLines[0], context).toContain(flag);
      expect(run.stdout.filter((line) => line !== ''), context).toEqual([]);
    });
    // A rejected join created nothing.
    expect(() => statSync(segmentPath(key))).toThrow();

    // A name of 47 bytes (the most that fits) is accepted.
    const fits = await join(key, { name: 'n'.repeat(47), weight: 1, active: false });
    const { view } = await observe(key);
    expect(view.peers.map((peer) => peer.name)).toEqual(['n'.repeat(47)]);
    await stopAll([fits]);

    for (const command of ['join', 'peers']) {
      const run = await runCli([command, '--help']);
      expect(run.code, run.stderr.join('\n')).toBe(0);
      expect(run.stdout.join('\n')).toContain('--gpu-key');
    }
  });

  it('SIGINT frees the slot: exit 0 and the raw pid word is 0', async () => {
    const key = uniqueKey('sigint');
    const [keeper, leaver] = await joinInOrder(key, [
      { name: 'keeper', weight: 1, active: true },
      { name: 'leaver', weight: 1, active: true },
    ]);
    if (keeper === undefined || leaver === undefined) throw new Error('two peers expected');
    expect(leaver.boot.slot).toBe(1);
    expect(readSlotPid(key, 1)).toBe(leaver.proc.pid);

    leaver.proc.kill('SIGINT');
    expect(await leaver.proc.exitWithin(10_000)).toEqual({ code: 0, signal: null });
    expect(readSlotPid(key, 1)).toBe(0);
    expect(readSlotPid(key, 0)).toBe(keeper.proc.pid);
    const { view } = await observe(key);
    expect(view.peers.map((peer) => peer.name)).toEqual(['keeper']);

    await stopAll([keeper], 'SIGINT');
    expect(readSlotPid(key, 0)).toBe(0);
  });
  // Product bug: `join` writes its boot line before it installs the SIGINT/SIGTERM handlers
  // (electron/core/commands/join.ts: io.out(bootLogLine(...)) comes before untilStopSignal()), so a
  // supervisor that stops a peer as soon as it announced itself kills it by the default action
  // (exit by signal, not 0) and leaves the slot occupied until it is judged dead 3 s later.
  // Unskip once the handlers are installed before the boot line is printed.
  it('SIGTERM right after the boot line still frees the slot and exits 0', async () => {
    const key = uniqueKey('early');
    for (let i = 0; i < 5; i++) {
      const proc = startCli(['join', '--gpu-key', key, '--name', `early-${i}`]);
      const boot = parseBoot(key, await proc.waitForLine(bootLinePattern(key), 10_000));
      proc.kill('SIGTERM');
      expect(await proc.exitWithin(10_000)).toEqual({ code: 0, signal: null });
      expect(readSlotPid(key, boot.slot)).toBe(0);
    }
  });
});
