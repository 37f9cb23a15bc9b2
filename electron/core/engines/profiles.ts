/**
 * Profiles: what the user can launch. One JSON document, `<data dir>/profiles.json`,
 * `{ "version": 1, "profiles": [...] }`, read and written through `conf` (the CLI, `gpu-share
 * serve` and the app alike).
 *
 * Two validators guard it and must agree: `PROFILES_SCHEMA` (ajv, inside conf, on
 * every read and write) and the hand-written `validateProfile` / `validateProfilesDocument`, which
 * return typed values and say in plain words which JSON path is wrong. The hand validator is the
 * stricter of the two (a name's limit is 47 UTF-8 *bytes*, ids must be unique, text must be
 * well-formed Unicode: none of that is expressible in JSON schema), and it runs first.
 *
 * A file that is not valid JSON or breaks either validator is never lost: the store copies it to
 * `profiles.json.bad-<timestamp>` beside it, starts from an empty list and reports the problem in
 * `loadProblem`.
 */
import { readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import Conf from 'conf';
import { WEIGHT_MAX, WEIGHT_MIN } from '../contract.js';
import { backupCopy } from '../data-files.js';
import { PRIORITIES, type Priority } from '../planner/policy.js';

export type { Priority } from '../planner/policy.js';

export type EngineKind = 'builtin' | 'llama-server' | 'llamafile' | 'opencoti-llamafile' | 'command';
export const ENGINE_KINDS: readonly EngineKind[] = ['builtin', 'llama-server', 'llamafile', 'opencoti-llamafile', 'command'];

/** A stored profile: every field present, defaults filled. (A type alias, not an interface, so
 *  that it is assignable to conf's `Record<string, unknown>` constraint.) */
export type Profile = {
  /** Slug `[a-z0-9-]{1,40}`, unique in the file. */
  id: string;
  /** 1..47 bytes of UTF-8, no control characters: it becomes the registry display name (char[48]). */
  name: string;
  /** Non-empty, no duplicates, each `[a-z0-9._-]{1,32}`. */
  capabilities: string[];
  engineKind: EngineKind;
  /** The model file. Required (non-empty) except for the 'command' kind, where it may be null. */
  modelPath: string | null;
  /** Integer 1..10_000_000. */
  contextSize: number;
  /** Integer 0..100_000; 99 (the default) means all layers. */
  gpuLayers: number;
  /** Integer ≥ 1, or null = the engine decides. */
  threads: number | null;
  /** 0.01..100, or null = `DEFAULT_WEIGHT_BY_PRIORITY[priority]`. */
  weight: number | null;
  priority: Priority;
  /** Never evicted by the planner. */
  pinned: boolean;
  /** Integer ≥ 0, or null = never unload when idle. */
  idleUnloadMinutes: number | null;
  /** Extra arguments appended to the engine's command line. */
  args: string[];
  /** Extra environment; names `[A-Za-z_][A-Za-z0-9_]*`. */
  env: Record<string, string>;
  /** The executable for 'command' (required), 'llama-server', 'llamafile', 'opencoti-llamafile'
   *  (null = the kind's default executable); always null for 'builtin'. */
  command: string | null;
};

export type ProfilesDocument = {
  version: 1;
  profiles: Profile[];
};

/** What `ProfileStore.create` takes: the fields without a default are required. */
export type ProfileInput = {
  /** Derived from the name when absent. */
  id?: string;
  name: string;
  capabilities: string[];
  engineKind: EngineKind;
  modelPath?: string | null;
  contextSize: number;
  gpuLayers?: number;
  threads?: number | null;
  weight?: number | null;
  priority: Priority;
  pinned?: boolean;
  idleUnloadMinutes?: number | null;
  args?: string[];
  env?: Record<string, string>;
  command?: string | null;
};

/** What `ProfileStore.update` takes: any field but the id. */
export type ProfilePatch = Partial<Omit<ProfileInput, 'id'>>;

export const PROFILES_DOCUMENT_VERSION = 1;
export const PROFILE_ID_MAX = 40;
export const PROFILE_NAME_MAX_BYTES = 47;
export const CONTEXT_SIZE_MAX = 10_000_000;
export const GPU_LAYERS_MAX = 100_000;
export const DEFAULT_GPU_LAYERS = 99;

export const DEFAULT_WEIGHT_BY_PRIORITY: Readonly<Record<Priority, number>> = Object.freeze({ interactive: 3, background: 1, lab: 1 });

/** The weight the engine joins the registry with: its own, else its priority's default. */
export function effectiveWeight(profile: Pick<Profile, 'weight' | 'priority'>): number {
  return profile.weight ?? DEFAULT_WEIGHT_BY_PRIORITY[profile.priority];
}

// ---------------------------------------------------------------------------------------------
// JSON schema (draft 2020-12, as conf 15 compiles it with ajv: allErrors,
// useDefaults, strict). Plain data, no imports: the Electron shell passes the same object.

const ID_PATTERN = '^[a-z0-9-]{1,40}$';
const CAPABILITY_PATTERN = '^[a-z0-9._-]{1,32}$';
const ENV_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';
/** At least one non-space character, no C0 control characters or DEL. */
const NAME_PATTERN = '^(?=.*\\S)[^\\u0000-\\u001f\\u007f]+$';
/** No NUL: it cannot pass through argv, environment or a path. */
const NO_NUL_PATTERN = '^[^\\u0000]*$';

const nonEmptyText = { type: 'string', minLength: 1, pattern: NO_NUL_PATTERN } as const;

/** One profile. Fields with a `default` may be missing in a hand-written file (ajv fills them
 *  in, and so does `validateProfile`). */
export const PROFILE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'name', 'capabilities', 'engineKind', 'contextSize', 'priority'],
  properties: {
    id: { type: 'string', pattern: ID_PATTERN },
    // maxLength counts code points; the real limit, 47 UTF-8 bytes, is checked by validateProfile.
    name: { type: 'string', minLength: 1, maxLength: PROFILE_NAME_MAX_BYTES, pattern: NAME_PATTERN },
    capabilities: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', pattern: CAPABILITY_PATTERN } },
    engineKind: { type: 'string', enum: ENGINE_KINDS },
    modelPath: { anyOf: [nonEmptyText, { type: 'null' }], default: null },
    contextSize: { type: 'integer', minimum: 1, maximum: CONTEXT_SIZE_MAX },
    gpuLayers: { type: 'integer', minimum: 0, maximum: GPU_LAYERS_MAX, default: DEFAULT_GPU_LAYERS },
    threads: { anyOf: [{ type: 'integer', minimum: 1 }, { type: 'null' }], default: null },
    weight: { anyOf: [{ type: 'number', minimum: WEIGHT_MIN, maximum: WEIGHT_MAX }, { type: 'null' }], default: null },
    priority: { type: 'string', enum: PRIORITIES },
    pinned: { type: 'boolean', default: false },
    idleUnloadMinutes: { anyOf: [{ type: 'integer', minimum: 0 }, { type: 'null' }], default: null },
    args: { type: 'array', items: { type: 'string', pattern: NO_NUL_PATTERN }, default: [] },
    env: {
      type: 'object',
      propertyNames: { pattern: ENV_NAME_PATTERN },
      additionalProperties: { type: 'string', pattern: NO_NUL_PATTERN },
      default: {},
    },
    command: { anyOf: [nonEmptyText, { type: 'null' }], default: null },
  },
  // The `then` parts list their field as required: ajv may check them before `properties` has
  // filled the defaults in, and an absent field would pass vacuously.
  allOf: [
    {
      // Every kind but 'command' needs a model file.
      if: { properties: { engineKind: { not: { const: 'command' } } }, required: ['engineKind'] },
      then: { required: ['modelPath'], properties: { modelPath: nonEmptyText } },
    },
    {
      // A command engine needs its executable.
      if: { properties: { engineKind: { const: 'command' } }, required: ['engineKind'] },
      then: { required: ['command'], properties: { command: nonEmptyText } },
    },
    {
      // The built-in engine runs in Node: there is no executable to name.
      if: { properties: { engineKind: { const: 'builtin' } }, required: ['engineKind'] },
      then: { properties: { command: { type: 'null' } } },
    },
  ],
} as const;

