import { describe, expect, it } from 'vitest';
import { ApiError, DEFAULT_CONTEXT_CAP } from '../../../electron/core/contract.js';
import { describeError } from './errors.js';
import { checkForm, commandHowTo, emptyForm, executablesFor, formEngineKinds, formFromLocalModel, formFromProfile, nameFromPath, patchFromInput } from './profile-form.js';

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
      input: { name: 'qwen', capabilities: ['chat', 'code'], engineKind: 'builtin', modelPath: '/models/qwen2.5-7b.Q4_K_M.gguf', contextSize: DEFAULT_CONTEXT_CAP, priority: 'interactive', command: null, args: [], weight: 2 },
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
    expect(form).toEqual({ name: 'qwen', modelPath: '/m/q.gguf', engineKind: 'llama-server', capabilities: 'chat, code', contextSize: '4096', priority: 'background', weight: '2', gpuKey: 'GPU-b', command: '', args: '' });
    const edited = checkForm({ ...form, weight: '', gpuKey: '' });
    if (!edited.ok) throw new Error(edited.message);
    expect(patchFromInput(edited.input)).toEqual({ name: 'qwen', capabilities: ['chat', 'code'], engineKind: 'llama-server', modelPath: '/m/q.gguf', contextSize: 4096, priority: 'background', command: null, args: [], weight: null, gpuKey: null });
  });

  it('chooses the engine: an executable from those found (its own kind\'s and added ones), arguments one per line', () => {
    const executables = [
      { path: '/usr/local/bin/llama-server', kind: 'llama-server' as const, source: 'PATH' as const, version: 'version: 4567 (abc1234)' },
      { path: '/opt/llamafile', kind: 'llamafile' as const, source: 'usual place' as const, version: null },
      { path: '/usr/local/bin/ollama', kind: 'ollama' as const, source: 'PATH' as const, version: 'ollama version is 0.5.7' },
      { path: '/home/u/my-server', kind: null, source: 'added' as const, version: null },
    ];
    expect(executablesFor('llama-server', executables).map((e) => e.path)).toEqual(['/usr/local/bin/llama-server', '/home/u/my-server']);
    expect(executablesFor('opencoti-llamafile', executables).map((e) => e.path)).toEqual(['/opt/llamafile', '/home/u/my-server']);
    expect(executablesFor('builtin', executables)).toEqual([]);
    const checked = checkForm({ ...filled, engineKind: 'llama-server', command: '/usr/local/bin/llama-server', args: '--flash-attn\n on \n\n--threads\n4' });
    expect(checked).toMatchObject({ ok: true, input: { engineKind: 'llama-server', command: '/usr/local/bin/llama-server', args: ['--flash-attn', 'on', '--threads', '4'] } });
    // The built-in engine never names one; an empty choice is the kind's own on PATH.
    expect(checkForm({ ...filled, command: '/x' })).toMatchObject({ ok: true, input: { command: null } });
    expect(checkForm({ ...filled, engineKind: 'llamafile' })).toMatchObject({ ok: true, input: { command: null } });
    expect(checkForm({ ...filled, engineKind: 'command', modelPath: '' })).toMatchObject({ ok: false, field: 'command' });
    expect(formEngineKinds('http', 'builtin')).not.toContain('command');
    expect(formEngineKinds('http', 'command')).toContain('command');
    expect(formEngineKinds('ipc', 'builtin')).toContain('command');
    expect(commandHowTo('/home/u/.local/share/gpu-share')).toContain('/home/u/.local/share/gpu-share/profiles.json');
  });

  it('fills the form from a model on this machine', () => {
    const model = { name: 'llama3.2:3b', source: 'ollama' as const, path: '/home/u/.ollama/models/blobs/sha256-ab', sizeBytes: 2e9, quantization: 'Q4_K_M', trainContextSize: 131072, architecture: 'llama', read: true, problem: null, fit: { verdict: 'ADMIT' as const, gpuKey: 'cpu-0', contextSize: 8192, requirementBytes: 3e9, reason: '' }, fitProblem: null };
    expect(formFromLocalModel(emptyForm(), model)).toMatchObject({ name: 'llama3.2:3b', modelPath: model.path, contextSize: '8192' });
    expect(formFromLocalModel(emptyForm(), { ...model, fit: null, trainContextSize: 2048 }).contextSize).toBe('2048');
    expect(formFromLocalModel(emptyForm(), { ...model, name: `org/${'x'.repeat(60)}`, path: '/c/models--org--x/snapshots/r/file.Q8_0.gguf' }).name).toBe('file.Q8_0');
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
