/**
 * Where the registry segment of a key is: the file cosmopolitan libc's shm_open opens for the name
 * `/opencoti-gpu-<key>`, because that is where opencoti-llamafile's peers (built with cosmocc
 * 4.0.2) look. cosmopolitan never hands the name to the OS: it opens
 * `<dir><hex of BLAKE2b-256(name)>.sem` (libc/calls/shm_path_np.c), dir being `/dev/shm/` on
 * Linux (`/tmp/` where /dev/shm is not a directory), `/tmp/` on macOS, and on Windows the user's
 * temp folder (cosmopolitan maps `/tmp/` to GetTempPathW). docs/registry.md has the table and
 * recipes in other languages. The path is computed here once and handed to the C helper.
 */
import { blake2b } from '@noble/hashes/blake2.js';
import { segmentName } from './abi.js';

/** The file name cosmopolitan gives a shm name: BLAKE2b-256 (RFC 7693, unkeyed, 32-byte
 *  digest) of the whole name in lowercase hex, plus `.sem`. */
export function cosmoShmFileName(shmName: string): string {
  return `${Buffer.from(blake2b(new TextEncoder().encode(shmName), { dkLen: 32 })).toString('hex')}.sem`;
}

/** The segment file name of a key: `<hex>.sem`. */
export function segmentFileName(gpuKey: string): string {
  return cosmoShmFileName(segmentName(gpuKey));
}

/** A segment file name as cosmopolitan writes it (any hash: the key cannot be read back). */
export const SEGMENT_FILE_PATTERN = /^[0-9a-f]{64}\.sem$/;

/** What decides the folder: the OS and, where it matters, one fact about the machine. */
export type SegmentSystem =
  | { platform: 'linux'; devShmIsDirectory: boolean }
  | { platform: 'darwin' }
  | { platform: 'win32'; tempDir: string };

/** The folder of segment files, with its trailing separator. Pure. */
export function segmentDirFor(system: SegmentSystem): string {
  switch (system.platform) {
    case 'linux':
      return system.devShmIsDirectory ? '/dev/shm/' : '/tmp/';
    case 'darwin':
      return '/tmp/';
    case 'win32':
      // GetTempPathW ends with a backslash; cosmopolitan appends the name to it.
      return /[\\/]$/.test(system.tempDir) ? system.tempDir : `${system.tempDir}\\`;
  }
}

/** The segment file of a key on a given system. Pure. */
export function segmentPathFor(gpuKey: string, system: SegmentSystem): string {
  return segmentDirFor(system) + segmentFileName(gpuKey);
}

/** The key whose segment file this is, among the keys we know; null when none hashes to it. */
export function keyOfSegmentFile(fileName: string, knownKeys: Iterable<string>): string | null {
  for (const key of knownKeys) if (segmentFileName(key) === fileName) return key;
  return null;
}