/** The whole stored document. `__internal__` is where conf keeps migration state
 *  (only when migrations are configured); it is tolerated, never interpreted. */
export const PROFILES_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['version', 'profiles'],
  properties: {
    version: { type: 'integer', const: PROFILES_DOCUMENT_VERSION, default: PROFILES_DOCUMENT_VERSION },
    profiles: { type: 'array', items: PROFILE_SCHEMA, default: [] },
    __internal__: { type: 'object' },
  },
} as const;

/** PROFILES_SCHEMA split the way conf takes it: `schema` is the `properties`
 *  object, `rootSchema` everything else at the top level. */
export function profilesConfSchema(): {
  schema: (typeof PROFILES_SCHEMA)['properties'];
  rootSchema: Omit<typeof PROFILES_SCHEMA, 'properties' | 'type'>;
} {
  const { properties, type: _type, ...rootSchema } = PROFILES_SCHEMA;
  return { schema: properties, rootSchema };
}

export function emptyProfilesDocument(): ProfilesDocument {
  return { version: PROFILES_DOCUMENT_VERSION, profiles: [] };
}

// ---------------------------------------------------------------------------------------------
// Hand-written validation.

export class ProfileError extends Error {
  constructor(
    /** The file the value came from, or null (a value from a form, IPC or HTTP). */
    readonly file: string | null,
    /** JSON path of the offending value, e.g. `profiles[2].contextSize`. */
    readonly path: string,
    /** What was wrong, e.g. `must be a whole number from 1 to 10000000, got 0`. */
    readonly problem: string,
    /** The top-level profile field concerned (for a form to mark), or null. */
    readonly field: string | null = null,
  ) {
    super(`${file === null ? '' : `profiles file ${file}: `}${path === '' ? '' : `${path}: `}${problem}`);
    this.name = 'ProfileError';
  }
}

