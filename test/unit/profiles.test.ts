/** Profiles: per-field validation with JSON paths, defaults, weights, the conf-backed store
 *  (CRUD across instances, duplicate ids, corrupt files set aside, atomic writes). */
import { closeSync, fstatSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_WEIGHT_BY_PRIORITY,
  ProfileError,
  ProfileNotFoundError,
  ProfileStore,
  deriveProfileId,
  effectiveWeight,
  validateProfile,
  validateProfilesDocument,
  type Profile,
  type ProfileInput,
} from '../../electron/core/engines/profiles.js';

const dirs: string[] = [];
const tmp = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-profiles-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

const FILE = '/data/profiles.json';
/** 2027-01-15T08:00:00.000Z */
const NOW_MS = Date.UTC(2027, 0, 15, 8, 0, 0, 0);
const STAMP = '2027-01-15T08-00-00-000Z';

const input = (over: Partial<ProfileInput> = {}): ProfileInput => ({
  name: 'Qwen 2.5 7B',
  capabilities: ['chat'],
  engineKind: 'llama-server',
  modelPath: '/models/qwen2.5-7b.gguf',
  contextSize: 8192,
  priority: 'interactive',
  ...over,
});

/** A complete stored profile. */
const full = (over: Partial<Profile> = {}): Profile => ({
  id: 'qwen-7b',
  name: 'Qwen 7B',
  capabilities: ['chat', 'embed'],
  engineKind: 'llama-server',
  modelPath: '/models/qwen.gguf',
  contextSize: 8192,
  gpuLayers: 99,
  threads: null,
  weight: null,
  priority: 'interactive',
  pinned: false,
  idleUnloadMinutes: null,
  args: [],
  env: {},
  command: null,
  gpuKey: null,
  ...over,
});

const other = (): Profile => full({ id: 'other', name: 'Other' });

/** The document with a good profile first and the one under test second. */
const docWith = (profile: Record<string, unknown>): Record<string, unknown> => ({ version: 1, profiles: [other(), profile] });

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

const without = (field: keyof Profile): Record<string, unknown> => {
  const p: Record<string, unknown> = { ...full() };
  delete p[field];
  return p;
};

