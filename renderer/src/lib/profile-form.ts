/** The add-model form: its fields as typed, checked into a ProfileInput with a message per
 *  field that says what to type. */
import { DEFAULT_CONTEXT_CAP, defaultContextSize, type EngineKind, type ExecutableView, type LocalModelView, type Priority, type Profile, type ProfileInput, type ProfilePatch } from '../../../electron/core/contract.js';
import { parseWeightInput } from './weight.js';

export const FORM_ENGINE_KINDS: readonly EngineKind[] = ['builtin', 'llama-server', 'llamafile', 'opencoti-llamafile', 'command'];

/** The kinds a form may choose: over HTTP not a command (what runs is chosen on this machine
 *  only); the profile's own kind is always shown. */
export function formEngineKinds(transport: 'ipc' | 'http', current: EngineKind): EngineKind[] {
  const kinds = FORM_ENGINE_KINDS.filter((kind) => transport === 'ipc' || kind !== 'command');
  return kinds.includes(current) ? kinds : [...kinds, current];
}

/** How a command engine is made, for the dashboard in a browser (where it cannot be). */
export function commandHowTo(dataDir: string): string {
  return `A command engine runs a program of its own, so it is made and edited on this machine only: in ${dataDir}/profiles.json while gpu-share serve is stopped, or in the desktop app's window. An executable added with \`gpu-share executables --add PATH\` can be picked here for a llama-server or llamafile engine.`;
}
export const FORM_PRIORITIES: readonly Priority[] = ['interactive', 'background', 'lab'];

export interface ProfileForm {
  name: string;
  modelPath: string;
  engineKind: EngineKind;
  capabilities: string;
  contextSize: string;
  priority: Priority;
  /** Empty: the priority's default. */
  weight: string;
  /** The preferred device's key; empty: the default (the header's device, else the most free). */
  gpuKey: string;
  /** The executable (llama-server, llamafile, command); empty: the kind's own, found on PATH. */
  command: string;
  /** Extra arguments, one per line. */
  args: string;
}

export type FormResult = { ok: true; input: ProfileInput } | { ok: false; field: keyof ProfileForm; message: string };

/** "qwen2.5-7b-instruct-q4_k_m.gguf" → "qwen2.5-7b-instruct-q4_k_m" (either slash). */
export function nameFromPath(path: string): string {
  const base = path.split(/[\\/]/).pop() ?? '';
  return base.replace(/\.gguf$/i, '').slice(0, 47);
}

export function emptyForm(): ProfileForm {
  return { name: '', modelPath: '', engineKind: 'builtin', capabilities: 'chat', contextSize: String(DEFAULT_CONTEXT_CAP), priority: 'interactive', weight: '', gpuKey: '', command: '', args: '' };
}

/** The form filled with a profile's values (Edit). */
export function formFromProfile(profile: Profile): ProfileForm {
  return {
    name: profile.name,
    modelPath: profile.modelPath ?? '',
    engineKind: profile.engineKind,
    capabilities: profile.capabilities.join(', '),
    contextSize: String(profile.contextSize),
    priority: profile.priority,
    weight: profile.weight === null ? '' : String(profile.weight),
    gpuKey: profile.gpuKey ?? '',
    command: profile.command ?? '',
    args: profile.args.join('\n'),
  };
}

/** The form filled from a model found on this machine (one click in "On this machine"): its file,
 *  its tool's name, and the context its fit was planned for. */
export function formFromLocalModel(form: ProfileForm, model: LocalModelView): ProfileForm {
  const name = model.name.length > 47 ? nameFromPath(model.path) : model.name;
  return { ...form, modelPath: model.path, name: name.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 47), contextSize: String(model.fit?.contextSize ?? defaultContextSize(model.trainContextSize)) };
}

/** The executables a kind may run, from those found on this machine: its own kind's, and those
 *  added with no kind of their own. */
export function executablesFor(kind: EngineKind, executables: readonly ExecutableView[]): ExecutableView[] {
  const wanted = kind === 'llama-server' ? 'llama-server' : kind === 'llamafile' || kind === 'opencoti-llamafile' ? 'llamafile' : null;
  if (wanted === null) return [];
  return executables.filter((e) => e.kind === wanted || e.kind === null);
}

/** What saving an edited form changes: the form's fields, a cleared weight or device back to the
 *  default (null). */
export function patchFromInput(input: ProfileInput): ProfilePatch {
  const { id: _id, ...fields } = input;
  return { ...fields, weight: input.weight ?? null, gpuKey: input.gpuKey ?? null };
}

const utf8Length = (text: string): number => new TextEncoder().encode(text).length;

export function checkForm(form: ProfileForm): FormResult {
  const modelPath = form.modelPath.trim();
  // Only a command engine (edited, never added here) may run without a model file.
  if (modelPath === '' && form.engineKind !== 'command') return { ok: false, field: 'modelPath', message: 'choose a model file (.gguf)' };
  const name = form.name.trim();
  if (name === '') return { ok: false, field: 'name', message: 'give the model a name' };
  if (utf8Length(name) > 47) return { ok: false, field: 'name', message: 'the name is at most 47 bytes (it becomes the registry name)' };
  if (/[\u0000-\u001f\u007f]/.test(name)) return { ok: false, field: 'name', message: 'the name cannot hold control characters' };
  const capabilities = [...new Set(form.capabilities.split(/[\s,]+/).filter((c) => c !== ''))];
  if (capabilities.length === 0) return { ok: false, field: 'capabilities', message: 'list at least one capability, e.g. chat' };
  const badCapability = capabilities.find((c) => !/^[a-z0-9._-]{1,32}$/.test(c));
  if (badCapability !== undefined) return { ok: false, field: 'capabilities', message: `"${badCapability}": use a-z, 0-9, . _ - (at most 32)` };
  const contextSize = Number(form.contextSize.trim());
  if (!Number.isInteger(contextSize) || contextSize < 1 || contextSize > 10_000_000) return { ok: false, field: 'contextSize', message: 'the context is a whole number of tokens from 1 to 10,000,000' };
  const command = form.command.trim();
  if (form.engineKind === 'command' && command === '') return { ok: false, field: 'command', message: 'a command engine needs the program to run' };
  const args = form.args.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== '');
  const input: ProfileInput = { name, capabilities, engineKind: form.engineKind, modelPath: modelPath === '' ? null : modelPath, contextSize, priority: form.priority, command: form.engineKind === 'builtin' || command === '' ? null : command, args };
  if (form.gpuKey !== '') input.gpuKey = form.gpuKey;
  if (form.weight.trim() !== '') {
    const weight = parseWeightInput(form.weight);
    if (!weight.ok) return { ok: false, field: 'weight', message: weight.message };
    input.weight = weight.weight;
  }
  return { ok: true, input };
}