export class ProfileNotFoundError extends Error {
  constructor(readonly id: string) {
    super(`no profile with id "${id}"`);
    this.name = 'ProfileNotFoundError';
  }
}

const ID_RE = new RegExp(ID_PATTERN);
const CAPABILITY_RE = new RegExp(CAPABILITY_PATTERN);
const ENV_NAME_RE = new RegExp(ENV_NAME_PATTERN);
const CONTROL_RE = /[\u0000-\u001f\u007f]/u;
const LONE_SURROGATE_RE = /\p{Cs}/u;
const IDENTIFIER_RE = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

const PROFILE_FIELDS: ReadonlySet<string> = new Set(Object.keys(PROFILE_SCHEMA.properties));

/** A short rendering of a bad value for a message. */
function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function member(path: string, key: string): string {
  const step = IDENTIFIER_RE.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
  return path === '' ? step.replace(/^\./, '') : `${path}${step}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Validates a field-by-field source against the profile rules, throwing ProfileError. */
class Checker {
  constructor(
    private readonly file: string | null,
    private readonly where: string,
    private readonly source: Record<string, unknown>,
  ) {}

  fail(field: string, problem: string, subPath = ''): never {
    throw new ProfileError(this.file, `${member(this.where, field)}${subPath}`, problem, field);
  }

  has(field: string): boolean {
    return Object.hasOwn(this.source, field) && this.source[field] !== undefined;
  }

  value(field: string): unknown {
    return Object.hasOwn(this.source, field) ? this.source[field] : undefined;
  }

  text(field: string, value: unknown, subPath = ''): string {
    if (typeof value !== 'string') this.fail(field, `must be a string, got ${show(value)}`, subPath);
    if (value.includes('\u0000')) this.fail(field, 'must not contain a NUL character', subPath);
    if (LONE_SURROGATE_RE.test(value)) this.fail(field, 'must be well-formed Unicode (it holds a lone surrogate)', subPath);
    return value;
  }

  nonEmptyText(field: string, value: unknown): string {
    const text = this.text(field, value);
    if (text === '') this.fail(field, 'must not be empty');
    return text;
  }

  integer(field: string, min: number, max: number | null, fallback?: number): number {
    const value = this.has(field) || fallback === undefined ? this.value(field) : fallback;
    const range = max === null ? `≥ ${min}` : `from ${min} to ${max}`;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || (max !== null && value > max)) {
      this.fail(field, `must be a whole number ${range}, got ${show(value)}`);
    }
    return value;
  }

  nullableInteger(field: string, min: number, nullMeans: string): number | null {
    const value = this.value(field);
    if (value === undefined || value === null) return null;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
      this.fail(field, `must be a whole number ≥ ${min} or null (${nullMeans}), got ${show(value)}`);
    }
    return value;
  }
}

/**
 * A profile from untrusted data (a file, a form, IPC): missing fields that have a default get it;
 * anything else wrong throws ProfileError naming `where.field` (e.g. `profiles[2].contextSize`).
 * Cross-profile rules (unique ids) belong to validateProfilesDocument.
 */
export function validateProfile(value: unknown, where: string, file: string | null = null): Profile {
  if (!isPlainObject(value)) throw new ProfileError(file, where, `must be an object, got ${show(value)}`);
  const c: Checker = new Checker(file, where, value);

  for (const key of Object.keys(value)) {
    if (!PROFILE_FIELDS.has(key)) c.fail(key, `is not a profile field (known: ${[...PROFILE_FIELDS].join(', ')})`);
  }

  const idValue = c.value('id');
  if (typeof idValue !== 'string' || !ID_RE.test(idValue)) {
    c.fail('id', `must be 1 to ${PROFILE_ID_MAX} characters of a-z, 0-9 and '-', got ${show(idValue)}`);
  }
  const id = idValue;

  const name = c.text('name', c.value('name'));
  const nameBytes = Buffer.byteLength(name, 'utf8');
  if (nameBytes === 0 || name.trim() === '') c.fail('name', 'must not be empty or blank');
  if (nameBytes > PROFILE_NAME_MAX_BYTES) c.fail('name', `must be at most ${PROFILE_NAME_MAX_BYTES} bytes of UTF-8 (it is the registry display name), got ${nameBytes} bytes`);
  if (CONTROL_RE.test(name)) c.fail('name', 'must not contain control characters');

  const capsValue = c.value('capabilities');
  if (!Array.isArray(capsValue)) c.fail('capabilities', `must be a list of capability names, got ${show(capsValue)}`);
  if (capsValue.length === 0) c.fail('capabilities', 'must name at least one capability');
  const capabilities: string[] = [];
  capsValue.forEach((cap: unknown, i) => {
    if (typeof cap !== 'string' || !CAPABILITY_RE.test(cap)) {
      c.fail('capabilities', `must be 1 to 32 characters of a-z, 0-9, '.', '_' and '-', got ${show(cap)}`, `[${i}]`);
    }
    if (capabilities.includes(cap)) c.fail('capabilities', `repeats ${show(cap)}`, `[${i}]`);
    capabilities.push(cap);
  });

  const kindValue = c.value('engineKind');
  if (typeof kindValue !== 'string' || !(ENGINE_KINDS as readonly string[]).includes(kindValue)) {
    c.fail('engineKind', `must be one of ${ENGINE_KINDS.join(', ')}, got ${show(kindValue)}`);
  }
  const engineKind = kindValue as EngineKind;

  const modelValue = c.value('modelPath');
  let modelPath: string | null = null;
  if (modelValue === undefined || modelValue === null) {
    if (engineKind !== 'command') c.fail('modelPath', `is required for a ${engineKind} engine (only a command engine may have none)`);
  } else {
    modelPath = c.nonEmptyText('modelPath', modelValue);
  }

  const contextSize = c.integer('contextSize', 1, CONTEXT_SIZE_MAX);
  const gpuLayers = c.integer('gpuLayers', 0, GPU_LAYERS_MAX, DEFAULT_GPU_LAYERS);
  const threads = c.nullableInteger('threads', 1, 'the engine decides');

  const weightValue = c.value('weight');
  let weight: number | null = null;
  if (weightValue !== undefined && weightValue !== null) {
    if (typeof weightValue !== 'number' || !Number.isFinite(weightValue) || weightValue < WEIGHT_MIN || weightValue > WEIGHT_MAX) {
      c.fail('weight', `must be a number from ${WEIGHT_MIN} to ${WEIGHT_MAX} or null (the priority's default), got ${show(weightValue)}`);
    }
    weight = weightValue;
  }

  const priorityValue = c.value('priority');
  if (typeof priorityValue !== 'string' || !(PRIORITIES as readonly string[]).includes(priorityValue)) {
    c.fail('priority', `must be one of ${PRIORITIES.join(', ')}, got ${show(priorityValue)}`);
  }
  const priority = priorityValue as Priority;

  const pinnedValue = c.has('pinned') ? c.value('pinned') : false;
  if (typeof pinnedValue !== 'boolean') c.fail('pinned', `must be true or false, got ${show(pinnedValue)}`);
  const pinned = pinnedValue;

  const idleUnloadMinutes = c.nullableInteger('idleUnloadMinutes', 0, 'never unload');

  const argsValue = c.has('args') ? c.value('args') : [];
  if (!Array.isArray(argsValue)) c.fail('args', `must be a list of strings, got ${show(argsValue)}`);
  const args = argsValue.map((arg: unknown, i) => c.text('args', arg, `[${i}]`));

  const envValue = c.has('env') ? c.value('env') : {};
  if (!isPlainObject(envValue)) c.fail('env', `must be an object of NAME: "value" strings, got ${show(envValue)}`);
  const env: Record<string, string> = {};
  for (const [key, val] of Object.entries(envValue)) {
    const sub = member('', key).replace(/^(?!\[)/, '.');
    if (!ENV_NAME_RE.test(key)) c.fail('env', `is not a valid variable name (letters, digits and '_', not starting with a digit)`, sub);
    // defineProperty, not assignment: a variable called __proto__ must stay a plain entry.
    Object.defineProperty(env, key, { value: c.text('env', val, sub), enumerable: true, writable: true, configurable: true });
  }

  const commandValue = c.value('command');
  let command: string | null = null;
  if (commandValue !== undefined && commandValue !== null) command = c.nonEmptyText('command', commandValue);
  if (engineKind === 'command' && command === null) c.fail('command', 'is required for a command engine: the executable to run');
  if (engineKind === 'builtin' && command !== null) c.fail('command', 'must be null for a builtin engine (it runs inside GPU Share)');

  return { id, name, capabilities, engineKind, modelPath, contextSize, gpuLayers, threads, weight, priority, pinned, idleUnloadMinutes, args, env, command };
}

