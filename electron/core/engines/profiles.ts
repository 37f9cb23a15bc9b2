/**
 * Profiles: what the user can launch. One JSON document, `<data dir>/profiles.json`,
 * `{ "version": 1, "profiles": [...] }`, read and written as every data file is (data-files.ts:
 * no link followed, no FIFO waited on, temp file + fsync + rename), by the CLI, `gpu-share serve`
 * and the app alike.
 *
 * One valibot schema guards it (PROFILES_DOCUMENT, of PROFILE), on every read and before every
 * write; the types are inferred from it, and its messages say in plain words which JSON path is
 * wrong. The file is owner-only (engine environments may carry tokens).
 *
 * A file that is not valid JSON or breaks the schema is never lost: the store copies it to
 * `profiles.json.bad-<timestamp>` beside it, starts from an empty list and reports the problem in
 * `loadProblem`.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import * as v from 'valibot';
import { WEIGHT_MAX, WEIGHT_MIN } from '../contract.js';
import { backupCopy, jsonProblem, parseJsonFile, readDataFile, writeDataFile } from '../data-files.js';
import { PRIORITIES, type Priority } from '../planner/policy.js';
import { GPU_KEY_MAX, GPU_KEY_PATTERN } from '../registry/abi.js';
import { describeValue, examine, got, isRecord, optionalEntries, ownRecord, pathText, strictRecord, TRUE_OR_FALSE, wholeNumber } from '../schema.js';

export type { Priority } from '../planner/policy.js';

export const ENGINE_KINDS = ['builtin', 'llama-server', 'llamafile', 'opencoti-llamafile', 'command'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/** The executable each kind runs when its profile names none (found on PATH then). */
export const DEFAULT_EXECUTABLE: Readonly<Record<Exclude<EngineKind, 'builtin' | 'command'>, string>> = { 'llama-server': 'llama-server', llamafile: 'llamafile', 'opencoti-llamafile': 'llamafile' };

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
// The schema (valibot, see ../schema.ts): one per document, the types inferred from it. It says in
// plain words which JSON path is wrong; the model file itself is checked by the core, which needs
// the file system.

const ID_RE = /^[a-z0-9-]{1,40}$/;
const CAPABILITY_RE = /^[a-z0-9._-]{1,32}$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CONTROL_RE = /[\u0000-\u001f\u007f]/u;
const LONE_SURROGATE_RE = /\p{Cs}/u;
const utf8Bytes = (text: string): number => new TextEncoder().encode(text).length;

/** A string that can pass through argv, the environment and a path: no NUL, well-formed Unicode. */
const TEXT = v.pipe(
  v.string(got('must be a string')),
  v.check((text) => !text.includes('\u0000'), 'must not contain a NUL character'),
  v.check((text) => !LONE_SURROGATE_RE.test(text), 'must be well-formed Unicode (it holds a lone surrogate)'),
);
const NON_EMPTY_TEXT = v.pipe(TEXT, v.minLength(1, 'must not be empty'));

const PROFILE_ID = v.pipe(v.string(got(`must be 1 to ${PROFILE_ID_MAX} characters of a-z, 0-9 and '-'`)), v.regex(ID_RE, got(`must be 1 to ${PROFILE_ID_MAX} characters of a-z, 0-9 and '-'`)));
const capabilityMessage = got("must be 1 to 32 characters of a-z, 0-9, '.', '_' and '-'");
const gpuKeyMessage = got(`must be a device's registry key (1 to ${GPU_KEY_MAX} characters of A-Z, a-z, 0-9, '.', '_' and '-') or null (the default device)`);
const weightMessage = got(`must be a number from ${WEIGHT_MIN} to ${WEIGHT_MAX} or null (the priority's default)`);

