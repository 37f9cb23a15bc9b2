/**
 * `gpu-share run` with GPU_SHARE_PACER_TRACE=FILE writes its gate's trace there (pacer/trace.ts);
 * a file that already exists is never written over: one line says so and the command runs as ever.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseGateTrace } from '../../electron/core/pacer/trace.js';
import { CLI } from '../fixtures/procs.js';
import { removeSegment, testKey } from '../fixtures/segments.js';

const dir = mkdtempSync(join(tmpdir(), 'gpushare-run-trace-'));
const keys: string[] = [];
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  for (const key of keys) removeSegment(key);
});

function run(traceFile: string): { status: number | null; stderr: string } {
  const key = testKey('trace');
  keys.push(key);
  // A command that works for half a second: activity (CPU time) and at least one decision.
  const result = spawnSync(process.execPath, [CLI, 'run', '--gpu-key', key, '--name', 'traced', '--', process.execPath, '-e', 'const end = Date.now() + 500; while (Date.now() < end);'], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, GPU_SHARE_PACER_TRACE: traceFile } });
  return { status: result.status, stderr: result.stderr };
}

describe.skipIf(process.platform !== 'linux')('gpu-share run with a trace', () => {
  it('writes every decision and activity sample to the file it names', () => {
    const file = join(dir, 'gate.jsonl');
    const result = run(file);
    expect(result.status, result.stderr).toBe(0);
    const { events, skipped } = parseGateTrace(readFileSync(file, 'utf8'));
    expect(skipped).toBe(0);
    expect(events.some((e) => e.k === 'decide' && e.peers.length === 1)).toBe(true);
    expect(events.some((e) => e.k === 'sample')).toBe(true);
  });

  it('refuses a file that exists, says so in one line, and runs the command anyway', () => {
    const file = join(dir, 'taken.jsonl');
    writeFileSync(file, 'someone else\'s\n');
    const result = run(file);
    expect(result.status).toBe(0);
    expect(result.stderr).toMatch(/gpu-share: GPU_SHARE_PACER_TRACE: cannot create .*taken\.jsonl \(EEXIST[^)]*\); running without a trace/);
    expect(readFileSync(file, 'utf8')).toBe('someone else\'s\n');
  });
});
