/**
 * A device per engine, through `gpu-share serve` on two simulated GPUs (the first nearly full):
 * the plan is made on the device asked for (else the profile's, else the one with the most free
 * memory), a rejection names the other device, and a launched engine runs with its device's UUID
 * in CUDA_VISIBLE_DEVICES (read from /proc/<pid>/environ) and holds a slot in that device's
 * registry, not the other's.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LaunchOutcome, PlacementPlan } from '../../electron/core/contract.js';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { BURN_ENGINE } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, startServe, state, until, type Served } from '../fixtures/serve.js';

const KEY_A = `GPU-devA-${process.pid}`;
const KEY_B = `GPU-devB-${process.pid}`;
let dir = '';
let served: Served;

/** The environment a process started with. */
function environOf(pid: number): Record<string, string> {
  const raw = readFileSync(`/proc/${pid}/environ`, 'utf8');
  return Object.fromEntries(
    raw
      .split('\0')
      .filter((entry) => entry.includes('='))
      .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]),
  );
}

async function peersOf(key: string): Promise<{ pid: number; name: string }[]> {
  const view = (await call<GpuPeersView>(served, 'GET', `/gpu/peers?gpu_key=${key}`, undefined, null)).body;
  return [...(view.self === null ? [] : [view.self]), ...view.peers];
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-devices-'));
  writeGguf(join(dir, 'tiny.gguf'), TINY_GGUF_SPEC);
  const sim = join(dir, 'sim.json');
  writeFileSync(
    sim,
    JSON.stringify({
      devices: [
        { key: KEY_A, name: 'Sim A 24GB', totalBytes: 24 * GiB, usedBytes: 23 * GiB, processes: null, health: 'OK' },
        { key: KEY_B, name: 'Sim B 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' },
      ],
    }),
  );
  // A command profile is the local user's to make (never over HTTP): written before serve starts.
  const burner = { id: 'burner', name: 'burner', capabilities: ['burn'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--duration-s', '60'], contextSize: 256, priority: 'background', gpuKey: KEY_B };
  served = await startServe({ dataDir: join(dir, 'data'), sim, profiles: [burner] });
  const tiny = { id: 'tiny', name: 'tiny', capabilities: ['chat'], engineKind: 'builtin', modelPath: join(dir, 'tiny.gguf'), contextSize: 256, threads: 1, priority: 'interactive' };
  expect((await call(served, 'POST', '/api/profiles', tiny)).status).toBe(201);
}, 30_000);

afterAll(async () => {
  await served?.stop();
  removeSegment(KEY_A);
  removeSegment(KEY_B);
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe('a device per engine', () => {
  it('plans on the device asked for; a full first device names the second, which has room', async () => {
    const onA = await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'tiny', gpuKey: KEY_A });
    expect(onA.status).toBe(200);
    expect(onA.body.accelerator.key).toBe(KEY_A);
    expect(onA.body.verdict).toBe('REJECT_CAPACITY');
    expect(onA.body.elsewhere).toMatchObject({ key: KEY_B, name: 'Sim B 24GB', index: 1, verdict: 'ADMIT' });
    const onB = await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'tiny', gpuKey: KEY_B });
    expect(onB.body.accelerator).toEqual({ key: KEY_B, name: 'Sim B 24GB' });
    expect(onB.body.verdict).toBe('ADMIT');
  });

  it('without a device: the profile\'s preferred one, else the one with the most free memory (not the first)', async () => {
    expect((await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'tiny' })).body.accelerator.key).toBe(KEY_B);
    expect((await call(served, 'PUT', '/api/profiles/tiny', { gpuKey: KEY_A })).status).toBe(200);
    expect((await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'tiny' })).body.accelerator.key).toBe(KEY_A);
    expect((await call(served, 'PUT', '/api/profiles/tiny', { gpuKey: null })).status).toBe(200);
  });

  it('refuses a device that is not there, or not a key, naming gpuKey', async () => {
    const missing = await call<{ error: { code: string; message: string; field?: string } }>(served, 'POST', '/api/plan', { profileId: 'tiny', gpuKey: 'GPU-not-here' });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toContain('gpuKey');
    expect(missing.body.error.message).toContain(KEY_B);
    const malformed = await call<{ error: { message: string } }>(served, 'POST', '/api/engines', { profileId: 'tiny', gpuKey: 'GPU 1/..' });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.message).toContain('gpuKey');
    expect((await call(served, 'PUT', '/api/profiles/tiny', { gpuKey: '../x' })).status).toBe(400);
  });

  it('runs the built-in engine pinned to the second GPU by its UUID, in the second GPU\'s registry', async () => {
    const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: 'tiny', gpuKey: KEY_B });
    expect(launched.status, JSON.stringify(launched.body)).toBe(202);
    const engine = launched.body.engine;
    if (engine === null) throw new Error('not launched');
    expect(engine.gpuKey).toBe(KEY_B);
    expect(environOf(engine.pid)['CUDA_VISIBLE_DEVICES']).toBe(KEY_B);
    const running = await until(async () => (await state(served)).engines.find((e) => e.id === engine.id && e.state === 'running'), 30_000, 'the tiny engine running');
    expect(running.gpuKey).toBe(KEY_B);
    await until(async () => ((await peersOf(KEY_B)).some((p) => p.pid === engine.pid) ? true : undefined), 10_000, 'its slot in the second GPU\'s registry');
    expect((await peersOf(KEY_A)).some((p) => p.pid === engine.pid)).toBe(false);
    // The state shows it among the second device's peers, and its slot.
    const devices = (await state(served)).devices;
    expect(devices.find((d) => d.key === KEY_B)?.peers.find((p) => p.pid === engine.pid)?.engineId).toBe(engine.id);
    expect(devices.find((d) => d.key === KEY_A)?.peers.some((p) => p.pid === engine.pid)).toBe(false);
    expect((await call(served, 'POST', `/api/engines/${engine.id}/stop`)).status).toBe(200);
  }, 60_000);

  it('runs a command engine under the process gate pinned the same way: the engine itself, not only its pacer', async () => {
    // No device asked for: the profile's preferred one.
    const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: 'burner' });
    expect(launched.status, JSON.stringify(launched.body)).toBe(202);
    const peer = await until(async () => (await peersOf(KEY_B)).find((p) => p.name === 'burner'), 15_000, 'the burner in the second GPU\'s registry');
    // The slot's pid is the engine process `gpu-share run` started.
    expect(peer.pid).not.toBe(launched.body.engine?.pid);
    expect(environOf(peer.pid)['CUDA_VISIBLE_DEVICES']).toBe(KEY_B);
    expect((await peersOf(KEY_A)).some((p) => p.name === 'burner')).toBe(false);
    expect((await call(served, 'POST', `/api/engines/${launched.body.engine?.id ?? ''}/stop`)).status).toBe(200);
  }, 60_000);
});