/** The whole stored document, typed; ids must be unique. `file` names the source in messages. */
export function validateProfilesDocument(value: unknown, file: string | null): ProfilesDocument {
  if (!isPlainObject(value)) throw new ProfileError(file, '', `must be an object {"version": 1, "profiles": [...]}, got ${show(value)}`);
  for (const key of Object.keys(value)) {
    if (key !== 'version' && key !== 'profiles' && key !== '__internal__') throw new ProfileError(file, member('', key), 'is not a field of the profiles document (known: version, profiles)');
  }
  if (value['version'] !== PROFILES_DOCUMENT_VERSION) {
    throw new ProfileError(file, 'version', `must be ${PROFILES_DOCUMENT_VERSION}, got ${show(value['version'])}`);
  }
  const list = Object.hasOwn(value, 'profiles') ? value['profiles'] : [];
  if (!Array.isArray(list)) throw new ProfileError(file, 'profiles', `must be a list of profiles, got ${show(list)}`);
  const seen = new Map<string, number>();
  const profiles = list.map((item: unknown, i) => {
    const profile = validateProfile(item, `profiles[${i}]`, file);
    const earlier = seen.get(profile.id);
    if (earlier !== undefined) throw new ProfileError(file, `profiles[${i}].id`, `duplicate id "${profile.id}" (also profiles[${earlier}].id)`, 'id');
    seen.set(profile.id, i);
    return profile;
  });
  return { version: PROFILES_DOCUMENT_VERSION, profiles };
}

