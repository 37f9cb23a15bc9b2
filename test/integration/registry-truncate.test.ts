/**
 * A segment truncated under its mappings (anyone who can write it can ftruncate it: another user
 * in shared mode) never kills a process of ours. Linux raises SIGBUS at the next access of a page
 * past the end of the file; the helper catches it (and notices a cut inside the first page by the
 * file's size). `run` paces a busy loop beside a `join`ed peer and `serve` answers /gpu/peers for
 * the key; the file is cut to 0 and to 100 bytes: all three keep running, `run` and `serve` say
 * it in one line each, and the loop keeps running (unpaced).
 */
import { readFileSync, truncateSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { call, startServe, until, type Served } from '../fixtures/serve.js';
import { cleanupAfterEach, runCli, segmentPath, sleep, startCli, uniqueKey } from './cli-process.js';

cleanupAfterEach();
let served: Served | null = null;
const dirs: string[] = [];
afterEach(async () => {
  await served?.stop();
  served = null;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** utime + stime of a process, in clock ticks. */
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

const BROKEN = /changed size under its mapping/;

describe.skipIf(process.platform !== 'linux')('a segment truncated under its mappings', () => {
  for (const size of [0, 100]) {
    it(`cut to ${size} bytes: run, join and serve keep running, one line each; the paced loop keeps running`, async () => {
      const key = uniqueKey(`cut${size}`);
      const other = startCli(['join', '--gpu-key', key, '--weight', '1', '--name', 'other', '--active']);
      await other.waitForLine(/^gpu-share: joined /, 15_000);
      const run = startCli(['run', '--gpu-key', key, '--weight', '1', '--name', 'busy', '--', 'sh', '-c', 'while :; do :; done']);
      await run.waitForLine(/^gpu-share: joined /, 15_000, { stream: 'stderr' });
      const dir = mkdtempSync(join(tmpdir(), 'gpushare-cut-'));
      dirs.push(dir);
      const sim = join(dir, 'sim.json');
      writeFileSync(sim, JSON.stringify({ devices: [{ key, name: 'Sim', totalBytes: 24 * GiB, usedBytes: GiB, processes: null, health: 'OK' }] }));
      const server = await startServe({ dataDir: join(dir, 'data'), sim });
      served = server;
      const peersOf = async (): Promise<GpuPeersView> => {
        const answer = await call<GpuPeersView>(server, 'GET', `/gpu/peers?gpu_key=${key}`, undefined, null);
        expect(answer.status).toBe(200);
        return answer.body;
      };
      await until(async () => ((await peersOf()).peers.length === 2 ? true : undefined), 15_000, 'serve sees both peers');
      const listed = await runCli(['peers', '--gpu-key', key, '--json'], 15_000);
      const loopPid = (JSON.parse(listed.stdout[0] ?? '') as GpuPeersView).peers.find((p) => p.name === 'busy')?.pid ?? 0;
      expect(loopPid).toBeGreaterThan(0);

      truncateSync(segmentPath(key), size);
      // serve keeps answering while the registry is broken (and after).
      for (let i = 0; i < 10; i++) {
        await peersOf();
        await sleep(150);
      }
      const ticks = cpuTicks(loopPid);
      await sleep(1500);
      expect(cpuTicks(loopPid) - ticks, 'the busy loop ran').toBeGreaterThan(20);

      for (const proc of [run, other]) expect(proc.child.exitCode, proc.lines('stderr').join('\n')).toBeNull();
      expect(proc(run).filter((l) => BROKEN.test(l)), run.lines('stderr').join('\n')).toHaveLength(1);
      expect(proc(run).find((l) => BROKEN.test(l))).toMatch(/; running sh unpaced until it is valid again$/);
      expect(proc(other).filter((l) => BROKEN.test(l))).toHaveLength(1);
      expect(server.log.filter((l) => BROKEN.test(l)), server.log.join('\n')).toHaveLength(1);
      expect(server.child.exitCode).toBeNull();
      if (size === 0) {
        // A joiner restores a file cut to nothing (every byte zero: it adopts it), and pacing
        // comes back.
        await run.waitForLine(/^gpu-share: the registry is valid again; pacing sh again$/, 10_000, { stream: 'stderr' });
        await until(async () => ((await peersOf()).peers.length === 2 ? true : undefined), 10_000, 'serve sees both peers again');
      }

      run.kill('SIGTERM');
      other.kill('SIGINT');
      expect((await other.exitWithin(10_000)).code).toBe(0);
      await run.exitWithin(10_000);
    }, 90_000);
  }
});

function proc(p: { lines(stream: 'stderr'): string[] }): string[] {
  return p.lines('stderr');
}
