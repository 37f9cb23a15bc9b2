/**
 * Whole process trees under the process gate, with real processes: a command under two shells is
 * paced and measured as one tree, and nothing of a tree (grandchildren, and a descendant that left
 * the process group with setsid) survives a SIGKILL of `gpu-share run`, of `launch` or of `serve`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProfileStore } from '../../electron/core/engines/profiles.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { BURN_ENGINE, CLI, childrenOf, exitOf, procState, spawnNode, until } from '../fixtures/procs.js';
import { removeSegment, testKey } from '../fixtures/segments.js';
import { call, startServe, type Served } from '../fixtures/serve.js';

const children: ChildProcess[] = [];
const keys: string[] = [];
/** Every process a test's trees held, ended after it whatever happened. */
const seen = new Set<number>();
let dir = '';
/** sh → sh → the command given: three levels. */
let chainScript = '';
/** sh → sh → the command given, a sleeper, a sleeper that ignores SIGTERM (only SIGKILL after the
 *  grace ends it), and a sleeper that left the group (setsid). */
let treeScript = '';
let iterations = 0;

function start(args: string[], pin = true): ChildProcess {
  const child = spawnNode(args, pin);
  children.push(child);
  return child;
}

function key(prefix: string): string {
  const k = testKey(prefix);
  keys.push(k);
  return k;
}

const commandLine = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
};

/** Every descendant of `pid` found by ancestry (Linux), but the pacing watchdogs (which outlive
 *  their supervisor by design, for the grace). */
function descendants(pid: number): number[] {
  const found: number[] = [];
  const queue = [...childrenOf(pid)];
  while (queue.length > 0) {
    const next = queue.shift() as number;
    if (commandLine(next).includes('gpushare-watchdog')) continue;
    found.push(next);
    queue.push(...childrenOf(next));
  }
  for (const p of found) seen.add(p);
  return found;
}

/** The burn engine itself (the shells above it name it in their arguments too). */
const isWorker = (pid: number): boolean => commandLine(pid).startsWith(`${process.execPath} ${BURN_ENGINE}`);

const parentOf = (pid: number): number => {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[1]);
};

/** Running (or stopped): a zombie has exited (this machine's init may never reap it). */
const isAlive = (pid: number): boolean => {
  const state = procState(pid);
  return state !== null && state !== 'Z' && state !== 'X';
};

const sessionOf = (pid: number): number => {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[3]);
};

/** The tree's members once all of them exist: the shells, the worker, the sleepers. */
async function treeBelow(rootPid: number, expected: number): Promise<number[]> {
  return until(() => {
    const tree = descendants(rootPid);
    return tree.length >= expected && tree.some((pid) => commandLine(pid).startsWith('sleep 121')) ? tree : null;
  }, 15_000, `${expected} processes below ${rootPid}`, 50);
}

/** Asserts that, within 5 s of `killedAt`, no process of `tree` runs and none is stopped. */
async function expectTreeGone(tree: number[], killedAt: number): Promise<void> {
  const deadline = killedAt + 5_000;
  while (Date.now() < deadline && tree.some(isAlive)) await new Promise((resolve) => setTimeout(resolve, 50));
  const left = tree.filter(isAlive).map((pid) => `${pid} ${procState(pid)} ${commandLine(pid)}`);
  expect(left).toEqual([]);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-tree-'));
  chainScript = join(dir, 'chain.sh');
  writeFileSync(chainScript, `#!/bin/sh\nsh -c '"$@"; echo inner done' inner "$@"\necho outer done\n`);
  treeScript = join(dir, 'tree.sh');
  writeFileSync(treeScript, `#!/bin/sh\nsh -c '"$@" & setsid sleep 121 & sleep 120 & (trap "" TERM; exec sleep 122) & wait' inner "$@"\necho outer done\n`);
  for (const script of [chainScript, treeScript]) chmodSync(script, 0o755);
  const calibration = start([BURN_ENGINE, '--calibrate', '--token-ms', '5']);
  let out = '';
  calibration.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await exitOf(calibration);
  iterations = (JSON.parse(out) as { iterations: number }).iterations;
});

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      if (child.pid !== undefined) descendants(child.pid);
      child.kill('SIGKILL');
      await exitOf(child);
    }
  }
  for (const pid of seen) {
    try {
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  seen.clear();
  for (const k of keys.splice(0)) removeSegment(k);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Share of samples (every ~5 ms for `ms`) in which `pid` was stopped. */
async function stoppedShare(pid: number, ms: number): Promise<number> {
  let stopped = 0;
  let samples = 0;
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const state = procState(pid);
    if (state === null) break;
    samples++;
    if (state === 'T') stopped++;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  expect(samples).toBeGreaterThan(50);
  return stopped / samples;
}

/** CPU time of all of a process's threads, ns (schedstat). */
function cpuNs(pid: number): number {
  let total = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread exited
    }
  }
  return total;
}

function busyPct(gpuKey: string, name: string): number {
  const r = spawnSync(process.execPath, [CLI, 'peers', '--gpu-key', gpuKey, '--json'], { encoding: 'utf8', timeout: 10_000 });
  const peers = (JSON.parse(r.stdout) as { peers: { name: string; busy_pct: number }[] }).peers;
  return peers.find((peer) => peer.name === name)?.busy_pct ?? Number.NaN;
}

