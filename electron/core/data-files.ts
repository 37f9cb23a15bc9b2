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
import { chmodSync, constants as fsConstants, copyFileSync, lstatSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

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
  for (let n = 1; ; n++) {
    const backup = `${file}.bad-${stamp}${n === 1 ? '' : `-${n}`}`;
    try {
      copyFileSync(file, backup, fsConstants.COPYFILE_EXCL);
      if (process.platform !== 'win32') chmodSync(backup, 0o600);
      return backup;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/** A data file's JSON, forgiving a leading byte-order mark (editors on Windows may write one). */
export function parseJsonFile(text: string): unknown {
  return JSON.parse(text.startsWith('\uFEFF') ? text.slice(1) : text) as unknown;
}
