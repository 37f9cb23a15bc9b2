/** `gpu-share run` leaves within its bound whenever SIGTERM comes: at 200 random moments of a paced
 *  run (starting, joining, its engine suspended or running, a /metrics poll in flight), `run` exits
 *  within 5 s and nothing of its tree is left. The engine is the stand-in llama-server, which on
 *  SIGTERM closes its HTTP server gracefully (as Node servers do: it waits for busy connections),
 *  with /metrics answered 20 ms late so that a poll is often in flight. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, FAKE_LLAMA_SERVER, childrenOf, procState, until } from '../fixtures/procs.js';
import { removeSegment, testKey } from '../fixtures/segments.js';

const ITERATIONS = 200;
const PARALLEL = 4;
/** SIGTERM lands uniformly in [0, this) ms after `run` is started: from node's own start-up to well
 *  past the boot line (which takes ~0.3–0.6 s here). */
const SPREAD_MS = 1_500;
const EXIT_BOUND_MS = 5_000;

let dir = '';
let llamaServer = '';
let gpuKey = '';
let rival: ChildProcess | null = null;
const leftovers: ChildProcess[] = [];

/** Start time of a process (field 22 of /proc/PID/stat); null when gone or a zombie. */
function liveStart(pid: number): string | null {
  const state = procState(pid);
  if (state === null || state === 'Z' || state === 'X') return null;
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Live processes with `tag` as one of their arguments. */
function processesTagged(tag: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(`\0${tag}\0`) && liveStart(Number(entry)) !== null) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-sigterm-'));
  llamaServer = join(dir, 'llama-server');
  writeFileSync(llamaServer, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_LLAMA_SERVER}" "$@"\n`, { mode: 0o755 });
  gpuKey = testKey('sigterm');
  // An active rival: every `run` below is paced (its engine reports a request in flight).
  rival = spawn(process.execPath, [CLI, 'join', '--gpu-key', gpuKey, '--name', 'rival', '--active'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let stdout = '';
  rival.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  await until(() => stdout.includes('joined'), 10_000, 'the rival to join');
});

afterAll(() => {
  rival?.kill('SIGTERM');
  for (const child of leftovers) child.kill('SIGKILL');
  removeSegment(gpuKey);
  rmSync(dir, { recursive: true, force: true });
});

/** One `run`, SIGTERM after `delayMs`: what went wrong, or null. */
async function oneRun(index: number, delayMs: number): Promise<string | null> {
  const tag = `sigterm-${process.pid}-${index}`;
  const port = 20_000 + ((process.pid * 7 + index * 13) % 20_000);
  const run = spawn(process.execPath, [CLI, 'run', '--gpu-key', gpuKey, '--name', `s${index}`, '--', llamaServer, '--port', String(port), '--processing', '1', '--load-ms', '0', '--metrics-delay-ms', '20', '--alias', tag], {
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  const runPid = run.pid ?? 0;
  const exited = new Promise<number>((resolve) => run.once('exit', () => resolve(Date.now())));
  await new Promise((resolve) => setTimeout(resolve, delayMs));
  // The tree as it is now (the watchdog, the engine, and theirs), to check that it is gone after.
  const tree = new Map<number, string>();
  const walk = (pid: number): void => {
    for (const child of childrenOf(pid)) {
      const start = liveStart(child);
      if (start !== null && !tree.has(child)) tree.set(child, start);
      walk(child);
    }
  };
  walk(runPid);
  const sentAt = Date.now();
  run.kill('SIGTERM');
  const exitAt = await Promise.race([exited, new Promise<null>((resolve) => setTimeout(() => resolve(null), EXIT_BOUND_MS))]);
  if (exitAt === null) {
    leftovers.push(run);
    run.kill('SIGKILL');
    for (const pid of processesTagged(tag)) process.kill(pid, 'SIGKILL');
    return `#${index} (SIGTERM at ${delayMs} ms): run had not exited ${EXIT_BOUND_MS} ms later`;
  }
  const left = (): number[] => [...processesTagged(tag), ...[...tree].filter(([pid, start]) => liveStart(pid) === start).map(([pid]) => pid)];
  try {
    await until(() => left().length === 0 || Date.now() - sentAt > EXIT_BOUND_MS, EXIT_BOUND_MS + 1_000, 'the tree to end', 50);
  } catch {
    // reported below
  }
  const lingering = [...new Set(left())];
  if (lingering.length > 0) {
    for (const pid of lingering) process.kill(pid, 'SIGKILL');
    return `#${index} (SIGTERM at ${delayMs} ms): run exited after ${exitAt - sentAt} ms but left ${lingering.join(', ')} running ${EXIT_BOUND_MS} ms after SIGTERM`;
  }
  return null;
}

describe('`gpu-share run` and SIGTERM', () => {
  it(`exits within ${EXIT_BOUND_MS / 1000} s, its tree gone, after SIGTERM at ${ITERATIONS} random moments of a paced run`, async () => {
    const failures: string[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < ITERATIONS) {
        const index = next++;
        const failure = await oneRun(index, Math.floor(Math.random() * SPREAD_MS));
        if (failure !== null) failures.push(failure);
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    expect(failures).toEqual([]);
  }, 400_000);
});
