/**
 * The data folder's housekeeping at start: temporary files that a crash left behind (conf's
 * atomic writes, `<file>.tmp-<10 digits><6 hex>`; the envelopes', `<file>.<pid>.tmp`) are removed,
 * and the data files are made owner-only (they hold the API token, gateway tokens and engines'
 * environments). And the one way a file that cannot be used is set aside: copied to
 * `<file>.bad-<timestamp>` beside it before anything is written over it.
 *
 * The data folder has one writer (the app or `serve`), so a temporary file found at start is
 * nobody's.
 */
import { chmodSync, closeSync, constants as fsConstants, fstatSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, readSync, realpathSync, renameSync, rmSync, statSync, writeSync, type Stats } from 'node:fs';
import { dirname, join } from 'node:path';

const O_NOFOLLOW = fsConstants.O_NOFOLLOW ?? 0;
const O_NONBLOCK = fsConstants.O_NONBLOCK ?? 0;

const STALE_TEMP = /(\.tmp-\d{10}[0-9a-f]{6}|\.\d+\.tmp)$/;
const DATA_FILE = /\.json(\.bad-[0-9TZ-]+(-\d+)?)?$/;

export interface Tidied {
  removedTemps: string[];
  /** Files whose mode was wider than 0600. */
  tightened: string[];
}

export function tidyDataDir(dataDir: string): Tidied {
  const tidied: Tidied = { removedTemps: [], tightened: [] };
  let names: string[];
  try {
    names = readdirSync(dataDir);
  } catch {
    return tidied;
  }
  const uid = process.getuid?.() ?? null;
  for (const name of names) {
    const path = join(dataDir, name);
    let stat: ReturnType<typeof lstatSync>;
    try {
      stat = lstatSync(path);
    } catch {
      continue;
    }
    // Only plain files of this user: never a link, never someone else's.
    if (!stat.isFile() || (uid !== null && stat.uid !== uid)) continue;
    if (STALE_TEMP.test(name)) {
      rmSync(path, { force: true });
      tidied.removedTemps.push(name);
    } else if (DATA_FILE.test(name) && (stat.mode & 0o077) !== 0 && process.platform !== 'win32') {
      chmodSync(path, 0o600);
      tidied.tightened.push(name);
    }
  }
  return tidied;
}

/** `<file>.bad-2027-01-15T08-00-00-000Z` (or with `-2`, `-3`… if that exists): a copy of the
 *  unusable file, owner-only. Returns its path. */
export function backupCopy(file: string, nowMs: number): string {
  const stamp = new Date(nowMs).toISOString().replace(/[:.]/g, '-');
  // Read as any data file is (no link followed, no FIFO waited on), written exclusively.
  const bytes = readDataBytes(file) ?? Buffer.alloc(0);
  for (let n = 1; ; n++) {
    const backup = `${file}.bad-${stamp}${n === 1 ? '' : `-${n}`}`;
    let fd: number;
    try {
      fd = openSync(backup, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | O_NOFOLLOW, 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw new DataFileError(backup, `could not be written: ${errnoText(error)}`, 'io');
    }
    try {
      for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset, bytes.length - offset);
      fsyncSync(fd);
    } catch (error) {
      closeSync(fd);
      rmSync(backup, { force: true });
      throw new DataFileError(backup, `could not be written: ${errnoText(error)}; ${file} is left as it is`, 'io');
    }
    closeSync(fd);
    return backup;
  }
}

/** A data file's JSON, forgiving a leading byte-order mark (editors on Windows may write one). */
export function parseJsonFile(text: string): unknown {
  return JSON.parse(text.startsWith('\uFEFF') ? text.slice(1) : text) as unknown;
}

// ---------------------------------------------------------------------------------------------
// Opening and writing the data folder's files. Another local user may have put anything at a
// file's name (a link to a system file, a FIFO that blocks a reader for good, a directory, a
// device), so every file is opened without following links and without blocking, checked to be a
// regular file of this user, and read within a size limit; every write goes to a temporary file
// in the same folder that is synced and renamed over the old one (a rename replaces a link, never
// its target). Messages name the file and the problem, never what the file holds.

/** Far above any data file (settings, profiles, envelopes, engine records are a few kB). */
export const DATA_FILE_LIMIT_BYTES = 16 * 1024 * 1024;

/** A data file that is not a plain file of this user, cannot be read, or could not be written. */
export class DataFileError extends Error {
  override readonly name = 'DataFileError';
  constructor(
    readonly file: string,
    readonly problem: string,
    /** 'unsafe': not a regular file of this user (refused, never read); 'io': a read or write failed. */
    readonly kind: 'unsafe' | 'io',
  ) {
    super(`${file}: ${problem}`);
  }
}

