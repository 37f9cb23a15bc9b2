/**
 * What runs is never chosen over HTTP (DESIGN.md, "Trust boundaries"). The API token sits in the
 * dashboard's URL, so in browser history: whoever holds it may pick among the engine executables
 * this machine already has and set ordinary arguments, but not name a program or set what a
 * process loads. Executables and loader environment come only from the local user: profiles.json,
 * the CLI, or the app's own window (IPC). Nor may it add arguments that make the engine write a
 * file of its naming.
 *
 * Pure: the HTTP server asks before it stores a profile made or changed over HTTP. Only what a
 * request changes is judged, so a profile written by hand (a llama-server at its own path, an
 * LD_LIBRARY_PATH) can still be renamed or re-weighted from a browser.
 */
import type { Profile } from './profiles.js';

/** Environment variables that change what a process (or the dynamic loader, or the Node process
 *  that paces an engine) loads and runs. GLIBC_TUNABLES sets the loader's own tunables too
 *  (glibc.rtld.*), and its parser has been an attack surface of its own. */
export function loaderEnvName(name: string): boolean {
  const upper = name.toUpperCase();
  return upper.startsWith('LD_') || upper.startsWith('DYLD_') || upper === 'NODE_OPTIONS' || upper === 'NODE_PATH' || upper === 'PATH' || upper === 'GLIBC_TUNABLES';
}

/** llama.cpp's arguments that make an engine write a file the argument names (its log, saved
 *  slots, a prompt cache): over HTTP they would let the token's holder overwrite a file of this
 *  user with text they partly choose (their prompts, logged). */
const FILE_WRITING_ARGS = ['--log-file', '--slot-save-path', '--prompt-cache', '--logdir', '-ld'];

export function writesFileArg(arg: string): boolean {
  return FILE_WRITING_ARGS.some((flag) => arg === flag || arg.startsWith(`${flag}=`));
}

/** How the local user makes what HTTP may not (shown by the API's refusal and the dashboard). */
export function localOnlyHowTo(dataDir: string): string {
  return `create or edit it on this machine instead: in ${dataDir}/profiles.json while serve is stopped, in the desktop app's window, or add the executable with \`gpu-share executables --add PATH\` so that it can be picked here`;
}

export interface RemoteProblem {
  field: 'engineKind' | 'command' | 'env' | 'args';
  message: string;
}

/**
 * Why a profile made (`current` null) or changed over HTTP may not be stored, or null when it may.
 * `known`: the paths of the engine executables found on this machine or added locally.
 */
export function remoteProfileProblem(current: Profile | null, next: Profile, known: Pick<ReadonlySet<string>, 'has'>): RemoteProblem | null {
  if (next.engineKind === 'command' || current?.engineKind === 'command') {
    return {
      field: 'engineKind',
      message: current === null ? 'a command engine runs a program of its own: command profiles are not created over HTTP' : `"${current.id}" is a command engine: command profiles are not ${next.engineKind === 'command' ? 'edited' : 'changed into another kind'} over HTTP`,
    };
  }
  const sameRunner = current !== null && current.engineKind === next.engineKind && current.command === next.command;
  if (next.command !== null && !sameRunner && !known.has(next.command)) {
    return { field: 'command', message: `${JSON.stringify(next.command.slice(0, 200))} is not one of the engine executables found on this machine or added on it (GET /api/executables lists them)` };
  }
  const argsChanged = current === null || current.args.length !== next.args.length || current.args.some((arg, i) => arg !== next.args[i]);
  const writing = argsChanged ? next.args.filter(writesFileArg) : [];
  if (writing.length > 0) return { field: 'args', message: `${writing.join(', ')}: arguments that make the engine write a file are set on this machine only, not over HTTP` };
  const before = current?.env ?? {};
  const changed = Object.entries(next.env)
    .filter(([name, value]) => loaderEnvName(name) && before[name] !== value)
    .map(([name]) => name);
  if (changed.length > 0) return { field: 'env', message: `${changed.join(', ')}: variables that change what a process loads are set on this machine only, not over HTTP` };
  return null;
}
