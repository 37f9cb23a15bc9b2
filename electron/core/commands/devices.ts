/**
 * `gpu-share devices`: each device telemetry discovers (index, key, name, memory, source) and
 * every registry segment of this user, found by content, with how many live peers it holds: the
 * one listing of segments. A segment is named by its key where a device's key hashes to its file
 * name, else `unknown key (<hex>.sem)`. `--remove KEY` deletes a segment of this user that has no
 * live peer.
 */
import { RegistryError, type RegistryHelper } from '../../../native/helper.js';
import { systemClock } from '../clock.js';
import { formatBytes } from '../planner/describe.js';
import { segmentName } from '../registry/abi.js';
import { RegistryObserver } from '../registry/observer.js';
import { listSegments, listedName } from '../registry/segment-list.js';
import { RegistrySegment, segmentDir, segmentPath } from '../registry/segment.js';
import { listDevices } from '../telemetry/device-list.js';
import type { CommandIo } from './io.js';

export interface DevicesOptions {
  json: boolean;
  /** Delete this key's segment instead of listing. */
  remove: string | undefined;
}

export interface SegmentStatus {
  /** The key, or `unknown key (<hex>.sem)` when no device's key hashes to the file's name. */
  key: string;
  /** The segment's file. */
  path: string;
  /** Live peers; null when the segment could not be read (see problem). */
  alive: number | null;
  problem: string | null;
}

/** How many peers are alive in a segment, or why it cannot be said; null when there is none. */
function statusOf(helper: RegistryHelper, segmentOf: { key: string | null; fileName: string; path: string }, clock: ReturnType<typeof systemClock>): SegmentStatus | null {
  const key = listedName(segmentOf);
  const path = segmentOf.path;
  let segment: RegistrySegment | null;
  try {
    segment = segmentOf.key === null ? RegistrySegment.observeFile(helper, path, key) : RegistrySegment.openForObserve(helper, segmentOf.key);
  } catch (error) {
    if (error instanceof RegistryError) return { key, path, alive: null, problem: error.message };
    throw error;
  }
  if (segment === null) return null;
  try {
    return { key, path, alive: new RegistryObserver(clock, false).peers(segment).length, problem: null };
  } catch (error) {
    if (error instanceof RegistryError) return { key, path, alive: null, problem: error.message };
    throw error;
  } finally {
    segment.close();
  }
}

export async function runDevices(options: DevicesOptions, io: CommandIo, helper: RegistryHelper): Promise<number> {
  const clock = systemClock(() => helper.wallUs());
  if (options.remove !== undefined) return remove(options.remove, helper, clock, io);

  const { devices, reason } = listDevices({ wallUs: () => clock.wallUs() });
  const listed = listSegments(segmentDir(helper), devices.map((d) => d.key));
  const segments = listed.filter((s) => s.mine).map((s) => statusOf(helper, s, clock)).filter((s): s is SegmentStatus => s !== null);
  if (options.json) {
    io.out(JSON.stringify({ reason, devices, segments }));
    return 0;
  }
  const lines = [`devices (${reason}):`];
  lines.push(...table(['INDEX', 'KEY', 'NAME', 'MEMORY', 'SOURCE'], devices.map((d) => [String(d.index), d.key, d.name, d.totalBytes === null ? 'not available' : formatBytes(d.totalBytes), d.source])));
  lines.push('', 'registries of this user:');
  if (segments.length === 0) lines.push('(none yet: the first engine to join a device creates its registry)');
  else lines.push(...table(['KEY', 'PEERS ALIVE', 'FILE'], segments.map((s) => [s.key, s.alive === null ? `unreadable: ${s.problem ?? ''}` : String(s.alive), s.path])));
  io.out(lines.join('\n'));
  return 0;
}

function remove(key: string, helper: RegistryHelper, clock: ReturnType<typeof systemClock>, io: CommandIo): number {
  const path = segmentPath(helper, key);
  const name = `${segmentName(key)} (${path})`;
  const entry = listSegments(segmentDir(helper), [key]).find((s) => s.key === key);
  if (entry !== undefined && !entry.mine) {
    io.err(`gpu-share: ${name} belongs to another user (uid ${entry.ownerUid}); not removed`);
    return 1;
  }
  const status = statusOf(helper, { key, fileName: '', path }, clock);
  if (status === null && entry === undefined) {
    io.err(`gpu-share: there is no registry segment ${name}`);
    return 1;
  }
  if (status !== null && status.alive !== null && status.alive > 0) {
    io.err(`gpu-share: ${name} has ${status.alive} live ${status.alive === 1 ? 'peer' : 'peers'}; not removed (a live registry is never removed)`);
    return 1;
  }
  helper.unlink(path, name);
  io.out(`removed ${name}`);
  return 0;
}

function table(headings: string[], rows: string[][]): string[] {
  const widths = headings.map((h, i) => Math.max([...h].length, ...rows.map((r) => [...(r[i] ?? '')].length)));
  const line = (cells: string[]): string => cells.map((c, i) => c + ' '.repeat((widths[i] ?? 0) - [...c].length)).join('  ').trimEnd();
  return [line(headings), ...rows.map(line)];
}
