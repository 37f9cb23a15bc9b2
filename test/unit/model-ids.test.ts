/** Every model has its own id: a profile's name is unique (letter case aside; a duplicate is a 409
 *  naming the other profile; duplicates in an older file are renamed as it is read) and is a model
 *  id beside the capabilities, in OpenAI's list shape, with a precedence that lets a request reach
 *  the one profile it names. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { modelIdsOf } from '../../electron/core/contract.js';
import { modelList, parseCompletionRequest, resolveModel } from '../../electron/core/api/gateway.js';
import { toApiError } from '../../electron/core/app.js';
import { profileNamed } from '../../electron/core/commands/launch.js';
import { FakeClock } from '../../electron/core/clock.js';
import { Supervisor, type LaunchSpec } from '../../electron/core/engines/supervisor.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { simSupervisorDeps } from '../fixtures/supervisor-deps.js';
import { PROFILE_NAME_MAX_BYTES, ProfileError, ProfileNameTakenError, ProfileStore, uniqueProfileNames, validateProfile, type Profile, type ProfileInput } from '../../electron/core/engines/profiles.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const tmp = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-model-ids-'));
  dirs.push(dir);
  return dir;
};

const input = (name: string, capabilities: string[] = ['chat'], over: Partial<ProfileInput> = {}): ProfileInput => ({ name, capabilities, engineKind: 'builtin', modelPath: '/m/tiny.gguf', contextSize: 256, priority: 'interactive', ...over });
const profile = (id: string, name: string, capabilities: string[] = ['chat']): Profile => validateProfile({ id, ...input(name, capabilities) }, 'profile');

function refusal(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a refusal');
}

describe("a profile's name is unique", () => {
  it('refuses a second profile with a taken name in any letter case, naming the other profile: a 409 on the field "name"', () => {
    const store = new ProfileStore({ dataDir: tmp() });
    store.create(input('chat-a'));
    const before = readFileSync(store.file, 'utf8');
    for (const name of ['chat-a', 'CHAT-A', 'Chat-A']) {
      const error = refusal(() => store.create(input(name)));
      expect(error).toBeInstanceOf(ProfileNameTakenError);
      expect(error).toBeInstanceOf(ProfileError);
      expect((error as ProfileNameTakenError).other).toEqual({ id: 'chat-a', name: 'chat-a' });
      expect((error as Error).message).toContain('"chat-a" is the name of profile "chat-a"');
      const api = toApiError(error);
      expect(api.code).toBe('CONFLICT');
      expect(api.details).toMatchObject({ field: 'name' });
    }
    expect(readFileSync(store.file, 'utf8')).toBe(before);
    // Another name is fine, and so is keeping one's own name (in another case too) on an edit.
    const b = store.create(input('chat-b'));
    expect(store.update(b.id, { name: 'Chat-B', weight: 2 }).name).toBe('Chat-B');
    expect(refusal(() => store.update(b.id, { name: 'CHAT-a' }))).toBeInstanceOf(ProfileNameTakenError);
    expect(store.list().map((p) => p.name)).toEqual(['chat-a', 'Chat-B']);
  });

  it('loads a file that holds duplicates: the first keeps its name, later ones are suffixed (within the byte limit) and say so, until the next change writes them', () => {
    const dataDir = tmp();
    const long = 'x'.repeat(PROFILE_NAME_MAX_BYTES);
    const doc = { version: 1, profiles: [profile('a', 'chat-a'), profile('b', 'Chat-A'), profile('c', 'chat-a 2'), profile('d', long), profile('e', long), profile('f', 'chat-a')] };
    writeFileSync(join(dataDir, 'profiles.json'), JSON.stringify(doc));
    const store = new ProfileStore({ dataDir });
    expect(store.loadProblem).toBeNull();
    const names = store.list().map((p) => p.name);
    expect(names).toEqual(['chat-a', 'Chat-A 3', 'chat-a 2', long, `${'x'.repeat(PROFILE_NAME_MAX_BYTES - 2)} 2`, 'chat-a 4']);
    expect(new Set(names.map((n) => n.toLowerCase())).size).toBe(names.length);
    expect(store.renamedOnLoad.map((r) => [r.id, r.from, r.to])).toEqual([
      ['b', 'Chat-A', 'Chat-A 3'],
      ['e', long, `${'x'.repeat(PROFILE_NAME_MAX_BYTES - 2)} 2`],
      ['f', 'chat-a', 'chat-a 4'],
    ]);
    expect(store.renamedOnLoad[0]?.message).toContain('profile "b" has the name of profile "a"');
    // Reading writes nothing; the next change writes the new names, and the notice goes.
    expect(JSON.parse(readFileSync(store.file, 'utf8'))).toEqual(doc);
    store.update('a', { weight: 2 });
    expect(store.renamedOnLoad).toEqual([]);
    const again = new ProfileStore({ dataDir });
    expect(again.renamedOnLoad).toEqual([]);
    expect(again.list().map((p) => p.name)).toEqual(names);
  });

  it('renames as a pure function too, keeping a unique list as it is', () => {
    const list = [profile('a', 'one'), profile('b', 'two')];
    expect(uniqueProfileNames(list, 'f')).toEqual({ profiles: list, renamed: [] });
  });
});

describe('model ids', () => {
  const a = profile('chat-a', 'chat-a', ['chat']);
  const b = profile('chat-b', 'chat-b', ['chat', 'code']);

  it("lists every profile by its name and each capability, in OpenAI's shape, owned_by telling which is which", () => {
    const list = modelList([a, b], 1700000000);
    expect(list).toEqual([
      { id: 'chat-a', object: 'model', created: 1700000000, owned_by: 'profile' },
      { id: 'chat-b', object: 'model', created: 1700000000, owned_by: 'profile' },
      { id: 'chat', object: 'model', created: 1700000000, owned_by: 'capability' },
      { id: 'code', object: 'model', created: 1700000000, owned_by: 'capability' },
    ]);
    // Nothing but OpenAI's four fields.
    for (const entry of list) expect(Object.keys(entry).sort()).toEqual(['created', 'id', 'object', 'owned_by']);
  });

  it('sends a request to the profile it names, before any capability of that name; a capability to every profile serving it', () => {
    expect(resolveModel('chat-b', [a, b])).toEqual({ owner: 'profile', profiles: [b] });
    expect(resolveModel('chat', [a, b])).toEqual({ owner: 'capability', profiles: [a, b] });
    // A profile named like a capability: the name wins, and the list shows that id once.
    const named = profile('x', 'code', ['code']);
    expect(resolveModel('code', [b, named])).toEqual({ owner: 'profile', profiles: [named] });
    expect(modelIdsOf([b, named])).toEqual([
      { id: 'chat-b', owner: 'profile' },
      { id: 'code', owner: 'profile' },
      { id: 'chat', owner: 'capability' },
    ]);
    // The profile's id (the API's slug) reaches it too; a name that is another's id wins.
    const slug = profile('qwen-7b', 'Qwen 7B', ['chat']);
    expect(resolveModel('qwen-7b', [slug])?.profiles).toEqual([slug]);
    const tricky = profile('z', 'qwen-7b', ['chat']);
    expect(resolveModel('qwen-7b', [slug, tricky])?.profiles).toEqual([tricky]);
    // Exact, as OpenAI's ids are: "Qwen 7b" is no model here.
    expect(resolveModel('Qwen 7b', [slug])).toBeNull();
    // Through the request parser: chat-b's request goes to chat-b alone.
    expect(parseCompletionRequest('/v1/chat/completions', { model: 'chat-b', messages: [{ role: 'user', content: 'hi' }] }, [a, b]).profiles.map((p) => p.id)).toEqual(['chat-b']);
  });
});

describe('plan history', () => {
  it("names the profile planned (its name), beside the capability, without changing the plan's fingerprint", () => {
    const supervisor = new Supervisor(simSupervisorDeps({ clock: new FakeClock(), gpuKey: 'GPU-sim' }));
    const spec = (name: string): LaunchSpec => ({ profileId: name, name, kind: 'builtin', capability: 'chat', modelPath: '/m/tiny.gguf', modelKey: 'k', contextSize: 256, gpuLayers: 99, threads: 1, weight: 1, priority: 'interactive', pinned: false, command: null, args: [], env: {}, peakBytes: 1 * GiB, peakSource: 'ESTIMATED' });
    const a = supervisor.plan(spec('chat-a'));
    const b = supervisor.plan(spec('chat-b'));
    expect([a.request.profileName, b.request.profileName]).toEqual(['chat-a', 'chat-b']);
    expect(a.request.capability).toBe('chat');
    // A label: the same model, context and engine plan to the same fingerprint.
    expect(a.fingerprint).toBe(b.fingerprint);
  });
});

describe('gpu-share launch PROFILE', () => {
  it('finds a profile by its id, else by its name in any letter case', () => {
    const qwen = profile('qwen-7b', 'Qwen 7B');
    const other = profile('z', 'qwen-7b');
    expect(profileNamed([qwen, other], 'qwen-7b')).toBe(qwen);
    expect(profileNamed([qwen, other], 'qwen 7b')).toBe(qwen);
    expect(profileNamed([qwen, other], 'Z')?.id).toBeUndefined();
    expect(profileNamed([qwen, other], 'QWEN-7B')).toBe(other);
  });
});
