/**
 * What the local user added on this machine: engine executables (which the dashboard may then
 * offer over HTTP) and folders to look for models in. `<data dir>/local.json`,
 * `{ "version": 1, "executables": [...], "modelFolders": [...] }`, absolute paths.
 *
 * Executables are added only from this machine (`gpu-share executables --add`, the app's window may create a profile with any executable):
 * nothing over HTTP writes them. The file is read without following a link, as a regular file of
 * at most 1 MiB; one that is not usable is named with why, and the additions are then empty
 * (nothing is written over it).
 */
import { mkdirSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import * as v from 'valibot';
import { DataFileError, readJsonDataFile, writeDataFile } from '../data-files.js';
import { examine, got, pathText, strictRecord } from '../schema.js';

export const LOCAL_ADDITIONS_FILE = 'local.json';
const FILE_MAX_BYTES = 1024 * 1024;
const PATHS_MAX = 256;

const ABSOLUTE_PATH = v.pipe(
  v.string(got('must be a string')),
  v.minLength(1, 'must not be empty'),
  v.maxLength(4096, 'must be at most 4096 characters'),
  v.check((path) => !path.includes('\u0000') && isAbsolute(path), (issue) => `must be an absolute path, got ${JSON.stringify(String(issue.input).slice(0, 200))}`),
);
const PATH_LIST = v.pipe(v.array(ABSOLUTE_PATH, got('must be a list of absolute paths')), v.maxLength(PATHS_MAX, `must hold at most ${PATHS_MAX} paths`));

const DOCUMENT = strictRecord(
  {
    version: v.literal(1, got('must be 1')),
    executables: v.optional(PATH_LIST, () => []),
    modelFolders: v.optional(PATH_LIST, () => []),
  },
  'an object {"version": 1, "executables": [...], "modelFolders": [...]}',
  () => 'is not a field of this file (known: version, executables, modelFolders)',
);

export interface LocalAdditions {
  executables: string[];
  modelFolders: string[];
}

export class LocalAdditionsError extends Error {
  override readonly name = 'LocalAdditionsError';
}

export class LocalAdditionsStore {
  readonly file: string;
  /** Why the file on disk could not be used (then nothing is added); null when it could. */
  readonly loadProblem: string | null;
  private additions: LocalAdditions;

  constructor(private readonly dataDir: string) {
    this.file = join(dataDir, LOCAL_ADDITIONS_FILE);
    const read = readAdditions(this.file);
    this.additions = read.ok ? read.value : { executables: [], modelFolders: [] };
    this.loadProblem = read.ok ? null : read.problem;
  }

  get(): LocalAdditions {
    return structuredClone(this.additions);
  }

  /** What the file holds now (another process, `gpu-share executables --add`, may have changed it
   *  since): read again, none when it cannot be used. */
  current(): LocalAdditions {
    const read = readAdditions(this.file);
    return read.ok ? read.value : { executables: [], modelFolders: [] };
  }

  /** Adds a path to a list (once); returns whether it was new. */
  add(list: keyof LocalAdditions, path: string): boolean {
    const checked = checkPath(path, list);
    if (this.additions[list].includes(checked)) return false;
    if (this.additions[list].length >= PATHS_MAX) throw new LocalAdditionsError(`${list}: at most ${PATHS_MAX} paths`);
    this.commit({ ...this.additions, [list]: [...this.additions[list], checked] });
    return true;
  }

  /** Removes a path from a list; returns whether it was there. */
  remove(list: keyof LocalAdditions, path: string): boolean {
    if (!this.additions[list].includes(path)) return false;
    this.commit({ ...this.additions, [list]: this.additions[list].filter((p) => p !== path) });
    return true;
  }

  private commit(next: LocalAdditions): void {
    if (this.loadProblem !== null) throw new LocalAdditionsError(`${this.loadProblem}; fix or remove it first`);
    mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
    try {
      writeDataFile(this.file, `${JSON.stringify({ version: 1, ...next }, null, 2)}\n`);
    } catch (error) {
      if (error instanceof DataFileError) throw new LocalAdditionsError(error.message);
      throw error;
    }
    this.additions = next;
  }
}

function checkPath(path: string, list: keyof LocalAdditions): string {
  const checked = examine(ABSOLUTE_PATH, path);
  if (!checked.ok) throw new LocalAdditionsError(`${list}: ${checked.problem.message}`);
  return checked.value;
}

type Read = { ok: true; value: LocalAdditions } | { ok: false; problem: string };

/** The file's additions; a missing file is none. Never follows a link or waits on a FIFO. */
export function readAdditions(file: string): Read {
  const read = readJsonDataFile(file, FILE_MAX_BYTES);
  if (read.kind === 'bad') return { ok: false, problem: read.problem };
  if (read.kind === 'none') return { ok: true, value: { executables: [], modelFolders: [] } };
  const checked = examine(DOCUMENT, read.value);
  if (!checked.ok) return { ok: false, problem: `${file}: ${pathText('', checked.problem.keys) || 'the document'}: ${checked.problem.message}` };
  return { ok: true, value: { executables: checked.value.executables, modelFolders: checked.value.modelFolders } };
}