// [what, profile, JSON path, words in the message]
type Case = [string, Record<string, unknown>, string, string];
const cases: Case[] = [
  ['id with capitals', { ...full(), id: 'Qwen_7B' }, 'profiles[1].id', 'a-z, 0-9'],
  ['id too long', { ...full(), id: 'a'.repeat(41) }, 'profiles[1].id', 'must be 1 to 40'],
  ['id missing', without('id'), 'profiles[1].id', 'got nothing'],
  ['name empty', { ...full(), name: '' }, 'profiles[1].name', 'must not be empty'],
  ['name blank', { ...full(), name: '   ' }, 'profiles[1].name', 'blank'],
  ['name not a string', { ...full(), name: 42 }, 'profiles[1].name', 'must be a string, got 42'],
  ['name over 47 bytes (24 é = 48 bytes)', { ...full(), name: 'é'.repeat(24) }, 'profiles[1].name', 'got 48 bytes'],
  ['name over 47 characters', { ...full(), name: 'a'.repeat(48) }, 'profiles[1].name', 'at most 47 bytes'],
  ['name with a newline', { ...full(), name: 'a\nb' }, 'profiles[1].name', 'control characters'],
  ['name with a lone surrogate', { ...full(), name: 'a\ud800' }, 'profiles[1].name', 'lone surrogate'],
  ['capabilities empty', { ...full(), capabilities: [] }, 'profiles[1].capabilities', 'at least one'],
  ['capabilities not a list', { ...full(), capabilities: 'chat' }, 'profiles[1].capabilities', 'must be a list'],
  ['capability upper-case', { ...full(), capabilities: ['chat', 'Embed'] }, 'profiles[1].capabilities[1]', 'got "Embed"'],
  ['capability too long', { ...full(), capabilities: ['c'.repeat(33)] }, 'profiles[1].capabilities[0]', '1 to 32'],
  ['capability repeated', { ...full(), capabilities: ['chat', 'chat'] }, 'profiles[1].capabilities[1]', 'repeats "chat"'],
  ['engine kind unknown', { ...full(), engineKind: 'vllm' }, 'profiles[1].engineKind', 'must be one of builtin, llama-server'],
  ['model path missing', without('modelPath'), 'profiles[1].modelPath', 'required for a llama-server engine'],
  ['model path null for builtin', { ...full(), engineKind: 'builtin', modelPath: null }, 'profiles[1].modelPath', 'required for a builtin engine'],
  ['model path empty', { ...full(), modelPath: '' }, 'profiles[1].modelPath', 'must not be empty'],
  ['model path not a string', { ...full(), modelPath: 7 }, 'profiles[1].modelPath', 'must be a string'],
  ['context 0', { ...full(), contextSize: 0 }, 'profiles[1].contextSize', 'from 1 to 10000000, got 0'],
  ['context too big', { ...full(), contextSize: 10_000_001 }, 'profiles[1].contextSize', 'got 10000001'],
  ['context fractional', { ...full(), contextSize: 4096.5 }, 'profiles[1].contextSize', 'whole number'],
  ['context a string', { ...full(), contextSize: '4096' }, 'profiles[1].contextSize', 'got "4096"'],
  ['context missing', without('contextSize'), 'profiles[1].contextSize', 'got nothing'],
  ['gpu layers negative', { ...full(), gpuLayers: -1 }, 'profiles[1].gpuLayers', 'from 0 to 100000'],
  ['gpu layers too many', { ...full(), gpuLayers: 100_001 }, 'profiles[1].gpuLayers', 'got 100001'],
  ['threads 0', { ...full(), threads: 0 }, 'profiles[1].threads', '≥ 1 or null'],
  ['threads fractional', { ...full(), threads: 1.5 }, 'profiles[1].threads', 'whole number'],
  ['weight 0', { ...full(), weight: 0 }, 'profiles[1].weight', 'from 0.01 to 100'],
  ['weight below 0.01', { ...full(), weight: 0.001 }, 'profiles[1].weight', 'got 0.001'],
  ['weight above 100', { ...full(), weight: 101 }, 'profiles[1].weight', 'got 101'],
  ['weight a string', { ...full(), weight: 'heavy' }, 'profiles[1].weight', 'got "heavy"'],
  ['priority unknown', { ...full(), priority: 'urgent' }, 'profiles[1].priority', 'interactive, background, lab'],
  ['priority missing', without('priority'), 'profiles[1].priority', 'got nothing'],
  ['pinned not a boolean', { ...full(), pinned: 'yes' }, 'profiles[1].pinned', 'true or false'],
  ['idle unload negative', { ...full(), idleUnloadMinutes: -1 }, 'profiles[1].idleUnloadMinutes', '≥ 0 or null'],
  ['idle unload fractional', { ...full(), idleUnloadMinutes: 0.5 }, 'profiles[1].idleUnloadMinutes', 'got 0.5'],
  ['args not a list', { ...full(), args: '--flash-attn' }, 'profiles[1].args', 'list of strings'],
  ['arg not a string', { ...full(), args: ['--ok', 3] }, 'profiles[1].args[1]', 'must be a string, got 3'],
  ['arg with NUL', { ...full(), args: ['a\u0000b'] }, 'profiles[1].args[0]', 'NUL'],
  ['env a list', { ...full(), env: ['A=1'] }, 'profiles[1].env', 'NAME: "value"'],
  ['env name with a digit first', { ...full(), env: { '1BAD': 'x' } }, 'profiles[1].env["1BAD"]', 'variable name'],
  ['env name with a dash', { ...full(), env: { 'A-B': 'x' } }, 'profiles[1].env["A-B"]', 'variable name'],
  ['env value not a string', { ...full(), env: { CUDA_VISIBLE_DEVICES: 0 } }, 'profiles[1].env.CUDA_VISIBLE_DEVICES', 'must be a string, got 0'],
  ['command empty', { ...full(), command: '' }, 'profiles[1].command', 'must not be empty'],
  ['command missing for a command engine', { ...full(), engineKind: 'command', modelPath: null }, 'profiles[1].command', 'required for a command engine'],
  ['command for a builtin engine', { ...full(), engineKind: 'builtin', command: '/bin/x' }, 'profiles[1].command', 'must be null for a builtin'],
  ['unknown field', { ...full(), gpus: 2 }, 'profiles[1].gpus', 'is not a profile field'],
  ['not an object', 'qwen' as unknown as Record<string, unknown>, 'profiles[1]', 'must be an object'],
];

