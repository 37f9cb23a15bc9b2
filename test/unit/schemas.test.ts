/** The schemas every document from outside goes through: the error each API answers with names
 *  the offending path and says why, in that API's own shape. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, ESTIMATE_REQUEST, LAUNCH_REQUEST, parseInput, POLICY_PATCH, WEIGHT_REQUEST } from '../../electron/core/contract.js';
import { parseCompletionRequest } from '../../electron/core/api/gateway.js';
import { openAiErrorBody } from '../../electron/core/api/http.js';
import { toApiError } from '../../electron/core/app.js';
import { ProfileStore, type Profile, type ProfileInput, type ProfilePatch } from '../../electron/core/engines/profiles.js';
import { pathText } from '../../electron/core/schema.js';
import { openNodeSettings } from '../../electron/core/settings.js';

function refusal(call: () => unknown): ApiError {
  try {
    call();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

const chatProfile = { id: 'chat-1', name: 'Chat', capabilities: ['chat'], engineKind: 'builtin' } as Profile;

describe('/api bodies', () => {
  it('refuse an unknown top-level field, naming it (a misspelt field is not ignored)', () => {
    const error = refusal(() => parseInput(LAUNCH_REQUEST, { profileId: 'chat', profileID: 'chat' }));
    expect(error.toBody()).toEqual({ error: { code: 'BAD_REQUEST', message: 'profileID: unknown field (profileId, gpuKey)', field: 'profileID' } });
    expect(refusal(() => parseInput(WEIGHT_REQUEST, { weight: 2, engine: 'x' })).details.field).toBe('engine');
  });

  it('take a launch\'s device as a registry key, naming gpuKey when it is not one', () => {
    expect(parseInput(LAUNCH_REQUEST, { profileId: 'chat', gpuKey: 'GPU-8f1c' })).toEqual({ profileId: 'chat', gpuKey: 'GPU-8f1c' });
    expect(parseInput(LAUNCH_REQUEST, { profileId: 'chat' })).toEqual({ profileId: 'chat' });
    expect(refusal(() => parseInput(LAUNCH_REQUEST, { profileId: 'chat', gpuKey: 'GPU 1/..' })).details.field).toBe('gpuKey');
  });

  it('name a missing field with why, and the body when it is no object', () => {
    expect(refusal(() => parseInput(LAUNCH_REQUEST, {})).message).toBe('profileId: must be a non-empty string, got nothing');
    expect(refusal(() => parseInput(LAUNCH_REQUEST, [])).toBody().error).toMatchObject({ field: 'body', message: 'body: must be an object, got []' });
    expect(refusal(() => parseInput(WEIGHT_REQUEST, { weight: 0.001 })).message).toBe('weight: must be a number from 0.01 to 100, got 0.001');
  });

  it('check each field in the body beside the others', () => {
    expect(parseInput(ESTIMATE_REQUEST, { modelPath: '/m.gguf', contextSize: 4096, kvCacheType: null })).toEqual({ modelPath: '/m.gguf', contextSize: 4096, kvCacheType: null });
    const error = refusal(() => parseInput(ESTIMATE_REQUEST, { modelPath: '/m.gguf', kvCacheType: 'q3' }));
    expect([error.details.field, error.message]).toEqual(['kvCacheType', 'kvCacheType: must be one of f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, bf16, got "q3"']);
    expect(refusal(() => parseInput(POLICY_PATCH, { idleUnloadMinutes: 1.5 })).details.field).toBe('idleUnloadMinutes');
    expect(parseInput(POLICY_PATCH, { idleUnloadMinutes: null, draining: true })).toEqual({ idleUnloadMinutes: null, draining: true });
  });
});

describe('/v1 bodies', () => {
  it('answer in OpenAI\'s shape with the path deep in the body as `param`', () => {
    const body = { model: 'chat', messages: [{ role: 'user', content: 'hi' }, { role: 'robot', content: 'x' }] };
    const error = refusal(() => parseCompletionRequest('/v1/chat/completions', body, [chatProfile]));
    expect(openAiErrorBody(error)).toEqual({
      error: { message: 'messages[1].role: must be system, user, assistant, tool or developer, got "robot"', type: 'invalid_request_error', param: 'messages[1].role', code: 'invalid_value' },
    });
    const prompt = refusal(() => parseCompletionRequest('/v1/completions', { model: 'chat', prompt: [] }, [chatProfile]));
    expect(openAiErrorBody(prompt).error).toMatchObject({ param: 'prompt', type: 'invalid_request_error' });
  });

  it('pass fields they do not name through to the engine as sent', () => {
    const body = { model: 'Chat', prompt: 'once', seed: 7, stop: ['\n'] };
    const request = parseCompletionRequest('/v1/completions', body, [chatProfile]);
    expect(request.body).toBe(body);
    expect(request.shape).toMatch(/^prompt chars=4 sha256=/);
  });

  it('refuse a parameter the engine lacks, naming it, unless a llama-server profile takes it: then only those are tried', () => {
    const llamaProfile = { id: 'chat-2', name: 'Chat llama', capabilities: ['chat'], engineKind: 'llama-server' } as Profile;
    const body = { model: 'chat', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f' } }], response_format: { type: 'json_object' } };
    expect(openAiErrorBody(refusal(() => parseCompletionRequest('/v1/chat/completions', body, [chatProfile]))).error).toMatchObject({ param: 'tools', type: 'invalid_request_error' });
    expect(refusal(() => parseCompletionRequest('/v1/chat/completions', { model: 'chat', messages: body.messages, n: 2 }, [chatProfile])).details.field).toBe('n');
    const passed = parseCompletionRequest('/v1/chat/completions', body, [chatProfile, llamaProfile]);
    expect(passed.body).toBe(body);
    expect(passed.profiles.map((p) => p.id)).toEqual(['chat-2']);
    // Without such parameters both are tried, in the order they were added.
    expect(parseCompletionRequest('/v1/chat/completions', { model: 'chat', messages: body.messages, n: 1 }, [chatProfile, llamaProfile]).profiles.map((p) => p.id)).toEqual(['chat-1', 'chat-2']);
  });
});

it('writes paths as JSON paths', () => {
  expect(pathText('profiles', [2, 'env', 'A-B'])).toBe('profiles[2].env["A-B"]');
  expect(pathText('', ['messages', 0, 'content'])).toBe('messages[0].content');
});

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));
const dataDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-schemas-'));
  dirs.push(dir);
  return dir;
};

describe('profiles', () => {
  const store = (): ProfileStore => new ProfileStore({ dataDir: dataDir() });
  const input: ProfileInput = { name: 'Coder', capabilities: ['code'], engineKind: 'llama-server', modelPath: '/m.gguf', contextSize: 4096, priority: 'background' };

  it('name a wrong type deep in a profile by its path, and its top-level field for /api', () => {
    const profiles = store();
    profiles.create(input);
    const deep = refusal(() => {
      try {
        profiles.update('coder', { env: { CUDA_VISIBLE_DEVICES: '0', HF_HOME: 7 } } as unknown as ProfilePatch);
      } catch (error) {
        throw toApiError(error);
      }
    });
    expect(deep.toBody()).toEqual({ error: { code: 'BAD_REQUEST', message: 'profile.env.HF_HOME: must be a string, got 7', field: 'env' } });
    const item = refusal(() => {
      try {
        profiles.create({ ...input, name: 'Other', args: ['--ok', ['--nested']] } as unknown as ProfileInput);
      } catch (error) {
        throw toApiError(error);
      }
    });
    expect([item.message, item.details.field]).toEqual(['profile.args[1]: must be a string, got ["--nested"]', 'args']);
  });

  it('refuse an unknown field in an input and in a patch, and a patch that is no object', () => {
    const profiles = store();
    expect(() => profiles.create({ ...input, gpu: 1 } as unknown as ProfileInput)).toThrowError(/^profile\.gpu: is not a profile field \(known: id, name, /);
    profiles.create(input);
    expect(() => profiles.update('coder', { contextsize: 512 } as unknown as ProfilePatch)).toThrowError(/^profile\.contextsize: is not a profile field/);
    expect(() => profiles.update('coder', 'x' as unknown as ProfilePatch)).toThrowError('profile: must be an object, got "x"');
    // A patch is checked on its own, then the profile it makes whole (a kind that needs a command).
    expect(() => profiles.update('coder', { engineKind: 'command' })).toThrowError('profile.command: is required for a command engine');
    expect(profiles.update('coder', { weight: undefined, gpuLayers: 12 }).gpuLayers).toBe(12);
  });
});

describe('settings', () => {
  const TOKEN = 'a'.repeat(43);

  it('set a file with a wrong value deep inside aside, naming its path, and start from the defaults', () => {
    const dir = dataDir();
    const text = JSON.stringify({ version: 1, apiToken: TOKEN, gatewayTokens: [{ token: 'b'.repeat(43), priority: 'urgent', label: 'ci' }] });
    writeFileSync(join(dir, 'settings.json'), text);
    const settings = openNodeSettings(dir, 7787);
    expect(settings.loadProblem?.message).toContain('(gatewayTokens[0].priority: must be one of interactive, background, lab)');
    expect(readFileSync(settings.loadProblem?.backup ?? '', 'utf8')).toBe(text);
    expect(settings.get().gatewayTokens).toEqual([]);
    expect(settings.get().apiToken).not.toBe(TOKEN);
  });

  it('fill missing keys, keep unknown ones, and keep the last good settings when the file goes bad', () => {
    const dir = dataDir();
    const file = join(dir, 'settings.json');
    writeFileSync(file, JSON.stringify({ apiToken: TOKEN, addedLater: { x: 1 } }));
    const problems: string[] = [];
    const settings = openNodeSettings(dir, 7787, (line) => problems.push(line));
    expect(settings.loadProblem).toBeNull();
    expect(settings.get()).toMatchObject({ version: 1, apiPort: 7787, apiToken: TOKEN, labPaused: false, idleUnloadMinutes: null });
    settings.update({ labPaused: true });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ addedLater: { x: 1 }, labPaused: true });
    writeFileSync(file, JSON.stringify({ apiToken: TOKEN, apiPort: 70000 }));
    expect(settings.get().apiPort).toBe(7787);
    expect(problems).toEqual([`settings file ${file}: apiPort: must be a port from 1 to 65535; the last good settings stay in use`]);
    expect(() => settings.update({ idleUnloadMinutes: -1 })).toThrowError('settings idleUnloadMinutes: must be a whole number of minutes (0–100000) or null, got -1 (nothing written)');
  });
});