/** A profile's fields. Those with a default may be missing (a hand-written file, a form). */
const PROFILE_FIELDS = {
  /** Slug `[a-z0-9-]{1,40}`, unique in the file. */
  id: PROFILE_ID,
  /** 1..47 bytes of UTF-8, no control characters: it becomes the registry display name (char[48]).
   *  Unique in the file, letter case aside: it is the profile's model id (ProfileStore checks). */
  name: v.pipe(
    TEXT,
    v.check((name) => name.trim() !== '', 'must not be empty or blank'),
    v.check((name) => utf8Bytes(name) <= PROFILE_NAME_MAX_BYTES, (issue) => `must be at most ${PROFILE_NAME_MAX_BYTES} bytes of UTF-8 (it is the registry display name), got ${utf8Bytes(String(issue.input))} bytes`),
    v.check((name) => !CONTROL_RE.test(name), 'must not contain control characters'),
  ),
  /** Non-empty, no duplicates, each `[a-z0-9._-]{1,32}`. */
  capabilities: v.pipe(
    v.array(v.pipe(v.string(capabilityMessage), v.regex(CAPABILITY_RE, capabilityMessage)), got('must be a list of capability names')),
    v.minLength(1, 'must name at least one capability'),
    v.checkItems((capability, index, all) => all.indexOf(capability) === index, (issue) => `repeats ${describeValue(issue.input)}`),
  ),
  engineKind: v.picklist(ENGINE_KINDS, got(`must be one of ${ENGINE_KINDS.join(', ')}`)),
  /** The model file. Required except for the 'command' kind, where it may be null. */
  modelPath: v.nullish(NON_EMPTY_TEXT, null),
  contextSize: wholeNumber(1, CONTEXT_SIZE_MAX, `a whole number from 1 to ${CONTEXT_SIZE_MAX}`),
  /** 99 (the default) means all layers. */
  gpuLayers: v.optional(wholeNumber(0, GPU_LAYERS_MAX, `a whole number from 0 to ${GPU_LAYERS_MAX}`), DEFAULT_GPU_LAYERS),
  /** null = the engine decides. */
  threads: v.nullish(wholeNumber(1, null, 'a whole number ≥ 1 or null (the engine decides)'), null),
  /** null = `DEFAULT_WEIGHT_BY_PRIORITY[priority]`. */
  weight: v.nullish(v.pipe(v.number(weightMessage), v.finite(weightMessage), v.minValue(WEIGHT_MIN, weightMessage), v.maxValue(WEIGHT_MAX, weightMessage)), null),
  priority: v.picklist(PRIORITIES, got(`must be one of ${PRIORITIES.join(', ')}`)),
  /** Never evicted by the planner. */
  pinned: v.optional(TRUE_OR_FALSE, false),
  /** null = never unload when idle. */
  idleUnloadMinutes: v.nullish(wholeNumber(0, null, 'a whole number ≥ 0 or null (never unload)'), null),
  /** Extra arguments appended to the engine's command line. */
  args: v.optional(v.array(TEXT, got('must be a list of strings')), () => []),
  /** Extra environment; names `[A-Za-z_][A-Za-z0-9_]*`. */
  env: v.optional(
    ownRecord((name) => ENV_NAME_RE.test(name), "is not a valid variable name (letters, digits and '_', not starting with a digit)", TEXT, 'must be an object of NAME: "value" strings'),
    () => ({}),
  ),
  /** The executable for 'command' (required), 'llama-server', 'llamafile', 'opencoti-llamafile'
   *  (null = the kind's default executable); always null for 'builtin'. */
  command: v.nullish(NON_EMPTY_TEXT, null),
  /** The device it prefers (a registry key), used while present; null = the device selected in
   *  the dashboard, else the one with the most free memory. */
  gpuKey: v.nullish(v.pipe(v.string(gpuKeyMessage), v.maxLength(GPU_KEY_MAX, gpuKeyMessage), v.regex(GPU_KEY_PATTERN, gpuKeyMessage)), null),
};
const PROFILE_FIELD_NAMES = Object.keys(PROFILE_FIELDS).join(', ');
const notAProfileField = (): string => `is not a profile field (known: ${PROFILE_FIELD_NAMES})`;

type KindFields = { engineKind: EngineKind; modelPath: string | null; command: string | null };

/** The rules between a profile's kind and its model and command, checked once each field is right. */
function kindRules<TProfile extends KindFields>() {
  return v.rawCheck<TProfile>(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const profile = dataset.value;
    const fail = (field: 'modelPath' | 'command', message: string): void =>
      addIssue({ message, input: profile[field], path: [{ type: 'object', origin: 'value', input: profile, key: field, value: profile[field] }] });
    if (profile.engineKind !== 'command' && profile.modelPath === null) fail('modelPath', `is required for a ${profile.engineKind} engine (only a command engine may have none)`);
    else if (profile.engineKind === 'command' && profile.command === null) fail('command', 'is required for a command engine: the executable to run');
    else if (profile.engineKind === 'builtin' && profile.command !== null) fail('command', 'must be null for a builtin engine (it runs inside GPU Share)');
  });
}