const currentUid = (): number | null => (process.platform === 'win32' ? null : (process.getuid?.() ?? null));

/** What a non-regular file is, in words. */
function kindOf(stat: Stats): string {
  if (stat.isSymbolicLink()) return 'a symbolic link';
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isDirectory()) return 'a directory';
  if (stat.isSocket()) return 'a socket';
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/** The problem with a file's kind or owner, or null when it is a regular file of this user. */
function entryProblem(stat: Stats): string | null {
  if (!stat.isFile()) return `is ${kindOf(stat)}, not a regular file: refused (not read, not followed); remove it`;
  const uid = currentUid();
  if (uid !== null && stat.uid !== uid) return `belongs to user ${stat.uid}, not to this user (${uid}): refused; remove it`;
  return null;
}

function errnoText(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  const reason: Record<string, string> = {
    ENOSPC: 'no space left on the device',
    EDQUOT: 'over the disk quota',
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    EROFS: 'the file system is read-only',
    EIO: 'input/output error',
  };
  return e.code !== undefined ? `${reason[e.code] ?? e.code} (${e.code})` : error instanceof Error ? error.message : String(error);
}

/**
 * A data file's text, or null when there is none. Never follows a link, never waits on a FIFO;
 * a file that is not a regular file of this user, or is over `limit` bytes, is a DataFileError.
 */
export function readDataFile(file: string, limit = DATA_FILE_LIMIT_BYTES): string | null {
  return readDataBytes(file, limit)?.toString('utf8') ?? null;
}

/** A data file's JSON, read by readDataFile's rules: none (no file), its value, or why it cannot be
 *  used. A parse error is named by where it is, never by the parser's excerpt of the file (data
 *  files hold tokens). */
export type JsonDataFile = { kind: 'none' } | { kind: 'json'; value: unknown } | { kind: 'bad'; problem: string };

export function readJsonDataFile(file: string, limit = DATA_FILE_LIMIT_BYTES): JsonDataFile {
  let text: string | null;
  try {
    text = readDataFile(file, limit);
  } catch (error) {
    if (error instanceof DataFileError) return { kind: 'bad', problem: error.message };
    throw error;
  }
  if (text === null) return { kind: 'none' };
  try {
    return { kind: 'json', value: parseJsonFile(text) };
  } catch (error) {
    return { kind: 'bad', problem: `${file} ${jsonProblem(error)}` };
  }
}