describe('validation', () => {
  it.each(cases)('%s → %s', (_what, profile, path, words) => {
    const error = catchError(() => validateProfilesDocument(docWith(profile), FILE));
    expect(error).toBeInstanceOf(ProfileError);
    const e = error as ProfileError;
    expect(e.path).toBe(path);
    expect(e.file).toBe(FILE);
    expect(e.message).toContain(`profiles file ${FILE}: ${path}: `);
    expect(e.message).toContain(words);
  });

  it('names the top-level field for a form to mark', () => {
    const e = catchError(() => validateProfile({ ...full(), capabilities: ['ok', 'NO'] }, 'profile')) as ProfileError;
    expect(e.field).toBe('capabilities');
    expect(e.path).toBe('profile.capabilities[1]');
    expect(e.file).toBeNull();
    expect(e.message).toBe('profile.capabilities[1]: must be 1 to 32 characters of a-z, 0-9, \'.\', \'_\' and \'-\', got "NO"');
  });

  it('accepts a complete profile of every kind', () => {
    expect(validateProfile(full(), 'p')).toEqual(full());
    expect(validateProfile(full({ engineKind: 'builtin' }), 'p').engineKind).toBe('builtin');
    expect(validateProfile(full({ engineKind: 'command', modelPath: null, command: '/opt/engine', args: ['--port', '0'] }), 'p').command).toBe('/opt/engine');
    expect(validateProfile(full({ engineKind: 'command', modelPath: '/m.gguf', command: 'engine' }), 'p').modelPath).toBe('/m.gguf');
    expect(validateProfile(full({ engineKind: 'opencoti-llamafile', command: null }), 'p').command).toBeNull();
    const edge = full({ id: 'a', name: 'é'.repeat(23) + 'a', capabilities: ['a.b_c-1'], contextSize: 10_000_000, gpuLayers: 0, threads: 1, weight: 0.01, idleUnloadMinutes: 0, env: { _X1: '' } });
    expect(Buffer.byteLength(edge.name)).toBe(47);
    expect(validateProfile(edge, 'p')).toEqual(edge);
    expect(validateProfile(full({ weight: 100, gpuLayers: 100_000 }), 'p').weight).toBe(100);
  });

  it('checks the document: shape, version, unique ids', () => {
    const msg = (v: unknown): string => (catchError(() => validateProfilesDocument(v, FILE)) as Error).message;
    expect(msg('[]')).toBe(`profiles file ${FILE}: must be an object {"version": 1, "profiles": [...]}, got "[]"`);
    expect(msg(null)).toContain('must be an object');
    expect(msg({ version: 2, profiles: [] })).toBe(`profiles file ${FILE}: version: must be 1, got 2`);
    expect(msg({ profiles: [] })).toContain('version: must be 1, got nothing');
    expect(msg({ version: 1, profiles: {} })).toContain('profiles: must be a list of profiles');
    expect(msg({ version: 1, profiles: [], extra: true })).toContain('extra: is not a field of the profiles document');
    const dup = catchError(() => validateProfilesDocument({ version: 1, profiles: [full(), other(), full({ name: 'Again' })] }, FILE)) as ProfileError;
    expect(dup.path).toBe('profiles[2].id');
    expect(dup.message).toBe(`profiles file ${FILE}: profiles[2].id: duplicate id "qwen-7b" (also profiles[0].id)`);
    expect(validateProfilesDocument({ version: 1, profiles: [full(), other()] }, FILE).profiles.map((p) => p.id)).toEqual(['qwen-7b', 'other']);
    expect(validateProfilesDocument({ version: 1 }, FILE)).toEqual({ version: 1, profiles: [] });
  });
});