describe.skipIf(process.platform !== 'linux')('process trees under `gpu-share run`', () => {
  it('a worker two shells below the command is paced against a busy heavier peer, and the busy figure is the tree’s', async () => {
    const k = key('tree');
    start([BURN_ENGINE, '--mode', 'coop', '--gpu-key', k, '--weight', '3', '--iterations', String(iterations), '--duration-s', '30']);
    const supervisor = start([CLI, 'run', '--gpu-key', k, '--weight', '1', '--name', 'tree', '--', chainScript, process.execPath, BURN_ENGINE, '--mode', 'unaware', '--iterations', String(iterations), '--duration-s', '30']);
    const worker = await until(() => descendants(supervisor.pid ?? 0).find((pid) => isWorker(pid)), 10_000, 'the worker');
    // Three levels: sh (the command) → sh → the worker.
    expect(parentOf(parentOf(parentOf(worker)))).toBe(supervisor.pid);
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // activity shows, pacing starts
    const paced = await stoppedShare(worker, 2_500);
    // Weight 1 against 3: outside its window ~75 % of the time.
    expect(paced).toBeGreaterThanOrEqual(0.5);
    // The busy figure (CPU over the last second) is the worker's: the shells burn nothing.
    const before = cpuNs(worker);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const workerPct = (cpuNs(worker) - before) / 1e7;
    const busy = busyPct(k, 'tree');
    expect(workerPct).toBeGreaterThan(1);
    expect(busy).toBeGreaterThan(workerPct / 2);
    expect(busy).toBeLessThan(workerPct * 2);
  });

  it('the same tree alone (no other busy peer) is never stopped', async () => {
    const k = key('alone');
    const supervisor = start([CLI, 'run', '--gpu-key', k, '--weight', '1', '--name', 'tree', '--', chainScript, process.execPath, BURN_ENGINE, '--mode', 'unaware', '--iterations', String(iterations), '--duration-s', '30']);
    const worker = await until(() => descendants(supervisor.pid ?? 0).find((pid) => isWorker(pid)), 10_000, 'the worker');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await stoppedShare(worker, 1_500)).toBeLessThan(0.05);
    const before = cpuNs(worker);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const workerPct = (cpuNs(worker) - before) / 1e7;
    const busy = busyPct(k, 'tree');
    expect(busy).toBeGreaterThan(workerPct / 2);
    expect(busy).toBeLessThan(workerPct * 2);
  });

  it('nothing of the tree is left 5 s after `gpu-share run` is SIGKILLed while it is stopped', async () => {
    const k = key('runkill');
    start([BURN_ENGINE, '--mode', 'coop', '--gpu-key', k, '--weight', '9', '--iterations', String(iterations), '--duration-s', '30']);
    const supervisor = start([CLI, 'run', '--gpu-key', k, '--weight', '1', '--', treeScript, process.execPath, BURN_ENGINE, '--mode', 'unaware', '--iterations', String(iterations), '--duration-s', '60']);
    const tree = await treeBelow(supervisor.pid ?? 0, 6);
    const worker = tree.find((pid) => isWorker(pid)) ?? 0;
    const escaped = tree.find((pid) => commandLine(pid).startsWith('sleep 121')) ?? 0;
    expect(sessionOf(escaped)).toBe(escaped); // it left the group (and the session)
    await until(() => procState(worker) === 'T' && procState(escaped) === 'T', 10_000, 'the worker and the escaped sleeper to be suspended', 1);
    supervisor.kill('SIGKILL');
    await expectTreeGone(tree, Date.now());
  });
});

describe.skipIf(process.platform !== 'linux')('process trees under a supervisor', () => {
  const launchKey = `GPU-tree-${process.pid}`;
  let sim = '';
  let dataDir = '';
  beforeAll(() => {
    sim = join(dir, 'sim.json');
    writeFileSync(sim, JSON.stringify({ devices: [{ key: launchKey, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: [], health: 'OK' }] }));
    dataDir = join(dir, 'data');
    keys.push(launchKey);
  });
  afterAll(() => removeSegment(launchKey));

  const profile = (id: string): { id: string; name: string; capabilities: string[]; engineKind: 'command'; command: string; args: string[]; contextSize: number; priority: 'background' } => ({
    id,
    name: id,
    capabilities: ['chat'],
    engineKind: 'command',
    command: treeScript,
    args: [process.execPath, BURN_ENGINE, '--mode', 'unaware', '--token-ms', '2', '--duration-s', '60'],
    contextSize: 1,
    priority: 'background',
  });

  it('nothing of an engine’s tree is left 5 s after `gpu-share launch` is SIGKILLed', async () => {
    new ProfileStore({ dataDir }).create(profile('launched'));
    const launch = spawn(process.execPath, [CLI, 'launch', 'launched', '--sim', sim, '--data-dir', dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(launch);
    await new Promise<string>((resolve, reject) => {
      createInterface({ input: launch.stdout }).on('line', (line) => line.startsWith('running:') && resolve(line));
      launch.once('exit', (code) => reject(new Error(`launch exited ${code}`)));
    });
    // launch → gpu-share run → the tree.
    const tree = await treeBelow(launch.pid ?? 0, 7);
    launch.kill('SIGKILL');
    await expectTreeGone(tree, Date.now());
  });

  it('nothing of an engine’s tree is left 5 s after `gpu-share serve` is SIGKILLed', async () => {
    // A command profile is the local user's to make: written before serve starts.
    const served: Served = await startServe({ dataDir: join(dir, 'serve-data'), sim, profiles: [profile('served')] });
    children.push(served.child);
    expect((await call(served, 'POST', '/api/engines', { profileId: 'served' })).status).toBe(202);
    const tree = await treeBelow(served.child.pid ?? 0, 7);
    served.child.kill('SIGKILL');
    await expectTreeGone(tree, Date.now());
  });
});
