/** `gpu-share launch` and `gpu-share engines` end to end, on simulated telemetry; `--version` and
 *  the bare command. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProfileStore } from '../../electron/core/engines/profiles.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { BURN_ENGINE, childrenOf, CLI, exitOf, ROOT, until } from '../fixtures/procs.js';
import { call, startServe } from '../fixtures/serve.js';
import { removeSegment } from '../fixtures/segments.js';

let dir = '';
let model = '';
let sim = '';
let dataDir = '';
const children: ChildProcess[] = [];
const KEY = `GPU-launch-${process.pid}`;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-launch-'));
  model = join(dir, 'tiny.gguf');
  writeGguf(model, TINY_GGUF_SPEC);
  sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: [], health: 'OK' }] }));
  dataDir = join(dir, 'data');
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

function cli(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function launch(args: string[]): Promise<{ child: ChildProcess; running: string; stderr: string[] }> {
  const child = spawn(process.execPath, [CLI, 'launch', '--sim', sim, '--data-dir', dataDir, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const stderr: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => stderr.push(line));
  const running = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => line.startsWith('running:') && resolve(line));
    child.once('exit', (code) => reject(new Error(`launch exited ${code}:\n${stderr.join('\n')}`)));
  });
  return { child, running, stderr };
}

/** A port nobody listens on right now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('gpu-share launch', () => {
  it('launches the built-in engine on a model at the --port asked, lists it, shows it in peers, and says "stopped" on SIGINT', async () => {
    const port = await freePort();
    const { child, running, stderr } = await launch(['--model', model, '--ctx', '256', '--threads', '1', '--port', String(port)]);
    expect(running).toMatch(new RegExp(`^running: tiny \\(builtin, pid \\d+, weight 3\\) at http://127\\.0\\.0\\.1:${port};`));
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    const engines = JSON.parse(cli(['engines', '--data-dir', dataDir, '--json']).stdout) as { engines: { name: string; kind: string }[] };
    expect(engines.engines).toEqual([expect.objectContaining({ name: 'tiny', kind: 'builtin' })]);
    const peers = JSON.parse(cli(['peers', '--gpu-key', KEY, '--json']).stdout) as { peers: { name: string }[] };
    expect(peers.peers.map((p) => p.name)).toContain('tiny');
    child.kill('SIGINT');
    expect((await exitOf(child)).code).toBe(0);
    expect(stderr.at(-1)).toBe('stopped tiny');
    expect(cli(['engines', '--data-dir', dataDir]).stdout).toContain('no engines running');
    expect(cli(['engines', '--data-dir', dataDir]).stdout).not.toContain('no such folder');
    expect(cli(['engines', '--data-dir', join(dataDir, 'typo')]).stdout).toContain(`no engines running in ${join(dataDir, 'typo')} (no such folder`);
  });

  it('refuses --port for an engine that picks its own, naming the flag', () => {
    const store = new ProfileStore({ dataDir });
    if (store.get('burner-port') === undefined) store.create({ id: 'burner-port', name: 'burner-port', capabilities: ['chat'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE], contextSize: 1, priority: 'background' });
    const refused = cli(['launch', 'burner-port', '--port', '9000', '--sim', sim, '--data-dir', dataDir]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--port');
    expect(cli(['launch', '--model', model, '--port', '70000', '--sim', sim, '--data-dir', dataDir]).code).toBe(2);
  });

  it('lists the engines of a running serve for the same data folder, and none once it stops', async () => {
    const serveData = join(dir, 'serve-data');
    const served = await startServe({ dataDir: serveData, sim, profiles: [{ id: 'served-burner', name: 'served-burner', capabilities: ['burn'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--duration-s', '30'], contextSize: 256, priority: 'background' }] });
    try {
      expect((await call(served, 'POST', '/api/engines', { profileId: 'served-burner' })).status).toBe(202);
      const listed = await until(() => {
        const engines = (JSON.parse(cli(['engines', '--data-dir', serveData, '--json']).stdout) as { engines: { name: string; kind: string; supervisorPid: number }[] }).engines;
        return engines.length > 0 ? engines : undefined;
      }, 10_000, 'the served engine listed');
      expect(listed).toEqual([expect.objectContaining({ name: 'served-burner', kind: 'command', supervisorPid: served.child.pid })]);
      expect(cli(['engines', '--data-dir', serveData]).stdout).toContain('served-burner');
    } finally {
      await served.stop();
    }
    expect(cli(['engines', '--data-dir', serveData]).stdout).toContain('no engines running');
  }, 40_000);
});

describe('gpu-share itself', () => {
  it('prints its version, and its help on stdout when run bare', () => {
    const version = cli(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
    const bare = cli([]);
    expect(bare.code).toBe(0);
    expect(bare.stdout).toContain('Usage: gpu-share');
    expect(bare.stdout).toContain('launch');
    expect(bare.stderr).toBe('');
  });

  it('launches a command profile under the process gate', async () => {
    const store = new ProfileStore({ dataDir });
    store.create({ id: 'burner', name: 'burner', capabilities: ['chat'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--token-ms', '2', '--duration-s', '30'], contextSize: 1, priority: 'background' });
    const { child, running } = await launch(['burner']);
    expect(running).toMatch(/^running: burner \(command, pid \d+, weight 1\)/);
    child.kill('SIGTERM');
    expect((await exitOf(child)).code).toBe(0);
  });

  it("counts an engine that launch runs for the same data folder as managed in plan's breakdown, not as external", async () => {
    const store = new ProfileStore({ dataDir });
    store.create({ id: 'held', name: 'held', capabilities: ['chat'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--token-ms', '2', '--duration-s', '30'], contextSize: 1, priority: 'background' });
    const { child, running } = await launch(['held']);
    const enginePid = Number(/pid (\d+)/.exec(running)?.[1]);
    // The engine's pid is its `gpu-share run` supervisor; the memory is held by the command under
    // it, as the driver would list a llama-server: 3 GiB there, beside 1 GiB of someone else's.
    const command = await until(() => childrenOf(enginePid).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('burn')), 10_000, 'the command under run');
    writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 4 * GiB, processes: [{ pid: command, usedBytes: 3 * GiB }, { pid: 999_999, usedBytes: 1 * GiB }], health: 'OK' }] }));
    try {
      const planned = cli(['plan', '--model', model, '--ctx', '256', '--sim', sim, '--data-dir', dataDir, '--json']);
      const breakdown = (JSON.parse(planned.stdout) as { breakdown: { managedResidentBytes: number; unmanagedExternalBytes: number } }).breakdown;
      expect(breakdown.managedResidentBytes).toBe(3 * GiB);
      expect(breakdown.unmanagedExternalBytes).toBe(1 * GiB);
      // Another data folder knows nothing of it: all of it is external there.
      const elsewhere = JSON.parse(cli(['plan', '--model', model, '--ctx', '256', '--sim', sim, '--data-dir', join(dir, 'other-data'), '--json']).stdout) as { breakdown: { managedResidentBytes: number; unmanagedExternalBytes: number } };
      expect(elsewhere.breakdown.managedResidentBytes).toBe(0);
      expect(elsewhere.breakdown.unmanagedExternalBytes).toBe(4 * GiB);
    } finally {
      writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: [], health: 'OK' }] }));
      child.kill('SIGTERM');
      await exitOf(child);
    }
  });

  it('prints the plan and exits 4 when the model cannot fit; names a missing profile', () => {
    const full = join(dir, 'full.json');
    writeFileSync(full, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 23.5 * GiB, processes: [], health: 'OK' }] }));
    const rejected = cli(['launch', '--model', model, '--ctx', '256', '--sim', full, '--data-dir', dataDir]);
    expect(rejected.code).toBe(4);
    expect(rejected.stdout).toContain('verdict: REJECT_CAPACITY');
    const missing = cli(['launch', 'nope', '--sim', sim, '--data-dir', dataDir]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no profile "nope"');
    expect(cli(['launch', '--sim', sim, '--data-dir', dataDir]).code).toBe(2);
  });

  it('launches on --gpu N, pinned there; a full device names the other, which has room; --gpu past the last device is a usage error', async () => {
    const keyB = `GPU-launchB-${process.pid}`;
    const two = join(dir, 'two.json');
    writeFileSync(two, JSON.stringify({ devices: [{ key: KEY, name: 'Sim A 24GB', totalBytes: 24 * GiB, usedBytes: 23.5 * GiB, processes: [], health: 'OK' }, { key: keyB, name: 'Sim B 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: [], health: 'OK' }] }));
    try {
      const rejected = cli(['launch', '--model', model, '--ctx', '256', '--gpu', '0', '--sim', two, '--data-dir', dataDir]);
      expect(rejected.code).toBe(4);
      expect(rejected.stdout).toContain(`device: Sim A 24GB [${KEY}]`);
      expect(rejected.stdout).toContain(`elsewhere: launch it on GPU 1 "Sim B 24GB", which has room [${keyB}]`);
      expect(cli(['launch', '--model', model, '--gpu', '2', '--sim', two, '--data-dir', dataDir]).stderr).toContain('--gpu 2: there is no device 2');
      const child = spawn(process.execPath, [CLI, 'launch', '--model', model, '--ctx', '256', '--threads', '1', '--gpu', '1', '--sim', two, '--data-dir', dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      const running = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).on('line', (line) => line.startsWith('running:') && resolve(line));
        child.once('exit', (code) => reject(new Error(`launch exited ${code}`)));
      });
      const pid = Number(/pid (\d+)/.exec(running)?.[1]);
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      expect(environ).toContain(`CUDA_VISIBLE_DEVICES=${keyB}`);
      const engines = JSON.parse(cli(['engines', '--data-dir', dataDir, '--json']).stdout) as { engines: { pid: number; gpuKey: string }[] };
      expect(engines.engines.find((e) => e.pid === pid)?.gpuKey).toBe(keyB);
      const peers = JSON.parse(cli(['peers', '--gpu-key', keyB, '--json']).stdout) as { peers: { pid: number }[] };
      expect(peers.peers.map((p) => p.pid)).toContain(pid);
      child.kill('SIGTERM');
      expect((await exitOf(child)).code).toBe(0);
    } finally {
      removeSegment(keyB);
    }
  }, 40_000);
});
