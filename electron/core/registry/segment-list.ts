/**
 * The registry segments on this machine, by name. Only Linux can list POSIX shared memory (its
 * names are files in /dev/shm); macOS and Windows offer no listing, so there only the devices'
 * own keys are looked at. lstat, never open: a listing follows no link and blocks on nothing.
 */
import { lstatSync, readdirSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { GPU_KEY_MAX, GPU_KEY_PATTERN } from './abi.js';

export const SHM_DIR = '/dev/shm';
const PREFIX = 'opencoti-gpu-';

export type EntryKind = 'file' | 'fifo' | 'directory' | 'symlink' | 'device' | 'socket';

export interface ListedSegment {
  key: string;
  kind: EntryKind;
  ownerUid: number;
  /** Owned by the user running this process. */
  mine: boolean;
}

function kindOf(stat: Stats): EntryKind {
  if (stat.isSymbolicLink()) return 'symlink';
  if (stat.isFIFO()) return 'fifo';
  if (stat.isDirectory()) return 'directory';
  if (stat.isSocket()) return 'socket';
  if (stat.isBlockDevice() || stat.isCharacterDevice()) return 'device';
  return 'file';
}

/** Every name of ours in the shared-memory folder, sorted by key; [] where none can be listed. */
export function listSegments(options: { dir?: string; platform?: NodeJS.Platform; uid?: number } = {}): ListedSegment[] {
  const platform = options.platform ?? process.platform;
  if (platform !== 'linux') return [];
  const dir = options.dir ?? SHM_DIR;
  const uid = options.uid ?? process.geteuid?.() ?? -1;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const listed: ListedSegment[] = [];
  for (const name of names) {
    if (!name.startsWith(PREFIX)) continue;
    const key = name.slice(PREFIX.length);
    if (key.length === 0 || key.length > GPU_KEY_MAX || !GPU_KEY_PATTERN.test(key)) continue;
    try {
      const stat = lstatSync(join(dir, name));
      listed.push({ key, kind: kindOf(stat), ownerUid: stat.uid, mine: stat.uid === uid });
    } catch {
      // removed while we listed
    }
  }
  return listed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
