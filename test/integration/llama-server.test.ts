/**
 * A real llama.cpp llama-server (built by `npm run llama-server:build`, found in its cache or through
 * LLAMA_SERVER) under `gpu-share run` and through `gpu-share launch` with a llama-server profile.
 * Without one these tests are skipped locally with one line; in CI (CI set) they fail.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProfileStore } from '../../electron/core/engines/profiles.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { writeGguf } from '../fixtures/gguf.js';
import { findLlamaServer, freePort, LLAMA_SERVER_HINT, llamaServerArgs, streamCompletion, waitHealthy } from '../fixtures/llama-server.js';
import { CLI, exitOf, hasTaskset } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';

const server = await findLlamaServer();
const inCi = process.env['CI'] !== undefined && process.env['CI'] !== '';
if (server === null && !inCi) console.log(`real llama-server tests skipped: no llama-server here; ${LLAMA_SERVER_HINT}`);

let dir = '';
let model = '';
const children: ChildProcess[] = [];
const keys: string[] = [];
const wallUs = (): number => Date.now() * 1000;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-llama-'));
  model = join(dir, 'model.gguf');
  // ~2 ms tokens on one core: long enough that a token is mostly decoding, not HTTP.
  writeGguf(model, { embedding: 512, layers: 6, contextLength: 1024, feedForward: 1024, heads: 8, vocab: 512, type: 'f16', seed: 3 });
});
afterAll(() => {
  for (const key of keys) removeSegment(key);
  rmSync(dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exitOf(child);
      clearTimeout(timer);
    }
  }
});

/** Streams back-to-back requests until stopped; `decoded()` is the server's own running count. */
function client(port: number): { decoded: () => number; stop: () => void } {
  const controller = new AbortController();
  let done = 0;
  let current = 0;
  void (async () => {
    while (!controller.signal.aborted) {
      const result = await streamCompletion(port, 200, wallUs, { signal: controller.signal, onChunk: (_at, n) => (current = n) }).catch(() => ({ tokens: 0 }));
      done += result.tokens;
      current = 0;
    }
  })();
  return { decoded: () => done + current, stop: () => controller.abort() };
}

describe.skipIf(server === null && !inCi)('a real llama-server', () => {
  it('is there (CI builds it in .ci/run)', () => {
    expect(server, `no llama-server: ${LLAMA_SERVER_HINT}`).not.toBeNull();
  });

  it.skipIf(!hasTaskset)('two under gpu-share run at 2:1 on one core decode about 2:1 by their own counts', async () => {
    if (server === null) throw new Error(LLAMA_SERVER_HINT);
    const key = `llama-run-${process.pid}`;
    keys.push(key);
    const ports = [await freePort(), await freePort()];
    ports.forEach((port, i) => {
      // Supervisors on core 1, servers on core 0: the core stands in for one device.
      const argv = ['taskset', '-c', '1', process.execPath, CLI, 'run', '--gpu-key', key, '--weight', String(2 - i), '--name', `llama-${i}`, '--activity-url', `http://127.0.0.1:${port}/metrics`, '--', 'taskset', '-c', '0', server, ...llamaServerArgs({ model, port, ctx: 1024, threads: 1, gpuLayers: 0 })];
      children.push(spawn(argv[0] ?? 'taskset', argv.slice(1), { stdio: ['ignore', 'ignore', 'ignore'] }));
    });
    await Promise.all(ports.map((port, i) => waitHealthy(port, children[i] as ChildProcess, 60_000)));
    // Each warmed alone, then idle long enough for the registry to see it.
    for (const port of ports) expect((await streamCompletion(port, 400, wallUs)).tokens).toBe(400);
    await new Promise((r) => setTimeout(r, 2_500));
    const clients = ports.map(client);
    try {
      await new Promise((r) => setTimeout(r, 2_000));
      const from = clients.map((c) => c.decoded());
      await new Promise((r) => setTimeout(r, 8_000));
      const decoded = clients.map((c, i) => c.decoded() - (from[i] ?? 0));
      const ratio = (decoded[0] ?? 0) / Math.max(1, decoded[1] ?? 0);
      expect(decoded[1]).toBeGreaterThan(50);
      expect(ratio, `tokens ${decoded.join(' / ')}`).toBeGreaterThan(1.5);
      expect(ratio, `tokens ${decoded.join(' / ')}`).toBeLessThan(2.7);
    } finally {
      for (const c of clients) c.stop();
    }
  }, 120_000);

  it('launch with a llama-server profile runs it paced: it answers, sits in the registry, and stops on SIGINT', async () => {
    if (server === null) throw new Error(LLAMA_SERVER_HINT);
    const key = `GPU-llama-launch-${process.pid}`;
    keys.push(key);
    const sim = join(dir, 'sim.json');
    writeFileSync(sim, JSON.stringify({ devices: [{ key, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: [], health: 'OK' }] }));
    const dataDir = join(dir, 'launch-data');
    new ProfileStore({ dataDir }).create({ id: 'llama', name: 'llama', capabilities: ['chat'], engineKind: 'llama-server', command: server, modelPath: model, args: ['-t', '1', '--host', '127.0.0.1'], contextSize: 512, gpuLayers: 0, priority: 'interactive' });
    const port = await freePort();
    const child = spawn(process.execPath, [CLI, 'launch', 'llama', '--port', String(port), '--api-key', 'launch-test-key', '--sim', sim, '--data-dir', dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    const stderr: string[] = [];
    createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (line) => stderr.push(line));
    const running = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => line.startsWith('running:') && resolve(line));
      child.once('exit', (code) => reject(new Error(`launch exited ${code}:\n${stderr.join('\n')}`)));
    });
    expect(running).toMatch(/^running: llama \(llama-server, pid \d+/);
    // `launch --api-key KEY` protects the engine's port as llama-server's own flag does: it
    // refuses anyone without the key, and decodes for whoever has it.
    await expect(streamCompletion(port, 32, wallUs)).rejects.toThrow('answered 401');
    expect((await streamCompletion(port, 32, wallUs, { apiKey: 'launch-test-key' })).tokens).toBe(32);
    const peers = JSON.parse(spawnSync(process.execPath, [CLI, 'peers', '--gpu-key', key, '--json'], { encoding: 'utf8' }).stdout) as { peers: { name: string }[] };
    expect(peers.peers.map((p) => p.name)).toContain('llama');
    child.kill('SIGINT');
    expect((await exitOf(child)).code).toBe(0);
    await expect(fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2_000) })).rejects.toThrow();
  }, 120_000);
});
