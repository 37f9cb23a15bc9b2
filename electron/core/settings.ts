/**
 * The app's settings: one JSON schema, stored by conf in one file that `gpu-share serve` and the
 * app both open (openNodeSettings). The API token is created here on first start.
 */
import { randomBytes } from 'node:crypto';
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
}

export class SettingsFileError extends Error {
  override readonly name = 'SettingsFileError';
}

/** A conf-like store as a SettingsStore. */
export interface ConfLike {
  store: Settings;
  readonly path: string;
}

export function settingsFrom(conf: ConfLike): SettingsStore {
  // Read once: `conf.store` reads and validates the file on every access, and the state (several
  // times a second) asks for the settings. This process is the file's one writer.
  let current = conf.store;
  return {
    file: conf.path,
    get: () => structuredClone(current),
    update(patch) {
      const next = { ...current, ...patch };
      conf.store = next; // conf validates against the schema and throws on a bad value
      current = next;
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

/** The settings file in `dataDir` (serve and the app); a bad file is a SettingsFileError naming it. */
export function openNodeSettings(dataDir: string, apiPort: number): SettingsStore {
  try {
    const conf = new Conf<Settings>({ cwd: dataDir, fileExtension: 'json', watch: false, ...settingsConfOptions(apiPort) } as ConstructorParameters<typeof Conf<Settings>>[0]);
    return settingsFrom(conf);
  } catch (error) {
    throw new SettingsFileError(`settings file ${dataDir}/settings.json: ${error instanceof Error ? error.message : String(error)} (fix or remove it; it was left as it is)`);
  }
}