describe('defaults and weights', () => {
  it('fills every default', () => {
    const minimal = { id: 'm', name: 'M', capabilities: ['chat'], engineKind: 'llama-server', modelPath: '/m.gguf', contextSize: 4096, priority: 'background' };
    expect(validateProfile(minimal, 'p')).toEqual({
      ...minimal,
      gpuLayers: 99,
      threads: null,
      weight: null,
      pinned: false,
      idleUnloadMinutes: null,
      args: [],
      env: {},
      command: null,
      gpuKey: null,
    });
    const cmd = validateProfile({ id: 'c', name: 'C', capabilities: ['chat'], engineKind: 'command', command: '/bin/engine', contextSize: 1, priority: 'lab' }, 'p');
    expect(cmd.modelPath).toBeNull();
  });

  it('keeps a preferred device as a registry key, and names gpuKey when it is not one', () => {
    const base = { id: 'm', name: 'M', capabilities: ['chat'], engineKind: 'llama-server', modelPath: '/m.gguf', contextSize: 4096, priority: 'background' };
    expect(validateProfile({ ...base, gpuKey: 'GPU-8f1c2d3e' }, 'p').gpuKey).toBe('GPU-8f1c2d3e');
    expect(validateProfile({ ...base, gpuKey: null }, 'p').gpuKey).toBeNull();
    expect(() => validateProfile({ ...base, gpuKey: 'GPU 1/../x' }, 'p')).toThrow(/^p\.gpuKey: must be a device's registry key .* got "GPU 1\/\.\.\/x"$/);
    expect(() => validateProfile({ ...base, gpuKey: 3 }, 'p')).toThrow(/^p\.gpuKey: must be a device's registry key .* got 3$/);
    expect(() => validateProfile({ ...base, gpuKey: 'G'.repeat(41) }, 'p')).toThrow(/^p\.gpuKey: must be a device's registry key/);
  });

  it('effective weight is the profile weight, else the priority default', () => {
    expect(DEFAULT_WEIGHT_BY_PRIORITY).toEqual({ interactive: 3, background: 1, lab: 1 });
    expect(effectiveWeight(full({ priority: 'interactive' }))).toBe(3);
    expect(effectiveWeight(full({ priority: 'background' }))).toBe(1);
    expect(effectiveWeight(full({ priority: 'lab' }))).toBe(1);
    expect(effectiveWeight(full({ priority: 'lab', weight: 2.5 }))).toBe(2.5);
    expect(effectiveWeight(full({ priority: 'interactive', weight: 0.01 }))).toBe(0.01);
  });

  it('derives ids from names', () => {
    expect(deriveProfileId('Qwen 2.5 7B Instruct')).toBe('qwen-2-5-7b-instruct');
    expect(deriveProfileId('  Café Über!  ')).toBe('cafe-uber');
    expect(deriveProfileId('日本語')).toBe('profile');
    const long = deriveProfileId('A very long model name that goes on and on and on');
    expect(long.length).toBeLessThanOrEqual(40);
    expect(long).toMatch(/^[a-z0-9-]+[a-z0-9]$/);
    expect(deriveProfileId('Qwen', new Set(['qwen']))).toBe('qwen-2');
    expect(deriveProfileId('Qwen', new Set(['qwen', 'qwen-2']))).toBe('qwen-3');
    const taken = new Set(['x'.repeat(40)]);
    expect(deriveProfileId('x'.repeat(50), taken)).toBe(`${'x'.repeat(38)}-2`);
  });
});

describe('ProfileStore', () => {
  it('starts empty, creating the directory and the file', () => {
    const dataDir = join(tmp(), 'nested', 'data');
    const store = new ProfileStore({ dataDir });
    expect(store.loadProblem).toBeNull();
    expect(store.list()).toEqual([]);
    expect(store.file).toBe(join(dataDir, 'profiles.json'));
    expect(JSON.parse(readFileSync(store.file, 'utf8'))).toEqual({ version: 1, profiles: [] });
  });

  it('round-trips create, update and delete across two instances on the same directory', () => {
    const dataDir = tmp();
    const a = new ProfileStore({ dataDir });
    const qwen = a.create(input());
    expect(qwen.id).toBe('qwen-2-5-7b');
    expect(qwen.gpuLayers).toBe(99);
    const llama = a.create(input({ id: 'llama', name: 'Llama 3.1 8B', priority: 'background', env: { CUDA_VISIBLE_DEVICES: '0' }, args: ['--flash-attn'] }));
    const cmd = a.create(input({ name: 'Fake engine', engineKind: 'command', command: '/usr/bin/fake-engine', priority: 'lab', capabilities: ['bench'] }));
    expect(cmd.id).toBe('fake-engine');
    const updated = a.update('llama', { weight: 2, pinned: true, idleUnloadMinutes: 15 });
    expect(updated).toEqual({ ...llama, weight: 2, pinned: true, idleUnloadMinutes: 15 });
    expect(a.delete(qwen.id)).toBe(true);
    expect(a.delete(qwen.id)).toBe(false);

    const b = new ProfileStore({ dataDir });
    expect(b.loadProblem).toBeNull();
    expect(b.list()).toEqual(a.list());
    expect(b.list().map((p) => p.id)).toEqual(['llama', 'fake-engine']);
    expect(b.get('llama')).toEqual({ ...llama, weight: 2, pinned: true, idleUnloadMinutes: 15 });
    expect(b.get(qwen.id)).toBeUndefined();
    expect(effectiveWeight(b.get('fake-engine') as Profile)).toBe(1);

    // Clearing a field with null; the file on disk is the whole document.
    b.update('llama', { weight: null });
    const onDisk = JSON.parse(readFileSync(join(dataDir, 'profiles.json'), 'utf8')) as { version: number; profiles: Profile[] };
    expect(onDisk.version).toBe(1);
    expect(onDisk.profiles.map((p) => [p.id, p.weight])).toEqual([
      ['llama', null],
      ['fake-engine', null],
    ]);
    expect(new ProfileStore({ dataDir }).get('llama')?.weight).toBeNull();
  });

  it('rejects a duplicate id and leaves the file as it was', () => {
    const dataDir = tmp();
    const store = new ProfileStore({ dataDir });
    store.create(input({ id: 'qwen' }));
    const before = readFileSync(store.file, 'utf8');
    const e = catchError(() => store.create(input({ id: 'qwen', name: 'Another' }))) as ProfileError;
    expect(e).toBeInstanceOf(ProfileError);
    expect(e.path).toBe('profile.id');
    expect(e.message).toContain('duplicate id "qwen"');
    expect(readFileSync(store.file, 'utf8')).toBe(before);
    // Without an id, a name that derives a taken id gets a suffix instead.
    expect(store.create(input({ name: 'Qwen' })).id).toBe('qwen-2');
    expect(store.list().map((p) => p.id)).toEqual(['qwen', 'qwen-2']);
  });

  it('validates creates and updates, changing nothing on failure', () => {
    const dataDir = tmp();
    const store = new ProfileStore({ dataDir });
    const p = store.create(input({ id: 'p' }));
    const before = readFileSync(store.file, 'utf8');
    const bad = catchError(() => store.create(input({ contextSize: 0 }))) as ProfileError;
    expect(bad.message).toBe('profile.contextSize: must be a whole number from 1 to 10000000, got 0');
    const badUpdate = catchError(() => store.update('p', { engineKind: 'command' })) as ProfileError;
    expect(badUpdate.path).toBe('profile.command');
    expect(() => store.update('p', { id: 'q' } as unknown as Partial<ProfileInput>)).toThrowError('cannot be changed');
    expect(() => store.update('nope', { weight: 1 })).toThrowError(ProfileNotFoundError);
    expect(() => store.create({ ...input(), bogus: 1 } as unknown as ProfileInput)).toThrowError('profile.bogus: is not a profile field');
    expect(readFileSync(store.file, 'utf8')).toBe(before);
    expect(store.list()).toEqual([p]);
    // Fields passed as undefined are left alone.
    expect(store.update('p', { weight: undefined, contextSize: 2048 } as unknown as Partial<ProfileInput>)).toEqual({ ...p, contextSize: 2048 });
  });

  it('hands out copies', () => {
    const store = new ProfileStore({ dataDir: tmp() });
    store.create(input({ id: 'p', env: { A: '1' } }));
    const listed = store.list();
    (listed[0] as Profile).env['B'] = '2';
    (listed[0] as Profile).capabilities.push('x');
    expect(store.get('p')?.env).toEqual({ A: '1' });
    expect(store.get('p')?.capabilities).toEqual(['chat']);
  });

  it('loads a hand-written file with defaults left out (and a byte-order mark)', () => {
    const dataDir = tmp();
    writeFileSync(join(dataDir, 'profiles.json'), '\uFEFF' + JSON.stringify({ version: 1, profiles: [{ id: 'h', name: 'Hand', capabilities: ['chat'], engineKind: 'builtin', modelPath: '/m.gguf', contextSize: 2048, priority: 'lab' }] }));
    const store = new ProfileStore({ dataDir });
    expect(store.loadProblem).toBeNull();
    expect(store.get('h')).toMatchObject({ gpuLayers: 99, env: {}, args: [], weight: null, command: null });
    // A variable named __proto__ (own key, as JSON.parse makes it) stays an ordinary entry.
    store.update('h', { env: JSON.parse('{"__proto__":"x","A":"1"}') as Record<string, string> });
    const env = new ProfileStore({ dataDir }).get('h')?.env ?? {};
    expect(Object.keys(env)).toEqual(['__proto__', 'A']);
    expect(Object.getPrototypeOf(env)).toBe(Object.prototype);
  });

  describe('a corrupt or invalid file is set aside, never lost', () => {
    const corrupt: [string, Buffer, string][] = [
      ['garbage bytes', Buffer.from([0x7b, 0x6e, 0x6f, 0x74, 0xff, 0xfe, 0x00, 0x20, 0x6a, 0x73, 0x6f, 0x6e]), 'is not valid JSON'],
      ['an empty file', Buffer.alloc(0), 'is not valid JSON'],
      ['valid JSON with a bad field', Buffer.from(JSON.stringify({ version: 1, profiles: [other(), { ...full(), contextSize: -5 }] }, null, 2)), 'profiles[1].contextSize: must be a whole number from 1 to 10000000, got -5'],
      ['duplicate ids (beyond the JSON schema)', Buffer.from(JSON.stringify({ version: 1, profiles: [full(), full()] })), 'profiles[1].id: duplicate id "qwen-7b"'],
      ['a name over 47 bytes (beyond the JSON schema)', Buffer.from(JSON.stringify({ version: 1, profiles: [full({ name: '模型'.repeat(8) })] })), 'profiles[0].name: must be at most 47 bytes'],
      ['a newer version', Buffer.from(JSON.stringify({ version: 2, profiles: [] })), 'version: must be 1, got 2'],
    ];

    it.each(corrupt)('%s', (_what, bytes, words) => {
      const dataDir = tmp();
      const file = join(dataDir, 'profiles.json');
      writeFileSync(file, bytes);
      const store = new ProfileStore({ dataDir, nowMs: () => NOW_MS });

      const problem = store.loadProblem;
      expect(problem).not.toBeNull();
      expect(problem?.file).toBe(file);
      expect(problem?.backup).toBe(`${file}.bad-${STAMP}`);
      expect(problem?.message).toContain(`profiles file ${file}: `);
      expect(problem?.message).toContain(words);
      expect(readFileSync(`${file}.bad-${STAMP}`).equals(bytes)).toBe(true);
      expect(store.list()).toEqual([]);
      expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ version: 1, profiles: [] });

      // The store works afterwards, and the next open is clean.
      const created = store.create(input({ id: 'after' }));
      const again = new ProfileStore({ dataDir, nowMs: () => NOW_MS });
      expect(again.loadProblem).toBeNull();
      expect(again.list()).toEqual([created]);
      expect(readdirSync(dataDir).sort()).toEqual(['profiles.json', `profiles.json.bad-${STAMP}`]);
      expect(readFileSync(`${file}.bad-${STAMP}`).equals(bytes)).toBe(true);
    });

    it('never overwrites an earlier backup', () => {
      const dataDir = tmp();
      const file = join(dataDir, 'profiles.json');
      writeFileSync(file, 'first');
      expect(new ProfileStore({ dataDir, nowMs: () => NOW_MS }).loadProblem?.backup).toBe(`${file}.bad-${STAMP}`);
      writeFileSync(file, 'second');
      expect(new ProfileStore({ dataDir, nowMs: () => NOW_MS }).loadProblem?.backup).toBe(`${file}.bad-${STAMP}-2`);
      expect(readFileSync(`${file}.bad-${STAMP}`, 'utf8')).toBe('first');
      expect(readFileSync(`${file}.bad-${STAMP}-2`, 'utf8')).toBe('second');
    });
  });

  it.skipIf(process.platform === 'win32')('writes atomically: a new file renamed into place, owner-only, no temporaries left', () => {
    const dataDir = tmp();
    const store = new ProfileStore({ dataDir });
    const writes: (() => unknown)[] = [() => store.create(input({ id: 'a' })), () => store.update('a', { contextSize: 1024 }), () => store.delete('a')];
    for (const write of writes) {
      // A reader holding the old file keeps seeing all of the old content: the write replaced
      // the directory entry (temp file + rename, conf's `atomically`), not the bytes in place.
      const before = readFileSync(store.file, 'utf8');
      const fd = openSync(store.file, 'r');
      try {
        write();
        expect(fstatSync(fd).ino).not.toBe(statSync(store.file).ino);
        expect(readFileSync(fd, 'utf8')).toBe(before);
        expect(readFileSync(store.file, 'utf8')).not.toBe(before);
      } finally {
        closeSync(fd);
      }
    }
    expect(statSync(store.file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dataDir)).toEqual(['profiles.json']);
  });
});
