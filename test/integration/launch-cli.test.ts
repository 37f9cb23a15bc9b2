/** `gpu-share launch` and `gpu-share engines` end to end, on simulated telemetry. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProfileStore } from '../../electron/core/engines/profiles.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { BURN_ENGINE, CLI, exitOf } from '../fixtures/procs.js';
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

async function launch(args: string[]): Promise<{ child: ChildProcess; running: string }> {
  const child = spawn(process.execPath, [CLI, 'launch', '--sim', sim, '--data-dir', dataDir, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const running = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => line.startsWith('running:') && resolve(line));
    child.once('exit', (code) => reject(new Error(`launch exited ${code}`)));
  });
  return { child, running };
}

describe('gpu-share launch', () => {
  it('launches the built-in engine on a model, lists it, shows it in peers, and stops on SIGINT', async () => {
    const { child, running } = await launch(['--model', model, '--ctx', '256', '--threads', '1']);
    expect(running).toMatch(/^running: tiny \(builtin, pid \d+, weight 3\) at http:\/\/127\.0\.0\.1:\d+/);
    const engines = JSON.parse(cli(['engines', '--data-dir', dataDir, '--json']).stdout) as { engines: { name: string; kind: string }[] };
    expect(engines.engines).toEqual([expect.objectContaining({ name: 'tiny', kind: 'builtin' })]);
    const peers = JSON.parse(cli(['peers', '--gpu-key', KEY, '--json']).stdout) as { peers: { name: string }[] };
    expect(peers.peers.map((p) => p.name)).toContain('tiny');
    child.kill('SIGINT');
    expect((await exitOf(child)).code).toBe(0);
    expect(cli(['engines', '--data-dir', dataDir]).stdout).toContain('no engines running');
  });

  it('launches a command profile under the process gate', async () => {
    const store = new ProfileStore({ dataDir });
    store.create({ id: 'burner', name: 'burner', capabilities: ['chat'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--token-ms', '2', '--duration-s', '30'], contextSize: 1, priority: 'background' });
    const { child, running } = await launch(['burner']);
    expect(running).toMatch(/^running: burner \(command, pid \d+, weight 1\)/);
    child.kill('SIGTERM');
    expect((await exitOf(child)).code).toBe(0);
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
});
