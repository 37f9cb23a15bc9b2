/**
 * `npm run bench:registry`: the cost of one registry read as every reader pays it — a native
 * snapshot of the segment plus decode, liveness and shares — on a real segment with 8 peers; and
 * the cost of refusing a name that is not ours to open (a FIFO, a directory, a symlink at the
 * segment name: open non-blocking, fstat, refuse). Prints a table and writes
 * bench-results/registry.json. Targets: snapshot + shares median under 5 µs, a refusal under 1 ms.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadRegistryHelper, RegistryError } from '../../native/helper.js';
import { systemClock } from '../../electron/core/clock.js';
import { decodeSegment } from '../../electron/core/registry/codec.js';
import { RegistryMember } from '../../electron/core/registry/member.js';
import { RegistryObserver } from '../../electron/core/registry/observer.js';
import { RegistrySegment, segmentPath } from '../../electron/core/registry/segment.js';
import { segmentFileName } from '../../electron/core/registry/location.js';
import { SEGMENT_SIZE } from '../../electron/core/registry/abi.js';

const TARGET_US = 5;
const REFUSAL_TARGET_US = 1_000;
const SAMPLES = 20_000;
const WARMUP = 3_000;
const PEERS = 8;

interface Stats {
  name: string;
  median_us: number;
  p90_us: number;
  p99_us: number;
  samples: number;
}

function measure(name: string, op: () => unknown, count = SAMPLES): Stats {
  for (let i = 0; i < Math.min(WARMUP, count); i++) op();
  const samples = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    op();
    samples[i] = Number(process.hrtime.bigint() - start) / 1000;
  }
  samples.sort();
  const at = (q: number): number => Math.round((samples[Math.min(count - 1, Math.floor(q * count))] ?? 0) * 100) / 100;
  return { name, median_us: at(0.5), p90_us: at(0.9), p99_us: at(0.99), samples: count };
}

/** Hostile names at segment names (Linux: /dev/shm), each refused by every open. */
function hostileNames(pid: number): { kind: string; key: string }[] {
  if (process.platform !== 'linux') return [];
  const made: { kind: string; key: string }[] = [];
  const path = (key: string): string => `/dev/shm/${segmentFileName(key)}`;
  try {
    execFileSync('mkfifo', [path(`bench-fifo-${pid}`)]);
    made.push({ kind: 'a FIFO', key: `bench-fifo-${pid}` });
  } catch {
    // no mkfifo: measured without it
  }
  mkdirSync(path(`bench-dir-${pid}`));
  made.push({ kind: 'a directory', key: `bench-dir-${pid}` });
  symlinkSync('/etc/hostname', path(`bench-link-${pid}`));
  made.push({ kind: 'a symlink', key: `bench-link-${pid}` });
  try {
    // Another user's segment (as root: made by uid 65534).
    execFileSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'sh', '-c', `head -c 4096 /dev/zero > ${path(`bench-other-${pid}`)}`], { stdio: 'ignore' });
    made.push({ kind: "another user's segment", key: `bench-other-${pid}` });
  } catch {
    // not root, or no setpriv: measured without it
  }
  return made;
}

/** One refused open; throws unless it was refused. */
function refuse(helper: ReturnType<typeof loadRegistryHelper>, key: string): void {
  try {
    RegistrySegment.openForObserve(helper, key)?.close();
  } catch (error) {
    if (error instanceof RegistryError && error.code === 'REFUSED') return;
    throw error;
  }
  throw new Error(`${key} was not refused`);
}

function main(): void {
  const helper = loadRegistryHelper();
  const clock = systemClock(() => helper.wallUs());
  const gpuKey = `bench-${process.pid}`;
  const segment = RegistrySegment.openForJoin(helper, gpuKey);
  const hostile = hostileNames(process.pid);
  try {
    for (let i = 0; i < PEERS; i++) {
      new RegistryMember(segment, clock, { pid: 1_000_000 + i, ownerPid: process.pid, bootUs: clock.wallUs(), name: `bench-${i}`, weight: 1 + (i % 3), active: i % 2 === 0 }).join();
    }
    const buf = new Uint8Array(SEGMENT_SIZE);
    const oneShot = new RegistryObserver(clock, false);
    const watching = new RegistryObserver(clock, true);
    const rows = [
      measure('native snapshot only', () => segment.snapshotInto(buf)),
      measure('decode only (JS)', () => decodeSegment(buf)),
      measure('snapshot + shares, one-shot reader', () => oneShot.peers(segment)),
      measure('snapshot + shares, watching reader', () => watching.peers(segment)),
      measure('snapshot + /gpu/peers view, watching', () => watching.view(gpuKey, segment, 0)),
    ];
    const refusals = hostile.map(({ kind, key }) => measure(`refusal of ${kind} at the name`, () => refuse(helper, key), 5_000));
    rows.push(...refusals);
    const slowestRefusal = Math.max(0, ...refusals.map((r) => r.median_us));
    const refusalPass = slowestRefusal < REFUSAL_TARGET_US;
    const headline = rows[2];
    if (headline === undefined) throw new Error('no measurement');
    const pass = headline.median_us < TARGET_US && refusalPass;
    const nameWidth = Math.max(...rows.map((r) => r.name.length));
    console.log(`registry read benchmark: ${PEERS} peers on a real segment, ${SAMPLES} samples each (node ${process.version}, ${process.platform}-${process.arch})`);
    console.log(`${'operation'.padEnd(nameWidth)}  median µs  p90 µs  p99 µs`);
    for (const r of rows) console.log(`${r.name.padEnd(nameWidth)}  ${r.median_us.toFixed(2).padStart(9)}  ${r.p90_us.toFixed(2).padStart(6)}  ${r.p99_us.toFixed(2).padStart(6)}`);
    console.log(`target: snapshot + shares median < ${TARGET_US} µs: ${headline.median_us < TARGET_US ? 'met' : 'MISSED'} (${headline.median_us} µs)`);
    console.log(`target: a refusal median < ${REFUSAL_TARGET_US} µs: ${refusalPass ? 'met' : 'MISSED'} (slowest ${slowestRefusal} µs)`);
    const outDir = join(process.cwd(), 'bench-results');
    mkdirSync(outDir, { recursive: true });
    const file = join(outDir, 'registry.json');
    writeFileSync(file, `${JSON.stringify({ benchmark: 'registry', date: new Date().toISOString(), node: process.version, platform: `${process.platform}-${process.arch}`, peers: PEERS, target_us: TARGET_US, refusal_target_us: REFUSAL_TARGET_US, target_met: pass, results: rows }, null, 2)}\n`);
    console.log(`wrote ${file}`);
    process.exitCode = pass ? 0 : 1;
  } finally {
    segment.close();
    helper.unlink(segmentPath(helper, gpuKey));
    for (const { key } of hostile) rmSync(`/dev/shm/${segmentFileName(key)}`, { recursive: true, force: true });
  }
}

main();