/** Variables that make a Node process (the built-in engine runs in one) or the dynamic loader run
 *  code the profile does not name: refused in a builtin profile's `env`. */
export function refusedEnvName(name: string): boolean {
  return name === 'NODE_OPTIONS' || name === 'LD_PRELOAD' || name === 'LD_AUDIT' || name.startsWith('DYLD_');
}

/** A builtin profile (or one about to become one) may not set a refused variable; ProfileError
 *  naming `env`. Other kinds run a command of the user's choosing anyway. */
export function checkProfileEnv(value: unknown): void {
  if (!isPlainObject(value) || value['engineKind'] !== 'builtin' || !isPlainObject(value['env'])) return;
  const refused = Object.keys(value['env']).filter(refusedEnvName);
  if (refused.length > 0) {
    throw new ProfileError(null, member('profile.env', refused[0] ?? ''), `is not allowed for a builtin engine (${refused.join(', ')}: these would run code inside it that the profile does not name)`, 'env');
  }
}

/** An id for a new profile from its name: lower-case ASCII slug, made unique against `taken`
 *  with a `-2`, `-3`, ... suffix. */
export function deriveProfileId(name: string, taken: ReadonlySet<string> = new Set()): string {
  const slug =
    name
      .normalize('NFKD')
      .replace(/\p{M}+/gu, '')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, PROFILE_ID_MAX)
      .replace(/-+$/, '') || 'profile';
  if (!taken.has(slug)) return slug;
  for (let n = 2; ; n++) {
    const suffix = `-${n}`;
    const candidate = `${slug.slice(0, PROFILE_ID_MAX - suffix.length).replace(/-+$/, '')}${suffix}`;
    if (!taken.has(candidate)) return candidate;
  }
}

