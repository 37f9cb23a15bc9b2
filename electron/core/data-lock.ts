/**
 * One server per data folder: `gpu-share serve` and the app hold `<data dir>/server.lock` while
 * they run. The file names its holder (pid, the process's start, host, boot, what it is); a second
 * server on the folder refuses with one line naming it. A lock whose holder is gone (its pid dead,
 * or now another process's, or left from before a reboot) is taken over. The CLI's read-only
 * commands (engines, plan, peers, devices) take no lock.
 */
import { closeSync, constants as fsConstants, fsyncSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { DataFileError, checkDataDir, readDataFile, tidyDataDir } from './data-files.js';
import { linuxProcessStartTicks } from '../../native/process-tree-linux.js';
import { processExists } from './entry-point.js';

export const LOCK_NAME = 'server.lock';

export interface LockHolder {
  pid: number;
  /** What holds it: `serve` or `app`. */
  what: string;
  host: string;
  /** When the holder started, ISO. */
  startedAt: string;
  /** Linux: the kernel's boot id and the process's start in clock ticks since boot; null elsewhere. */
  bootId: string | null;
  procStart: number | null;
}

export class DataLockError extends Error {
  override readonly name = 'DataLockError';
}

export interface DataLock {
  readonly file: string;
  /** One line when a stale lock was taken over; null otherwise. */
  readonly tookOver: string | null;
  release(): void;
}

function readProc(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

const bootId = (): string | null => readProc('/proc/sys/kernel/random/boot_id')?.trim() ?? null;

/** Why the holder is gone, or null when it may still run (or cannot be told from here). */
export function holderGone(holder: LockHolder, here: { host: string; bootId: string | null; procStartOf: (pid: number) => number | null; alive: (pid: number) => boolean }): string | null {
  if (holder.host !== here.host) return null;
  if (holder.bootId !== null && here.bootId !== null && holder.bootId !== here.bootId) return 'it was left from before a restart of this machine';
  if (!here.alive(holder.pid)) return `pid ${holder.pid} is not running`;
  const start = here.procStartOf(holder.pid);
  if (holder.procStart !== null && start !== null && start !== holder.procStart) return `pid ${holder.pid} is now another process`;
  return null;
}

function parseHolder(text: string): LockHolder | null {
  try {
    const v = JSON.parse(text) as Partial<LockHolder> | null;
    if (v === null || typeof v !== 'object' || typeof v.pid !== 'number' || typeof v.host !== 'string') return null;
    return { pid: v.pid, what: typeof v.what === 'string' ? v.what : 'a server', host: v.host, startedAt: typeof v.startedAt === 'string' ? v.startedAt : 'at an unknown time', bootId: typeof v.bootId === 'string' ? v.bootId : null, procStart: typeof v.procStart === 'number' ? v.procStart : null };
  } catch {
    return null;
  }
}

const O_NOFOLLOW = fsConstants.O_NOFOLLOW ?? 0;

/** Takes the data folder's lock for `what` (`serve`, `app`), or throws a DataLockError naming the holder. */
export function acquireDataLock(dataDir: string, what: string): DataLock {
  const file = join(dataDir, LOCK_NAME);
  const me: LockHolder = { pid: process.pid, what, host: hostname(), startedAt: new Date(Date.now() - process.uptime() * 1000).toISOString(), bootId: bootId(), procStart: linuxProcessStartTicks(process.pid) };
  let tookOver: string | null = null;
  for (let attempt = 0; attempt < 5; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | O_NOFOLLOW, 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new DataLockError(`data folder lock ${file}: cannot be created (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
      let text: string | null;
      try {
        text = readDataFile(file, 64 * 1024);
      } catch (readError) {
        if (readError instanceof DataFileError) throw new DataLockError(`data folder lock ${readError.message}`);
        throw readError;
      }
      if (text === null) continue; // released meanwhile
      const holder = parseHolder(text);
      if (holder === null) {
        // Being written this instant, or left half-written by a holder that died: give a writer a
        // moment, then count it stale.
        if (attempt < 3) {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
          continue;
        }
        tookOver = `data: took over the lock ${file} (unreadable, left by a server that died while writing it)`;
        rmSync(file, { force: true });
        continue;
      }
      const gone = holderGone(holder, { host: me.host, bootId: me.bootId, procStartOf: linuxProcessStartTicks, alive: processExists });
      if (gone === null) {
        const elsewhere = holder.host === me.host ? '' : `; if that server is gone, remove ${file}`;
        throw new DataLockError(`data folder ${dataDir} is in use by ${holder.what} (pid ${holder.pid} on ${holder.host}, started ${holder.startedAt}): one server per data folder; stop it, or use another --data-dir${elsewhere}`);
      }
      tookOver = `data: took over the lock of ${holder.what} (pid ${holder.pid}, started ${holder.startedAt}): ${gone}`;
      rmSync(file, { force: true });
      continue;
    }
    try {
      const data = Buffer.from(`${JSON.stringify(me)}\n`);
      writeSync(fd, data, 0, data.length);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      process.off('exit', release);
      // Only our own: never a lock another server took over after us.
      try {
        if (parseHolder(readDataFile(file, 64 * 1024) ?? '')?.pid === process.pid) rmSync(file, { force: true });
      } catch {
        // Not ours to remove.
      }
    };
    process.once('exit', release);
    return { file, tookOver, release };
  }
  throw new DataLockError(`data folder lock ${file}: could not be taken (it kept changing)`);
}

/**
 * The data folder as a server opens it: ours (created 0700; another user's refused; ours open to
 * others made private), held (one server per folder), and tidied (temporary files a crash left,
 * files readable by others). Each thing done is said in one line. Throws as checkDataDir and
 * acquireDataLock do.
 */
export function openDataDir(dataDir: string, what: string, say: (line: string) => void): DataLock {
  const folder = checkDataDir(dataDir, { create: true });
  if (folder.tightened !== null) say(folder.tightened);
  const lock = acquireDataLock(dataDir, what);
  try {
    if (lock.tookOver !== null) say(lock.tookOver);
    const tidied = tidyDataDir(dataDir);
    if (tidied.removedTemps.length > 0) say(`data: removed ${tidied.removedTemps.length} temporary file(s) left by an earlier crash`);
    if (tidied.tightened.length > 0) say(`data: made ${tidied.tightened.join(', ')} readable by this user only`);
  } catch (error) {
    lock.release();
    throw error;
  }
  return lock;
}
