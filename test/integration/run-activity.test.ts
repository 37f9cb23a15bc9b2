/** `gpu-share run` recognises a llama.cpp server on its command line and judges its activity by
 *  the server's /metrics: a stand-in llama-server that reports a request in flight while burning
 *  no CPU reads active only through its metrics. */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLI, FAKE_LLAMA_SERVER, exitOf, spawnNode, until } from '../fixtures/procs.js';
import { removeSegment, testKey } from '../fixtures/segments.js';

const children: ChildProcess[] = [];
const keys: string[] = [];
let dir = '';
let llamaServer = '';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function peer(gpuKey: string, name: string): { active: boolean } | undefined {
  const r = spawnSync(process.execPath, [CLI, 'peers', '--gpu-key', gpuKey, '--json'], { encoding: 'utf8', timeout: 10_000 });
  return (JSON.parse(r.stdout) as { peers: { name: string; active: boolean }[] }).peers.find((p) => p.name === name);
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-activity-'));
  // Named as llama-server is, so that `run` recognises it.
  llamaServer = join(dir, 'llama-server');
  writeFileSync(llamaServer, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_LLAMA_SERVER}" "$@"\n`, { mode: 0o755 });
});

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exitOf(child);
    }
  }
  for (const k of keys.splice(0)) removeSegment(k);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function runServer(name: string, serverArgs: string[]): Promise<{ gpuKey: string; stderr: () => string }> {
  const gpuKey = testKey(name);
  keys.push(gpuKey);
  const child = spawnNode([CLI, 'run', '--gpu-key', gpuKey, '--name', name, '--', llamaServer, ...serverArgs]);
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  await until(() => stderr.includes('joined'), 10_000, 'the boot line');
  return { gpuKey, stderr: () => stderr };
}

describe('`gpu-share run` and a llama.cpp server', () => {
  it('recognises llama-server by --port, adds --metrics, sends its API key, and reads activity from its metrics', async () => {
    const port = await freePort();
    const { gpuKey, stderr } = await runServer('srv', ['-m', 'x.gguf', '--port', String(port), '--api-key', 'sekrit', '--processing', '1', '--load-ms', '0']);
    expect(stderr()).toContain(`activity: llama.cpp metrics at http://127.0.0.1:${port}/metrics (detected from --port/--host)`);
    // It burns no CPU: only its metrics (served only with --metrics, and only with the key) say it works.
    await until(() => peer(gpuKey, 'srv')?.active === true, 5_000, 'the server to read active', 200);
  });

  it('a server that reports nothing in flight stays idle', async () => {
    const port = await freePort();
    const { gpuKey, stderr } = await runServer('quiet', ['--port', String(port), '--load-ms', '0']);
    expect(stderr()).toContain('activity: llama.cpp metrics at');
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(peer(gpuKey, 'quiet')?.active).toBe(false);
  });

  it('says CPU time when the command line names no server', async () => {
    const { stderr } = await runServer('plain', ['-m', 'x.gguf']);
    expect(stderr()).toContain('activity: CPU time of the process tree');
  });
});