// ---------------------------------------------------------------------------------------------
// The store.

export interface ProfileLoadProblem {
  /** The profiles file that could not be used. */
  file: string;
  /** Where its original bytes were kept (`profiles.json.bad-<timestamp>`, beside it). */
  backup: string;
  /** What was wrong, naming the file and the JSON path. */
  message: string;
}

export interface ProfileStoreOptions {
  /** The data directory; the file is `<dataDir>/profiles.json`. */
  dataDir: string;
  /** Wall-clock ms for the backup's timestamp (tests pass a fixed one). Default Date.now. */
  nowMs?: () => number;
}

const CONFIG_NAME = 'profiles';

/** JSON.parse, forgiving a leading byte-order mark (editors on Windows may write one). */
function parseJson(text: string): unknown {
  return JSON.parse(text.startsWith('\uFEFF') ? text.slice(1) : text) as unknown;
}

function isConfProblem(error: unknown): error is Error {
  if (error instanceof ProfileError) return true;
  if (!(error instanceof Error)) return false;
  return error.name === 'SyntaxError' || error.message.startsWith('Config schema violation:');
}

function describeLoadError(error: Error, file: string): string {
  if (error instanceof ProfileError) return error.message;
  if (error.name === 'SyntaxError') return `profiles file ${file}: is not valid JSON (${error.message})`;
  return `profiles file ${file}: ${error.message}`;
}

/**
 * The profiles, held in memory as validated values and written through conf (one atomic write of
 * the whole document per change: a temporary file renamed over the old one). Not for several
 * processes writing at once (conf's own limit); one writer, the app or `serve`, is the rule.
 */
export class ProfileStore {
  /** Set when the file found on open was unusable and has been set aside; null otherwise. */
  readonly loadProblem: ProfileLoadProblem | null;
  /** Absolute path of the profiles file. */
  readonly file: string;
  private readonly conf: Conf<ProfilesDocument>;
  private profiles: Profile[];

