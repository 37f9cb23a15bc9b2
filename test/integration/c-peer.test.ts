/**
 * Interop with a peer written from opencoti's field list alone (test/fixtures/c-peer.c: no seq,
 * no owner_pid, 0xAB in both alignment holes, weight 500), compiled with the system's C compiler
 * and opening the file cosmopolitan's shm_open("/opencoti-gpu-<key>") opens. Beside it,
 * `gpu-share join --weight 1`: each lists the other, with the foreign weight used as written.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { slotOffset, SLOT_OFFSET } from '../../electron/core/registry/abi.js';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { cleanupAfterEach, REPO_ROOT, runCli, segmentPath, startCli, uniqueKey } from './cli-process.js';

cleanupAfterEach();

const hasCc = spawnSync('cc', ['--version']).status === 0;
const dir = mkdtempSync(join(tmpdir(), 'gpushare-cpeer-'));
const binary = join(dir, 'c-peer');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!hasCc || process.platform !== 'linux')('a C peer from opencoti\'s field list', () => {
  it('and `join --weight 1` see each other; peers --json shows its weight 500 and 99.80 / 0.20 %', async () => {
    execFileSync('cc', ['-std=c11', '-O2', '-Wall', '-Wextra', '-Werror', '-o', binary, join(REPO_ROOT, 'test', 'fixtures', 'c-peer.c')]);
    const key = uniqueKey('cpeer');
    const path = segmentPath(key);
    // Ours first: it creates the segment (the C peer opens what exists, as opencoti would).
    const ours = startCli(['join', '--gpu-key', key, '--weight', '1', '--name', 'ours', '--active', '--watch', '--interval', '200']);
    await ours.waitForLine(/^gpu-share: joined /, 15_000);
    const cPeer = spawn(binary, [path, '500', 'c-peer'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const seen: string[] = [];
    cPeer.stdout.setEncoding('utf8').on('data', (chunk: string) => seen.push(...chunk.split('\n').filter((l) => l !== '')));
    try {
      // The C peer counts both of us, with the weights as written.
      const deadline = Date.now() + 10_000;
      while (!seen.some((l) => l.startsWith('peers 2 ')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const cLine = seen.find((l) => l.startsWith('peers 2 '));
      expect(cLine, seen.join('\n')).toBeDefined();
      expect(cLine).toMatch(/ weights (1,500|500,1) shares (0\.20,99\.80|99\.80,0\.20)$/);
      // Its slot holds 0xAB in both holes: the padding it never meant to write.
      const slot = Number(/^slot (\d+)$/.exec(seen[0] ?? '')?.[1] ?? -1);
      const bytes = readFileSync(path);
      expect(bytes.readUInt32LE(slotOffset(slot) + SLOT_OFFSET.seq)).toBe(0xabababab);
      expect(bytes.readUInt32LE(slotOffset(slot) + SLOT_OFFSET.owner_pid)).toBe(0xabababab);
      // And we list it, its weight as written.
      const listed = await runCli(['peers', '--gpu-key', key, '--json'], 15_000);
      expect(listed.code, listed.stderr.join('\n')).toBe(0);
      const view = JSON.parse(listed.stdout[0] ?? '') as GpuPeersView;
      const byName = new Map(view.peers.map((p) => [p.name, p]));
      expect(byName.get('c-peer')).toMatchObject({ pid: cPeer.pid, weight: 500, share_pct: 99.8, active: true });
      expect(byName.get('ours')).toMatchObject({ weight: 1, share_pct: 0.2, active: true });
      // The joined process sees it too (its --watch view: itself as self, the C peer beside it).
      const watched = await ours.waitForLine((l) => l.startsWith('{') && l.includes('"c-peer"'), 10_000);
      const fromOurs = JSON.parse(watched.text) as GpuPeersView;
      expect(fromOurs.self).toMatchObject({ name: 'ours', weight: 1, share_pct: 0.2 });
      expect(fromOurs.peers).toEqual([expect.objectContaining({ name: 'c-peer', weight: 500, share_pct: 99.8 })]);
    } finally {
      cPeer.kill('SIGKILL');
      ours.kill('SIGINT');
      await ours.exitWithin(10_000);
    }
  }, 60_000);
});
