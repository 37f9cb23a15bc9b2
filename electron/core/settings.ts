/**
 * The app's settings: one JSON schema, stored by conf in one file that `gpu-share serve` and the
 * app both open (openNodeSettings). The API token is created here on first start.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { backupCopy } from './data-files.js';
import Conf from 'conf';

export type Settings = {
  version: 1;
  /** The loopback API's port. */
  apiPort: number;
  /** Bearer token for the control API and the gateway (the dashboard's: interactive). */
  apiToken: string;
  /** Extra gateway tokens and the priority class each gets. */
  gatewayTokens: { token: string; priority: 'interactive' | 'background' | 'lab'; label: string }[];
  launchAtLogin: boolean;
  labPaused: boolean;
  draining: boolean;
  /** Idle-unload minutes for profiles that do not set their own; null = never. */
  idleUnloadMinutes: number | null;
  /** Shared registries: accept other users' segments and create ours for every local user
   *  (mode 0666). This trusts every local user with our engines' pacing; off by default. */
  sharedRegistry: boolean;
};

export const SETTINGS_VERSION = 1;

/** JSON schema (per property, as conf takes it). */
export const SETTINGS_SCHEMA = {
  version: { type: 'integer', const: 1 },
  apiPort: { type: 'integer', minimum: 1, maximum: 65535 },
  apiToken: { type: 'string', pattern: '^[A-Za-z0-9_-]{32,128}$' },
  gatewayTokens: {
    type: 'array',
    maxItems: 64,
    items: {
      type: 'object',
      additionalProperties: false,
      required: ['token', 'priority', 'label'],
      properties: {
        token: { type: 'string', pattern: '^[A-Za-z0-9_-]{32,128}$' },
        priority: { enum: ['interactive', 'background', 'lab'] },
        label: { type: 'string', maxLength: 64 },
      },
    },
  },
  launchAtLogin: { type: 'boolean' },
  labPaused: { type: 'boolean' },
  draining: { type: 'boolean' },
  idleUnloadMinutes: { type: ['integer', 'null'], minimum: 0, maximum: 100000 },
  sharedRegistry: { type: 'boolean' },
} as const;

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

/** A conf-like store as a SettingsStore. */
export interface ConfLike {
  store: Settings;
  readonly path: string;
}

/** What tells a changed file apart: inode, size and modification time ('' when it is gone). */
function fileStamp(path: string): string {
  try {
    const stat = statSync(path);
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
export function settingsFrom(conf: ConfLike, onProblem: (message: string) => void = () => undefined): SettingsStore {
  let current = conf.store;
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
      conf.store = next; // conf validates against the schema and throws on a bad value
      current = next;
      seen = fileStamp(conf.path);
      return structuredClone(next);
    },
  };
}

/** Conf's options shared by both stores: the schema, no dot-notation, owner-only (the token). */
export function settingsConfOptions(apiPort: number): {
  configName: string;
  schema: typeof SETTINGS_SCHEMA;
  defaults: Settings;
  clearInvalidConfig: false;
  accessPropertiesByDotNotation: false;
  configFileMode: number;
} {
  return { configName: 'settings', schema: SETTINGS_SCHEMA, defaults: defaultSettings(apiPort), clearInvalidConfig: false, accessPropertiesByDotNotation: false, configFileMode: 0o600 };
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
    if (!existsSync(file)) throw new SettingsFileError(`settings file ${file}: ${message}`);
    const backup = backupCopy(file, nowMs);
    rmSync(file, { force: true });
    try {
      return { conf: open(), loadProblem: { file, backup, message: `settings file ${file} could not be used (${message}); it was kept as ${backup} and the defaults are in use (a new dashboard token)` } };
    } catch (again) {
      throw new SettingsFileError(`settings file ${file}: ${again instanceof Error ? again.message : String(again)}`);
    }
  }
}

/** The settings file in `dataDir` (serve and the app); a bad file is set aside (loadProblem says so). */
export function openNodeSettings(dataDir: string, apiPort: number, onProblem?: (message: string) => void): SettingsStore {
  const file = join(dataDir, 'settings.json');
  const { conf, loadProblem } = openWithRecovery(
    () => new Conf<Settings>({ cwd: dataDir, fileExtension: 'json', watch: false, ...settingsConfOptions(apiPort) } as ConstructorParameters<typeof Conf<Settings>>[0]),
    file,
  );
  return { ...settingsFrom(conf, onProblem), loadProblem };
}