  constructor(options: ProfileStoreOptions) {
    const nowMs = options.nowMs ?? Date.now;
    const file = resolve(options.dataDir, `${CONFIG_NAME}.json`);
    const open = (): Conf<ProfilesDocument> =>
      new Conf<ProfilesDocument>({
        cwd: options.dataDir,
        configName: CONFIG_NAME,
        fileExtension: 'json',
        ...profilesConfSchema(),
        defaults: emptyProfilesDocument(),
        // Never silently wipe the user's file: conf throws, and we set the file aside first.
        clearInvalidConfig: false,
        accessPropertiesByDotNotation: false,
        watch: false,
        // Engine environments may carry tokens: owner-only, like the API token file.
        configFileMode: 0o600,
        serialize: (value) => `${JSON.stringify(value, null, 2)}\n`,
        deserialize: (text) => parseJson(text) as ProfilesDocument,
      });

    let problem: string | null = null;
    let loaded: { conf: Conf<ProfilesDocument>; doc: ProfilesDocument } | null = null;
    // Our own check first, for a message with a JSON path; then conf's (ajv) on the same file.
    let raw: string | null = null;
    try {
      raw = readFileSync(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    try {
      if (raw !== null) validateProfilesDocument(parseJson(raw), file);
      const conf = open();
      loaded = { conf, doc: validateProfilesDocument(conf.store, file) };
    } catch (error) {
      if (!isConfProblem(error)) throw error;
      problem = describeLoadError(error, file);
    }

    if (loaded === null) {
      // Keep the user's bytes before anything is written over them; if that fails, so do we.
      const backup = backupCopy(file, nowMs());
      // Then start afresh: with no file, conf writes the defaults (an empty list).
      rmSync(file, { force: true });
      const conf = open();
      loaded = { conf, doc: validateProfilesDocument(conf.store, file) };
      this.loadProblem = { file, backup, message: problem ?? `profiles file ${file}: unusable` };
    } else {
      this.loadProblem = null;
    }
    this.conf = loaded.conf;
    this.file = this.conf.path;
    this.profiles = loaded.doc.profiles;
  }

  list(): Profile[] {
    return structuredClone(this.profiles);
  }

  get(id: string): Profile | undefined {
    const found = this.profiles.find((p) => p.id === id);
    return found === undefined ? undefined : structuredClone(found);
  }

  /** Fills defaults, validates, derives an id from the name when none is given; a given id that
   *  exists already is a ProfileError. */
  create(input: ProfileInput): Profile {
    const profile = this.checkNew(input);
    this.commit([...this.profiles, profile]);
    return structuredClone(profile);
  }

  /** What `create` would store, checked, without storing it (the caller checks more first). */
  checkNew(input: ProfileInput): Profile {
    const source: Record<string, unknown> = withoutUndefined(input);
    const taken = new Set(this.profiles.map((p) => p.id));
    if (source['id'] === undefined) {
      source['id'] = deriveProfileId(typeof source['name'] === 'string' ? source['name'] : '', taken);
    }
    const profile = validateProfile(source, 'profile');
    if (taken.has(profile.id)) throw new ProfileError(null, 'profile.id', `duplicate id "${profile.id}": a profile with this id exists`, 'id');
    return profile;
  }

  /** Applies the patch (fields set to undefined are left as they are) and validates the result. */
  update(id: string, patch: ProfilePatch): Profile {
    const profile = this.checkUpdate(id, patch);
    const index = this.profiles.findIndex((p) => p.id === id);
    const next = [...this.profiles];
    next[index] = profile;
    this.commit(next);
    return structuredClone(profile);
  }

  /** What `update` would store, checked, without storing it. */
  checkUpdate(id: string, patch: ProfilePatch): Profile {
    const index = this.profiles.findIndex((p) => p.id === id);
    const current = this.profiles[index];
    if (current === undefined) throw new ProfileNotFoundError(id);
    const changes: Record<string, unknown> = withoutUndefined(patch);
    if (Object.hasOwn(changes, 'id') && changes['id'] !== id) {
      throw new ProfileError(null, 'profile.id', 'cannot be changed; create a new profile instead', 'id');
    }
    // validateProfile builds fresh arrays and objects: nothing of `current` or `patch` is shared.
    return validateProfile({ ...current, ...changes, id }, 'profile');
  }

  /** True if it existed. */
  delete(id: string): boolean {
    const next = this.profiles.filter((p) => p.id !== id);
    if (next.length === this.profiles.length) return false;
    this.commit(next);
    return true;
  }

  /** The whole document in one atomic write; memory changes only once it is on disk. */
  private commit(profiles: Profile[]): void {
    const doc: ProfilesDocument = { version: PROFILES_DOCUMENT_VERSION, profiles };
    this.conf.store = structuredClone(doc);
    this.profiles = profiles;
  }
}

function withoutUndefined(value: object): Record<string, unknown> {
  if (!isPlainObject(value)) throw new ProfileError(null, 'profile', `must be an object, got ${show(value)}`);
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined));
}
