import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { otherThreadsSpentNs, threadCpuNs, type ThreadCpuNs } from '../bench/thread-cpu.js';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A /proc of one process with the threads given (tid → schedstat's text). */
function fakeProc(pid: number, threads: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'gpushare-proc-'));
  roots.push(root);
  for (const [tid, text] of Object.entries(threads)) {
    mkdirSync(join(root, String(pid), 'task', tid), { recursive: true });
    if (text !== '') writeFileSync(join(root, String(pid), 'task', tid, 'schedstat'), text);
  }
  return root;
}

describe('threadCpuNs', () => {
  it("splits a process's run time into its main thread and the rest", () => {
    const root = fakeProc(100, { '100': '5000 12 3\n', '101': '7000 1 1\n', '102': '1000 0 2\n' });
    expect(threadCpuNs(100, root)).toEqual({ mainNs: 5000, otherNs: 8000 });
  });

  it('skips a thread that ended while read or says nothing numeric, and is null without the process or its main thread', () => {
    const root = fakeProc(100, { '100': '5000 1 1', '101': '', '102': 'garbage', '103': '-4 0 0' });
    expect(threadCpuNs(100, root)).toEqual({ mainNs: 5000, otherNs: 0 });
    expect(threadCpuNs(200, root)).toBeNull();
    expect(threadCpuNs(300, fakeProc(300, { '301': '10 0 0' }))).toBeNull();
  });

  it('reads this very process', () => {
    const self = threadCpuNs(process.pid);
    expect(self).not.toBeNull();
    expect(self?.mainNs).toBeGreaterThan(0);
  });
});

describe('otherThreadsSpentNs', () => {
  it("adds one process's other threads' time over its intervals, leaving its main thread out", () => {
    const first: [ThreadCpuNs, ThreadCpuNs] = [{ mainNs: 10, otherNs: 1_000 }, { mainNs: 90, otherNs: 5_000 }];
    const second: [ThreadCpuNs, ThreadCpuNs] = [{ mainNs: 95, otherNs: 6_000 }, { mainNs: 99, otherNs: 6_500 }];
    expect(otherThreadsSpentNs([first, second])).toBe(4_500);
    expect(otherThreadsSpentNs([])).toBe(0);
  });

  it('is null when any reading is missing', () => {
    const some = { mainNs: 0, otherNs: 100 };
    expect(otherThreadsSpentNs([[some, some], [some, null]])).toBeNull();
    expect(otherThreadsSpentNs([[undefined, some]])).toBeNull();
  });
});
