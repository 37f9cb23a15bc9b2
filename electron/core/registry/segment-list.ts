/**
 * The registry segments on this machine, found by content. Segment files are named by a hash
 * (`<hex>.sem`, registry/location.ts), and cosmopolitan programs keep their POSIX semaphores in the
 * same folder under the same kind of name, so a file is a registry only when it is a regular
 * 4096-byte file whose header has our magic and version. Each is mapped back to a key where a known
 * key hashes to its name. Files are opened without following a link or blocking, and only their
 * 16-byte header is read.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { HEADER_OFFSET, HEADER_SIZE, MAGIC, SEGMENT_SIZE, VERSION } from './abi.js';
import { SEGMENT_FILE_PATTERN, keyOfSegmentFile } from './location.js';

export interface ListedSegment {
  /** The key whose segment this is, or null when no known key hashes to its name. */
  key: string | null;
  /** `<hex>.sem` */
  fileName: string;
  path: string;
  ownerUid: number;
  /** Owned by the user running this process. */
  mine: boolean;
}

/** How a listed segment is named: its key, or `unknown key (<hex>.sem)`. */
export function listedName(segment: Pick<ListedSegment, 'key' | 'fileName'>): string {
  return segment.key ?? `unknown key (${segment.fileName})`;
}

/** Whether a header is ABI v1's magic and version (the slot count is judged on opening). */
export function isRegistryHeader(header: Uint8Array): boolean {
  if (header.byteLength < HEADER_SIZE) return false;
  for (let i = 0; i < 8; i++) {
    const expected = i < MAGIC.length ? MAGIC.charCodeAt(i) : 0;
    if (header[HEADER_OFFSET.magic + i] !== expected) return false;
  }
  const view = new DataView(header.buffer, header.byteOffset, header.byteLength);
  return view.getUint32(HEADER_OFFSET.version, true) === VERSION;
}

const NO_FOLLOW = (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

/** The header of a regular file of the segment's size, or null (anything else, or gone). */
function readHeader(path: string): Uint8Array | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | NO_FOLLOW);
  } catch {
    return null;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size !== SEGMENT_SIZE) return null;
    const header = new Uint8Array(HEADER_SIZE);
    return readSync(fd, header, 0, HEADER_SIZE, 0) === HEADER_SIZE ? header : null;
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

/** Every registry in the segment folder, known keys first (sorted by key), then the others by
 *  file name; [] when the folder cannot be listed. */
export function listSegments(dir: string, knownKeys: Iterable<string>, options: { uid?: number; platform?: NodeJS.Platform } = {}): ListedSegment[] {
  const uid = options.uid ?? process.geteuid?.() ?? -1;
  // Windows has no uids here; the temp folder is the user's own.
  const perUserFolder = (options.platform ?? process.platform) === 'win32';
  const keys = [...knownKeys];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const listed: ListedSegment[] = [];
  for (const fileName of names) {
    if (!SEGMENT_FILE_PATTERN.test(fileName)) continue;
    const path = join(dir, fileName);
    let ownerUid: number;
    try {
      // lstat first: a link or a FIFO is never opened.
      const stat = lstatSync(path);
      if (!stat.isFile()) continue;
      ownerUid = stat.uid;
    } catch {
      continue;
    }
    const header = readHeader(path);
    if (header === null || !isRegistryHeader(header)) continue;
    listed.push({ key: keyOfSegmentFile(fileName, keys), fileName, path, ownerUid, mine: perUserFolder || ownerUid === uid });
  }
  const order = (s: ListedSegment): string => (s.key === null ? `1${s.fileName}` : `0${s.key}`);
  return listed.sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0));
}
