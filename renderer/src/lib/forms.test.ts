import { describe, expect, it } from 'vitest';
import { ApiError, DEFAULT_CONTEXT_CAP } from '../../../electron/core/contract.js';
import { describeError } from './errors.js';
import { checkForm, emptyForm, formFromProfile, nameFromPath, patchFromInput } from './profile-form.js';

describe('describeError', () => {
  it('reads an ApiError and says what to do', () => {
    const words = describeError('Launch', new ApiError('NOT_ADMITTED', 'does not fit'));
    expect(words).toEqual({ code: 'NOT_ADMITTED', message: 'does not fit', text: 'Launch failed — NOT_ADMITTED: does not fit (see the plan for what is in the way)' });
  });

  it('finds the code in an IPC error message', () => {
    const words = describeError('Set weight', new Error("Error invoking remote method 'gpu-share:setWeight': ApiError: BAD_REQUEST: weight: must be a number from 0.01 to 100"));
    expect(words.code).toBe('BAD_REQUEST');
    expect(words.text).toBe('Set weight failed — BAD_REQUEST: weight: must be a number from 0.01 to 100 (fix the named field and try again)');
  });

  it('reads the flat object the preload rejects with', () => {
    const words = describeError('Stop', { name: 'ApiError', code: 'NOT_FOUND', message: 'no engine e-1' });
    expect(words.text).toBe('Stop failed — NOT_FOUND: no engine e-1 (it is gone: the list refreshes with the next update)');
  });

  it('keeps any other error as it is', () => {
    expect(describeError('Stop', new Error('cannot reach GPU Share')).text).toBe('Stop failed — cannot reach GPU Share');
    expect(describeError('Stop', 42).text).toBe('Stop failed — unknown error');
  });
});

describe('profile form', () => {
  const filled = { ...emptyForm(), modelPath: '/models/qwen2.5-7b.Q4_K_M.gguf', name: 'qwen' };

  it('names a model after its file', () => {
    expect(nameFromPath('/models/qwen2.5-7b.Q4_K_M.gguf')).toBe('qwen2.5-7b.Q4_K_M');
    expect(nameFromPath('C:\\models\\phi.GGUF')).toBe('phi');
  });

  it('builds the profile input', () => {
    expect(checkForm({ ...filled, capabilities: 'chat, code chat', weight: '2' })).toEqual({
      ok: true,
      input: { name: 'qwen', capabilities: ['chat', 'code'], engineKind: 'builtin', modelPath: '/models/qwen2.5-7b.Q4_K_M.gguf', contextSize: DEFAULT_CONTEXT_CAP, priority: 'interactive', weight: 2 },
    });
    const noWeight = checkForm(filled);
    expect(noWeight.ok && 'weight' in noWeight.input).toBe(false);
  });

  it('keeps a preferred device, and fills the form from a profile to edit it; a cleared weight or device goes back to the default', () => {
    expect(checkForm({ ...filled, gpuKey: 'GPU-b' })).toMatchObject({ ok: true, input: { gpuKey: 'GPU-b' } });
    const noDevice = checkForm(filled);
    expect(noDevice.ok && 'gpuKey' in noDevice.input).toBe(false);
    const profile = { id: 'qwen', name: 'qwen', capabilities: ['chat', 'code'], engineKind: 'llama-server' as const, modelPath: '/m/q.gguf', contextSize: 4096, gpuLayers: 99, threads: null, weight: 2, priority: 'background' as const, pinned: false, idleUnloadMinutes: null, args: [], env: {}, command: null, gpuKey: 'GPU-b' };
    const form = formFromProfile(profile);
    expect(form).toEqual({ name: 'qwen', modelPath: '/m/q.gguf', engineKind: 'llama-server', capabilities: 'chat, code', contextSize: '4096', priority: 'background', weight: '2', gpuKey: 'GPU-b' });
    const edited = checkForm({ ...form, weight: '', gpuKey: '' });
    if (!edited.ok) throw new Error(edited.message);
    expect(patchFromInput(edited.input)).toEqual({ name: 'qwen', capabilities: ['chat', 'code'], engineKind: 'llama-server', modelPath: '/m/q.gguf', contextSize: 4096, priority: 'background', weight: null, gpuKey: null });
  });

  it('names the field that is wrong', () => {
    expect(checkForm(emptyForm())).toMatchObject({ ok: false, field: 'modelPath' });
    expect(checkForm({ ...filled, name: ' ' })).toMatchObject({ ok: false, field: 'name' });
    expect(checkForm({ ...filled, name: 'é'.repeat(24) })).toMatchObject({ ok: false, field: 'name' });
    expect(checkForm({ ...filled, capabilities: '' })).toMatchObject({ ok: false, field: 'capabilities' });
    expect(checkForm({ ...filled, capabilities: 'Chat' })).toMatchObject({ ok: false, field: 'capabilities' });
    expect(checkForm({ ...filled, contextSize: '4k' })).toMatchObject({ ok: false, field: 'contextSize' });
    expect(checkForm({ ...filled, weight: '500' })).toMatchObject({ ok: false, field: 'weight' });
  });
});