/** A stored profile: every field present, defaults filled. */
export const PROFILE = v.pipe(strictRecord(PROFILE_FIELDS, 'an object', notAProfileField), kindRules<v.InferOutput<v.StrictObjectSchema<typeof PROFILE_FIELDS, undefined>>>());
export type Profile = v.InferOutput<typeof PROFILE>;

const PROFILE_INPUT_FIELDS = { ...PROFILE_FIELDS, id: v.optional(PROFILE_ID) };
/** What `ProfileStore.create` takes: the stored profile's fields, the id derived from the name
 *  when absent. */
export const PROFILE_INPUT = v.pipe(strictRecord(PROFILE_INPUT_FIELDS, 'an object', notAProfileField), kindRules<v.InferOutput<v.StrictObjectSchema<typeof PROFILE_INPUT_FIELDS, undefined>>>());
export type ProfileInput = v.InferInput<v.StrictObjectSchema<typeof PROFILE_INPUT_FIELDS, undefined>>;

const { id: _id, ...PATCHABLE_FIELDS } = PROFILE_FIELDS;
/** What `ProfileStore.update` takes: any field but the id, each checked on its own (the result is
 *  then checked whole, as a PROFILE). */
export const PROFILE_PATCH = strictRecord(optionalEntries(PATCHABLE_FIELDS), 'an object', notAProfileField);
export type ProfilePatch = v.InferInput<typeof PROFILE_PATCH>;

/** The whole stored document; ids unique. `__internal__` is where conf keeps migration state (only
 *  when migrations are configured); it is tolerated, never interpreted. */
export const PROFILES_DOCUMENT = v.pipe(
  strictRecord(
    {
      version: v.literal(PROFILES_DOCUMENT_VERSION, got(`must be ${PROFILES_DOCUMENT_VERSION}`)),
      profiles: v.optional(v.array(PROFILE, got('must be a list of profiles')), () => []),
      __internal__: v.optional(v.unknown()),
    },
    'an object {"version": 1, "profiles": [...]}',
    () => 'is not a field of the profiles document (known: version, profiles)',
  ),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const seen = new Map<string, number>();
    dataset.value.profiles.forEach((profile, index) => {
      const earlier = seen.get(profile.id);
      if (earlier === undefined) {
        seen.set(profile.id, index);
        return;
      }
      const list = dataset.value.profiles;
      addIssue({
        message: `duplicate id "${profile.id}" (also profiles[${earlier}].id)`,
        input: profile.id,
        path: [
          { type: 'object', origin: 'value', input: dataset.value, key: 'profiles', value: list },
          { type: 'array', origin: 'value', input: list, key: index, value: profile },
          { type: 'object', origin: 'value', input: profile, key: 'id', value: profile.id },
        ],
      });
    });
  }),
);
export type ProfilesDocument = { version: typeof PROFILES_DOCUMENT_VERSION; profiles: Profile[] };

export function emptyProfilesDocument(): ProfilesDocument {
  return { version: PROFILES_DOCUMENT_VERSION, profiles: [] };
}

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

/** A profile's name is its model id (the gateway's `model`, `/v1/models`): a second profile may not
 *  take one that exists, whatever its letter case. The API answers 409 naming the other profile. */
export class ProfileNameTakenError extends ProfileError {
  /** The profile that has the name. */
  readonly other: { id: string; name: string };
  constructor(other: Pick<Profile, 'id' | 'name'>) {
    super(null, 'profile.name', `"${other.name}" is the name of profile "${other.id}": a profile's name is its model id, so names are unique (letter case aside); choose another`, 'name');
    this.other = { id: other.id, name: other.name };
  }
}

/** The profile other than `exceptId` whose name is `name`, letter case aside. Pure. */
export function profileWithName(profiles: readonly Pick<Profile, 'id' | 'name'>[], name: string, exceptId: string | null = null): Pick<Profile, 'id' | 'name'> | undefined {
  const folded = name.toLowerCase();
  return profiles.find((p) => p.id !== exceptId && p.name.toLowerCase() === folded);
}

