/** A benchmark given SIGTERM stops every process it started, one held stopped included, and exits
 *  with the signal's status (test/bench/stop-on-signal.ts). */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { processesBelow } from '../bench/stop-on-signal.js';
import { exitOf, procState, ROOT, spawnNode, until } from '../fixtures/procs.js';

const STAND_IN = join(ROOT, 'dist', 'test', 'fixtures', 'signal-stopped-bench.js');

describe.runIf(process.platform === 'linux')('a benchmark stopped by a signal', () => {
  it('stops its children and their children, a stopped one too, and exits 143 on SIGTERM', async () => {
    const bench = spawnNode([STAND_IN]);
    const pid = bench.pid ?? -1;
    let stderr = '';
    bench.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      // Itself, the shell, its two sleeps and the held sleep.
      const below = await until(() => {
        const tree = processesBelow(pid);
        return tree.length === 4 && tree.some((p) => procState(p) === 'T') ? tree : null;
      }, 15_000, 'the stand-in and its four processes');
      bench.kill('SIGTERM');
      const exit = await exitOf(bench);
      expect(exit).toEqual({ code: 143, signal: null });
      // Reaped by whoever adopts them; a zombie runs nothing.
      await until(() => below.every((p) => procState(p) === null || procState(p) === 'Z'), 15_000, `${below.join(', ')} gone`);
      expect(stderr).toContain('stand-in: SIGTERM: stopped 4 processes it had started');
    } finally {
      if (bench.exitCode === null && bench.signalCode === null) bench.kill('SIGKILL');
    }
  });
});