/** readDataFile's bytes, undecoded. */
export function readDataBytes(file: string, limit = DATA_FILE_LIMIT_BYTES): Buffer | null {
  let fd: number;
  try {
    // The name's own entry first, so that a device is never opened at all.
    const problem = entryProblem(lstatSync(file));
    if (problem !== null) throw new DataFileError(file, problem, 'unsafe');
    fd = openSync(file, fsConstants.O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    if (error instanceof DataFileError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    // Swapped for a link between the check and the open.
    if (code === 'ELOOP') throw new DataFileError(file, 'is a symbolic link, not a regular file: refused (not followed); remove it', 'unsafe');
    throw new DataFileError(file, `cannot be opened: ${errnoText(error)}`, 'io');
  }
  try {
    const stat = fstatSync(fd);
    const problem = entryProblem(stat);
    if (problem !== null) throw new DataFileError(file, problem, 'unsafe');
    if (stat.size > limit) throw new DataFileError(file, `is ${stat.size} bytes, over the limit of ${limit}: refused`, 'unsafe');
    const buffer = Buffer.alloc(Math.min(limit + 1, stat.size + 1));
    let length = 0;
    for (;;) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
      if (length === buffer.length) {
        if (length > limit) throw new DataFileError(file, `grew past the limit of ${limit} bytes while being read: refused`, 'unsafe');
        break;
      }
    }
    return buffer.subarray(0, length);
  } catch (error) {
    if (error instanceof DataFileError) throw error;
    throw new DataFileError(file, `cannot be read: ${errnoText(error)}`, 'io');
  } finally {
    closeSync(fd);
  }
}

/** The system calls a write makes that can fail for want of room (tests replace them). */
export interface DataWriteIo {
  writeSync(fd: number, data: Buffer, offset: number, length: number): number;
  fsyncSync(fd: number): void;
}
const NODE_WRITE_IO: DataWriteIo = { writeSync: (fd, data, offset, length) => writeSync(fd, data, offset, length), fsyncSync };

/**
 * Replaces a data file's contents whole: written to `<file>.<pid>.tmp` beside it (created
 * exclusively, never through a link), synced, then renamed over the file, and the folder synced.
 * A write that fails (a full disk) removes the temporary file and leaves the old file as it was:
 * the DataFileError says so.
 */
export function writeDataFile(file: string, text: string, mode = 0o600, io: DataWriteIo = NODE_WRITE_IO): void {
  const tmp = `${file}.${process.pid}.tmp`;
  const flags = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | O_NOFOLLOW;
  const kept = (): string => {
    try {
      lstatSync(file);
      return 'the file on disk is unchanged';
    } catch {
      return 'nothing was written';
    }
  };
  let fd: number;
  try {
    try {
      fd = openSync(tmp, flags, mode);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // One of ours from an earlier write that failed half-way (a link is removed, not followed).
      rmSync(tmp, { force: true });
      fd = openSync(tmp, flags, mode);
    }
  } catch (error) {
    throw new DataFileError(file, `could not be written: ${errnoText(error)}; ${kept()}`, 'io');
  }
  try {
    const data = Buffer.from(text, 'utf8');
    for (let offset = 0; offset < data.length; ) offset += io.writeSync(fd, data, offset, data.length - offset);
    io.fsyncSync(fd);
    closeSync(fd);
    fd = -1;
    renameSync(tmp, file);
  } catch (error) {
    if (fd !== -1) closeSync(fd);
    rmSync(tmp, { force: true });
    throw new DataFileError(file, `could not be written: ${errnoText(error)}; ${kept()}`, 'io');
  }
  if (process.platform !== 'win32') {
    // The rename itself reaches the disk with the folder's entry.
    try {
      const dirFd = openSync(dirname(file), fsConstants.O_RDONLY);
      try {
        fsyncSync(dirFd);
      } finally {
        closeSync(dirFd);
      }
    } catch {
      // Some file systems refuse fsync on a folder; the file itself is synced.
    }
  }
}

/** A JSON parse failure in words that never quote the file: where it is, not what is there. */
export function jsonProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : '';
  if (/Unexpected end of JSON input/i.test(message)) return 'is not valid JSON (it ends too early)';
  const position = /position (\d+)/.exec(message);
  return position === null ? 'is not valid JSON' : `is not valid JSON (at byte ${position[1]})`;
}

// ---------------------------------------------------------------------------------------------
// The data folder itself.

/** A data folder this user cannot trust (another user's), or that is not a folder. */
export class DataDirError extends Error {
  override readonly name = 'DataDirError';
}

export interface DataDirCheck {
  /** The folder as given. */
  dir: string;
  /** Where it really is (a linked folder resolved), or null when it does not exist. */
  real: string | null;
  /** One line when its mode was tightened to 0700; null otherwise. */
  tightened: string | null;
}

/**
 * The data folder, created 0700 when `create` is set, resolved (a link to a folder is judged by
 * its target) and checked: a folder of another user is refused (its owner could read our token or
 * choose what runs); ours, open to others, is made 0700 (one line says so). Windows' folders under
 * %APPDATA% are the user's by their ACL and are not checked.
 */
export function checkDataDir(dir: string, options: { create: boolean }): DataDirCheck {
  if (options.create) {
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    } catch (error) {
      throw new DataDirError(`data folder ${dir}: cannot be created: ${errnoText(error)}`);
    }
  }
  let real: string;
  try {
    real = realpathSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !options.create) return { dir, real: null, tightened: null };
    throw new DataDirError(`data folder ${dir}: cannot be resolved: ${errnoText(error)}`);
  }
  const named = real === dir ? dir : `${dir} (a link to ${real})`;
  const stat = statSync(real);
  if (!stat.isDirectory()) throw new DataDirError(`data folder ${named}: is not a folder`);
  const uid = currentUid();
  if (uid === null) return { dir, real, tightened: null };
  if (stat.uid !== uid) throw new DataDirError(`data folder ${named}: belongs to user ${stat.uid}, not to this user (${uid}): refused (its owner could read the token or change what runs); use a folder of your own (--data-dir or GPU_SHARE_DATA_DIR)`);
  let tightened: string | null = null;
  if ((stat.mode & 0o077) !== 0) {
    try {
      chmodSync(real, 0o700);
    } catch (error) {
      throw new DataDirError(`data folder ${named}: is open to other users (mode ${(stat.mode & 0o777).toString(8)}) and cannot be made private: ${errnoText(error)}`);
    }
    tightened = `data: folder ${named} was open to other users (mode ${(stat.mode & 0o777).toString(8)}); made it this user's only (0700)`;
  }
  return { dir, real, tightened };
}