/** A profile renamed as it was read, because an earlier one in the file had its name. */
export interface ProfileRenamed {
  id: string;
  from: string;
  to: string;
  /** What to tell the user (the file, both profiles, the name it runs under). */
  message: string;
}

/**
 * Names made unique for a list read from a file written before they had to be (or by hand): the
 * first profile keeps a name, each later one gets ` 2`, ` 3`… (the name cut to keep within
 * PROFILE_NAME_MAX_BYTES). Nothing is dropped; the new names are written with the next change.
 * Pure.
 */
export function uniqueProfileNames(profiles: readonly Profile[], file: string): { profiles: Profile[]; renamed: ProfileRenamed[] } {
  // Every name's first holder keeps it, wherever a later duplicate's new name would fall.
  const holders = new Map<string, Profile>();
  for (const profile of profiles) if (!holders.has(profile.name.toLowerCase())) holders.set(profile.name.toLowerCase(), profile);
  const taken = new Set(holders.keys());
  const renamed: ProfileRenamed[] = [];
  const result = profiles.map((profile) => {
    const holder = holders.get(profile.name.toLowerCase());
    if (holder === undefined || holder === profile) return profile;
    let name = profile.name;
    for (let n = 2; taken.has(name.toLowerCase()); n++) {
      const suffix = ` ${n}`;
      let base = profile.name;
      while (utf8Bytes(base + suffix) > PROFILE_NAME_MAX_BYTES) base = [...base].slice(0, -1).join('');
      name = `${base.trimEnd()}${suffix}`;
    }
    taken.add(name.toLowerCase());
    renamed.push({ id: profile.id, from: profile.name, to: name, message: `profiles file ${file}: profile "${profile.id}" has the name of profile "${holder.id}" ("${profile.name}"); names are model ids, so it runs as "${name}" until you rename it (saved with the next change)` });
    return { ...profile, name };
  });
  return { profiles: result, renamed };
}

export class ProfileNotFoundError extends Error {
  constructor(readonly id: string) {
    super(`no profile with id "${id}"`);
    this.name = 'ProfileNotFoundError';
  }
}

/** `schema`'s value for `value`, else a ProfileError at `where` + the problem's path; `fieldAt` is
 *  where in that path the profile's own field name is (0 for a profile, 2 in the document). */
function checkWith<TSchema extends v.GenericSchema>(schema: TSchema, value: unknown, where: string, file: string | null, fieldAt: number): v.InferOutput<TSchema> {
  const checked = examine(schema, value);
  if (checked.ok) return checked.value;
  const { keys, message } = checked.problem;
  const field = keys[fieldAt];
  throw new ProfileError(file, pathText(where, keys), message, typeof field === 'string' ? field : null);
}

/** A profile from untrusted data (a file, a form, IPC): missing fields that have a default get it;
 *  anything else wrong throws ProfileError naming `where.field` (e.g. `profile.contextSize`). */
export function validateProfile(value: unknown, where: string, file: string | null = null): Profile {
  return checkWith(PROFILE, value, where, file, 0);
}

