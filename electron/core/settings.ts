/**
 * The app's settings: one valibot schema (the type inferred from it), stored by conf in one file that `gpu-share serve` and the
 * app both open (openNodeSettings). The API token is created here on first start.
 */
import { randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import * as v from 'valibot';
import { backupCopy, DataFileError, jsonProblem, parseJsonFile, readDataFile, readJsonDataFile, writeDataFile } from './data-files.js';
import { IDLE_UNLOAD_MINUTES } from './contract.js';
import { DEFAULT_CONTROLS } from './planner/snapshot.js';
import type { OperatorControls } from './planner/types.js';
import { examine, got, isRecord, openRecord, optionalEntries, pathText, strictRecord, TRUE_OR_FALSE, wholeNumber } from './schema.js';

export const SETTINGS_VERSION = 1;

const TOKEN_RE = /^[A-Za-z0-9_-]{32,128}$/;
const TOKEN = v.pipe(v.string(got('must be a token of 32 to 128 characters of A-Z, a-z, 0-9, "_" and "-"')), v.regex(TOKEN_RE, got('must be a token of 32 to 128 characters of A-Z, a-z, 0-9, "_" and "-"')));
const PRIORITY_NAMES = ['interactive', 'background', 'lab'] as const;

const SETTINGS_FIELDS = {
  version: v.literal(SETTINGS_VERSION, got(`must be ${SETTINGS_VERSION}`)),
  /** The loopback API's port. */
  apiPort: wholeNumber(1, 65535, 'a port from 1 to 65535'),
  /** Bearer token for the control API and the gateway (the dashboard's: interactive). */
  apiToken: TOKEN,
  /** Extra gateway tokens and the priority class each gets. */
  gatewayTokens: v.pipe(
    v.array(
      strictRecord(
        {
          token: TOKEN,
          priority: v.picklist(PRIORITY_NAMES, got(`must be one of ${PRIORITY_NAMES.join(', ')}`)),
          label: v.pipe(v.string(got('must be a label of at most 64 characters')), v.maxLength(64, got('must be a label of at most 64 characters'))),
        },
        'an object {"token", "priority", "label"}',
        () => 'unknown field (token, priority, label)',
      ),
      got('must be a list of {"token", "priority", "label"}'),
    ),
    v.maxLength(64, 'must hold at most 64 tokens'),
  ),
  launchAtLogin: TRUE_OR_FALSE,
  labPaused: TRUE_OR_FALSE,
  draining: TRUE_OR_FALSE,
  /** Idle-unload minutes for profiles that do not set their own; null = never. */
  idleUnloadMinutes: IDLE_UNLOAD_MINUTES,
  /** Shared registries: accept other users' segments and create ours for every local user
   *  (mode 0666). This trusts every local user with our engines' pacing; off by default. */
  sharedRegistry: TRUE_OR_FALSE,
  /** The planner policy's revision chosen by the operator (`PUT /api/policy`); absent: the
   *  build's default. A name this build does not know is said once and the default is used. */
  policyRevision: v.optional(v.pipe(v.string(got('must be a policy revision name')), v.maxLength(80, got('must be a policy revision name of at most 80 characters')))),
};

/** The settings in use: every field. Keys it does not name (a newer version's) are kept as they
 *  are, not refused: a settings file set aside costs the user the dashboard's token. */
export const SETTINGS = openRecord(SETTINGS_FIELDS, 'an object');
export type Settings = v.InferOutput<v.ObjectSchema<typeof SETTINGS_FIELDS, undefined>>;
/** The file: any field may be missing (it takes its default). */
export const SETTINGS_FILE = openRecord(optionalEntries(SETTINGS_FIELDS), 'an object');

/** The settings' problem as `path: why`, or null. */
function settingsProblem(schema: typeof SETTINGS | typeof SETTINGS_FILE, value: unknown): string | null {
  const checked = examine(schema, value);
  return checked.ok ? null : `${checked.problem.keys.length === 0 ? '' : `${pathText('', checked.problem.keys)}: `}${checked.problem.message}`;
}

/** The file's text: JSON that SETTINGS_FILE accepts, else a SettingsFileError saying why. The
 *  message never quotes the file (it holds tokens): not the JSON parser's excerpt, not the value a
 *  field got. */
function parseSettingsFile(text: string): Partial<Settings> {
  let value: unknown;
  try {
    value = parseJsonFile(text);
  } catch (error) {
    throw new SettingsFileError(jsonProblem(error));
  }
  const problem = settingsProblem(SETTINGS_FILE, value);
  if (problem !== null) throw new SettingsFileError(withoutValue(problem));
  return value as Partial<Settings>;
}

/** `apiToken: must be a token …, got "…"` without what it got. */
const withoutValue = (problem: string): string => {
  const at = problem.indexOf(', got ');
  return at === -1 ? problem : problem.slice(0, at);
};

/** What the data folder's settings.json says, read without creating or changing anything. */
export interface FolderSettings {
  apiPort: number | null;
  apiToken: string | null;
  controls: OperatorControls;
  policyRevision: string | null;
  /** Why the file could not be used, when it could not. */
  problem: string | null;
}

/** The settings file's fields that `plan` and `serve`'s port use, each checked: a field of the wrong type is named and
 *  left at its default, the rest is used. */
export function readFolderSettings(dataDir: string): FolderSettings {
  const file = join(dataDir, 'settings.json');
  const none: FolderSettings = { apiPort: null, apiToken: null, controls: DEFAULT_CONTROLS, policyRevision: null, problem: null };
  // As the server reads it: never through a link, never waiting on a FIFO, this user's, bounded.
  const read = readJsonDataFile(file);
  if (read.kind === 'bad') return { ...none, problem: read.problem };
  if (read.kind === 'none') return { ...none, problem: `no ${file}` };
  if (!isRecord(read.value)) return { ...none, problem: `${file} is not a JSON object` };
  const o = read.value;
  const problems: string[] = [];
  const flag = (name: string): boolean => {
    const v = o[name];
    if (v === undefined) return false;
    if (typeof v === 'boolean') return v;
    problems.push(`${name}: must be true or false`);
    return false;
  };
  const port = o['apiPort'];
  const apiPort = typeof port === 'number' && Number.isInteger(port) && port > 0 && port < 65536 ? port : null;
  if (port !== undefined && apiPort === null) problems.push('apiPort: must be a port from 1 to 65535');
  const token = o['apiToken'];
  const revision = o['policyRevision'];
  if (revision !== undefined && typeof revision !== 'string') problems.push('policyRevision: must be a revision name');
  return {
    apiPort,
    apiToken: typeof token === 'string' && token !== '' ? token : null,
    controls: { draining: flag('draining'), labPaused: flag('labPaused'), allowedCapabilities: null },
    policyRevision: typeof revision === 'string' ? revision : null,
    problem: problems.length === 0 ? null : `${file}: ${problems.join('; ')}`,
  };
}

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

export function defaultSettings(apiPort: number): Settings {
  return { version: 1, apiPort, apiToken: newToken(), gatewayTokens: [], launchAtLogin: false, labPaused: false, draining: false, idleUnloadMinutes: null, sharedRegistry: false };
}

/** What the core needs of a settings store. */
export interface SettingsStore {
  get(): Settings;
  update(patch: Partial<Omit<Settings, 'version'>>): Settings;
  readonly file: string;
  /** Set when the file found at start was unusable and has been set aside. */
  readonly loadProblem?: SettingsLoadProblem | null;
}

export class SettingsFileError extends Error {
  override readonly name = 'SettingsFileError';
}

/** A store whose `store` reads the file (throwing on a bad one) and writes it when set. */
export interface ConfLike {
  store: Settings;
  readonly path: string;
}

/** What tells a changed file apart: inode, size and modification time ('' when it is gone). */
function fileStamp(path: string): string {
  try {
    // The entry itself: a link or FIFO swapped in changes it, and the re-read refuses it.
    const stat = lstatSync(path);
    return `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
  } catch {
    return '';
  }
}

/**
 * The settings as the file has them now. The file is checked (one stat) whenever they are read,
 * and read again when it changed: a token deleted from it stops working at the next request, and
 * an update merges into what the file holds, never into a stale copy (which would write the
 * deleted token back). A file that no longer parses or validates keeps the last good settings
 * (`onProblem` says why); keys missing from it take their defaults, except the API token, which
 * stays what it was (the dashboard would lose its way in otherwise).
 */
export function settingsFrom(conf: SettingsFile, onProblem: (message: string) => void = () => undefined): SettingsStore {
  let current = conf.opened;
  let seen = fileStamp(conf.path);
  let lastProblem = '';
  const refresh = (): void => {
    const stamp = fileStamp(conf.path);
    if (stamp === seen) return;
    seen = stamp;
    if (stamp === '') return; // removed: the last settings stand until it is written again
    try {
      const read = conf.store as Partial<Settings>;
      current = { ...defaultSettings(current.apiPort), apiToken: current.apiToken, ...read, version: 1 };
      lastProblem = '';
    } catch (error) {
      const message = `settings file ${conf.path}: ${error instanceof Error ? error.message : String(error)}; the last good settings stay in use`;
      if (message !== lastProblem) onProblem(message);
      lastProblem = message;
    }
  };
  return {
    file: conf.path,
    get: () => {
      refresh();
      return structuredClone(current);
    },
    update(patch) {
      refresh();
      const next = { ...current, ...patch };
      const problem = settingsProblem(SETTINGS, next);
      if (problem !== null) throw new SettingsFileError(`settings ${problem} (nothing written)`);
      conf.store = next;
      current = next;
      seen = fileStamp(conf.path);
      return structuredClone(next);
    },
  };
}

/**
 * The settings file, read and written as every data file is (data-files.ts: no link followed, no
 * FIFO waited on, temp file + fsync + rename). Opening it fills in what the file lacks (a new API
 * token on first start) and writes that back.
 */
export class SettingsFile implements ConfLike {
  /** The settings as it opened them (read, with defaults filled in and written back). */
  readonly opened: Settings;

  constructor(
    readonly path: string,
    private readonly defaults: Settings,
  ) {
    const read = this.read();
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    this.opened = { ...defaults, ...read } as Settings;
    if (!isDeepStrictEqual(this.opened, read)) this.store = this.opened;
  }

  private read(): Partial<Settings> {
    let text: string | null;
    try {
      text = readDataFile(this.path);
    } catch (error) {
      if (error instanceof DataFileError) throw new SettingsFileError(error.problem, { cause: error });
      throw error;
    }
    return text === null ? {} : parseSettingsFile(text);
  }

  get store(): Settings {
    return { ...this.defaults, ...this.read() } as Settings;
  }

  set store(value: Settings) {
    try {
      writeDataFile(this.path, `${JSON.stringify(value, null, '\t')}\n`);
    } catch (error) {
      if (error instanceof DataFileError) throw new SettingsFileError(`settings file ${this.path}: ${error.problem}`);
      throw error;
    }
  }
}

/** A settings file that could not be used, and where its bytes were kept. */
export interface SettingsLoadProblem {
  file: string;
  backup: string;
  message: string;
}

/**
 * Opens a conf-like store; a file that is not JSON (an empty one included) or breaks the schema is
 * copied to `settings.json.bad-<time>`, removed, and the store opened afresh with the defaults (a
 * new API token), like the profiles. Anything else (a folder that cannot be read) is a
 * SettingsFileError naming the file.
 */
export function openWithRecovery<T extends ConfLike>(open: () => T, file: string, nowMs: number = Date.now()): { conf: T; loadProblem: SettingsLoadProblem | null } {
  try {
    return { conf: open(), loadProblem: null };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    // Not a regular file of this user, or not readable: refused as it is, nothing set aside.
    if (!exists(file) || (error instanceof Error && error.cause instanceof DataFileError)) throw new SettingsFileError(`settings file ${file}: ${message}`);
    const backup = backupCopy(file, nowMs);
    rmSync(file, { force: true });
    try {
      return { conf: open(), loadProblem: { file, backup, message: `settings file ${file} could not be used (${message}); it was kept as ${backup} and the defaults are in use (a new dashboard token)` } };
    } catch (again) {
      throw new SettingsFileError(`settings file ${file}: ${again instanceof Error ? again.message : String(again)}`);
    }
  }
}

const exists = (file: string): boolean => {
  try {
    lstatSync(file);
    return true;
  } catch {
    return false;
  }
};

/** The settings file in `dataDir` (serve and the app); a bad file is set aside (loadProblem says so). */
export function openNodeSettings(dataDir: string, apiPort: number, onProblem?: (message: string) => void): SettingsStore {
  const file = join(dataDir, 'settings.json');
  const { conf, loadProblem } = openWithRecovery(() => new SettingsFile(file, defaultSettings(apiPort)), file);
  // The file was just read to open it: not read a second time.
  return { ...settingsFrom(conf, onProblem), loadProblem };
}