/** The whole stored document, typed; ids must be unique. `file` names the source in messages. */
export function validateProfilesDocument(value: unknown, file: string | null): ProfilesDocument {
  const { profiles } = checkWith(PROFILES_DOCUMENT, value, '', file, 2);
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
  if (!isRecord(value) || value['engineKind'] !== 'builtin' || !isRecord(value['env'])) return;
  const refused = Object.keys(value['env']).filter(refusedEnvName);
  if (refused.length > 0) {
    throw new ProfileError(null, pathText('profile', ['env', refused[0] ?? '']), `is not allowed for a builtin engine (${refused.join(', ')}: these would run code inside it that the profile does not name)`, 'env');
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

function isConfProblem(error: unknown): error is Error {
  if (error instanceof ProfileError) return true;
  if (!(error instanceof Error)) return false;
  return error.name === 'SyntaxError';
}

function describeLoadError(error: Error, file: string): string {
  if (error instanceof ProfileError) return error.message;
  // The parser's message quotes the file; ours says where, not what.
  if (error.name === 'SyntaxError') return `profiles file ${file}: ${jsonProblem(error)}`;
  return `profiles file ${file}: ${error.message}`;
}

/**
 * The profiles, held in memory as validated values and written as one document per change (a
 * temporary file synced and renamed over the old one). Not for several processes writing at once;
 * one writer, the app or `serve`, is the rule (the data folder's lock, data-lock.ts).
 */
export class ProfileStore {
  /** Set when the file found on open was unusable and has been set aside; null otherwise. */
  readonly loadProblem: ProfileLoadProblem | null;
  private renamed: ProfileRenamed[];
  /** Absolute path of the profiles file. */
  readonly file: string;
  private profiles: Profile[];

  constructor(options: ProfileStoreOptions) {
    const nowMs = options.nowMs ?? Date.now;
    const file = resolve(options.dataDir, `${CONFIG_NAME}.json`);
    this.file = file;
    // Not a regular file of this user (a link, a FIFO): a DataFileError, never read, never replaced.
    const raw = readDataFile(file);
    if (raw === null) mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
    let problem: string | null = null;
    let doc: ProfilesDocument | null = null;
    if (raw === null) {
      doc = emptyProfilesDocument();
      this.write(doc);
    } else {
      try {
        doc = validateProfilesDocument(parseJsonFile(raw), file);
      } catch (error) {
        if (!isConfProblem(error)) throw error;
        problem = describeLoadError(error, file);
      }
    }
    if (doc === null) {
      // Keep the user's bytes before anything is written over them; if that fails, so do we.
      const backup = backupCopy(file, nowMs());
      // Then start afresh: an empty list.
      rmSync(file, { force: true });
      doc = emptyProfilesDocument();
      this.write(doc);
      this.loadProblem = { file, backup, message: problem ?? `profiles file ${file}: unusable` };
    } else {
      this.loadProblem = null;
    }
    const named = uniqueProfileNames(doc.profiles, this.file);
    this.profiles = named.profiles;
    this.renamed = named.renamed;
  }

  /** Profiles renamed as they were read, their names being taken (uniqueProfileNames); empty once
   *  a change has written the new names to the file. */
  get renamedOnLoad(): readonly ProfileRenamed[] {
    return this.renamed;
  }

  private write(doc: ProfilesDocument): void {
    writeDataFile(this.file, `${JSON.stringify(doc, null, 2)}\n`);
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
    const { id: given, ...fields } = checkWith(PROFILE_INPUT, input, 'profile', null, 0);
    const taken = new Set(this.profiles.map((p) => p.id));
    const id = given ?? deriveProfileId(fields.name, taken);
    if (taken.has(id)) throw new ProfileError(null, 'profile.id', `duplicate id "${id}": a profile with this id exists`, 'id');
    const other = profileWithName(this.profiles, fields.name);
    if (other !== undefined) throw new ProfileNameTakenError(other);
    return { id, ...fields };
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
    const { id: newId, ...rest } = isRecord(patch) ? (patch as Record<string, unknown>) : { id: undefined };
    if (newId !== undefined && newId !== id) throw new ProfileError(null, 'profile.id', 'cannot be changed; create a new profile instead', 'id');
    const checked = checkWith(PROFILE_PATCH, isRecord(patch) ? rest : patch, 'profile', null, 0);
    const changes = Object.fromEntries(Object.entries(checked).filter(([, value]) => value !== undefined));
    // The schema builds fresh arrays and objects: nothing of `current` or `patch` is shared.
    const profile = validateProfile({ ...current, ...changes, id }, 'profile');
    const other = profileWithName(this.profiles, profile.name, id);
    if (other !== undefined) throw new ProfileNameTakenError(other);
    return profile;
  }

  /** True if it existed. */
  delete(id: string): boolean {
    const next = this.profiles.filter((p) => p.id !== id);
    if (next.length === this.profiles.length) return false;
    this.commit(next);
    return true;
  }

  /** The whole document in one atomic write; memory changes only once it is on disk (a write that
   *  fails, on a full disk, is a DataFileError and changes nothing). */
  private commit(profiles: Profile[]): void {
    const doc: ProfilesDocument = { version: PROFILES_DOCUMENT_VERSION, profiles };
    this.write(doc);
    this.profiles = profiles;
    this.renamed = [];
  }
}
