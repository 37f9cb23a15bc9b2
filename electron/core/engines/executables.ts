/**
 * Engine executables on this machine: llama.cpp's server, llamafile and Ollama, found on PATH and
 * in the places their installers and builds put them, plus those the local user added (the CLI's
 * `gpu-share executables --add`, kept in the data folder). Over HTTP a profile may only name one of
 * these (remote-profile.ts); a plan checks that the one a profile names exists and can run.
 *
 * Discovery only stats files (never opens one); a candidate must be a regular file (a link is
 * judged by its target), executable, and on POSIX owned by this user or root and writable by no
 * one else (a binary others can replace is not offered). Versions come from `--version` in a child
 * with a short timeout, once per file (path, size and mtime).
 */
import { execFile } from 'node:child_process';
import { accessSync, constants as fsConstants, readdirSync, realpathSync, statSync, type Stats } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, posix, win32 } from 'node:path';
import type { ExecutableView } from '../contract.js';
import type { ExecutableProblem, ExecutableProblemCode } from '../planner/types.js';

export const EXECUTABLE_KINDS = ['llama-server', 'llamafile', 'ollama'] as const;
export type ExecutableKind = (typeof EXECUTABLE_KINDS)[number];

/** How long `--version` may take before it is given up (the child is killed). */
export const VERSION_TIMEOUT_MS = 3_000;
/** What is kept of its output. */
const VERSION_OUTPUT_MAX = 16 * 1024;

/** The file names each kind goes by. llama.cpp named its server `server` until mid-2024: that
 *  name is looked for only in llama.cpp build folders (on PATH it could be anything). */
export function executableNames(kind: ExecutableKind, platform: NodeJS.Platform): string[] {
  const exe = platform === 'win32' ? '.exe' : '';
  switch (kind) {
    case 'llama-server':
      return [`llama-server${exe}`];
    case 'llamafile':
      return platform === 'win32' ? ['llamafile.exe', 'llamafile'] : ['llamafile'];
    case 'ollama':
      return [`ollama${exe}`];
  }
}

export interface Place {
  dir: string;
  /** llama.cpp's own build folder: its old `server` name counts there. */
  llamaCppBuild: boolean;
}

/** The folders installers and builds put these engines in, per OS (PATH comes first, apart). */
export function usualPlaces(platform: NodeJS.Platform, env: NodeJS.ProcessEnv, home: string): Place[] {
  const p = platform === 'win32' ? win32 : posix;
  const place = (dir: string, llamaCppBuild = false): Place => ({ dir, llamaCppBuild });
  const builds = [place(p.join(home, 'llama.cpp', 'build', 'bin'), true), place(p.join(home, 'llama.cpp'), true)];
  const gpuShareCache = env['GPU_SHARE_CACHE'] ?? p.join(env['XDG_CACHE_HOME'] ?? p.join(home, '.cache'), 'gpu-share');
  if (platform === 'win32') {
    const local = env['LOCALAPPDATA'] ?? p.join(home, 'AppData', 'Local');
    const programFiles = env['ProgramFiles'] ?? 'C:\\Program Files';
    return [
      place(p.join(local, 'Programs', 'Ollama')),
      place(p.join(local, 'Programs', 'llama.cpp')),
      place(p.join(local, 'Microsoft', 'WinGet', 'Links')),
      place(p.join(home, 'scoop', 'shims')),
      place(p.join(programFiles, 'llama.cpp')),
      place(p.join(home, 'llama.cpp', 'build', 'bin', 'Release'), true),
      ...builds,
    ];
  }
  const common = [place('/usr/local/bin'), place('/usr/bin'), place(p.join(home, '.local', 'bin')), place(p.join(home, 'bin'))];
  if (platform === 'darwin') {
    return [place('/opt/homebrew/bin'), ...common, place('/opt/local/bin'), place('/Applications/Ollama.app/Contents/Resources'), ...builds];
  }
  return [...common, place('/home/linuxbrew/.linuxbrew/bin'), place(p.join(home, '.linuxbrew', 'bin')), place('/snap/bin'), ...builds, ...gpuShareBuilds(gpuShareCache)];
}

/** `npm run llama-server:build` puts its builds in `<cache>/llama-server/<commit>[-cuda-…]/`. */
function gpuShareBuilds(cache: string): Place[] {
  const root = join(cache, 'llama-server');
  try {
    return readdirSync(root)
      .sort()
      .slice(0, 16)
      .map((name) => ({ dir: join(root, name), llamaCppBuild: false }));
  } catch {
    return [];
  }
}

export interface FoundExecutable {
  /** The path as found (a link keeps its own path: Homebrew's, say). */
  path: string;
  kind: ExecutableKind | null;
  /** Where it was found. */
  source: 'PATH' | 'usual place' | 'added';
  sizeBytes: number;
  mtimeMs: number;
}

export interface FileFacts {
  /** stat (following links); throws like fs.statSync. */
  stat(path: string): Stats;
  /** Whether this user may execute it. */
  executable(path: string): boolean;
  /** This process's uid; null on Windows. */
  uid: number | null;
}

export const realFiles: FileFacts = {
  stat: (path) => statSync(path),
  executable: (path) => {
    try {
      accessSync(path, fsConstants.X_OK);
      return true;
    } catch {
      return false;
    }
  },
  uid: process.getuid?.() ?? null,
};

/** Why a file may not be run as an engine, or null when it may. */
export function fileProblem(path: string, files: FileFacts = realFiles): ExecutableProblemCode | null {
  const checked = runnableFile(path, files);
  return typeof checked === 'string' ? checked : null;
}

/** The file's stat when it is a file we may run, else why not (one stat). */
function runnableFile(path: string, files: FileFacts): Stats | ExecutableProblemCode {
  let stat: Stats;
  try {
    stat = files.stat(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'EACCES' ? 'NOT_EXECUTABLE' : 'MISSING';
  }
  if (!stat.isFile()) return 'NOT_A_FILE';
  if (!files.executable(path)) return 'NOT_EXECUTABLE';
  return stat;
}

/** Whether others could have replaced it: owned by someone other than this user or root, or
 *  writable by the group or everyone (POSIX only). */
function replaceableByOthers(stat: Stats, uid: number | null): boolean {
  if (uid === null) return false;
  return (stat.uid !== uid && stat.uid !== 0) || (stat.mode & 0o022) !== 0;
}

export interface FindOptions {
  platform?: NodeJS.Platform;
  env?: NodeJS.ProcessEnv;
  home?: string;
  /** Executables the local user added. */
  added?: readonly string[];
  files?: FileFacts;
}

/** Every engine executable found, PATH first, each file once (by its real path). */
export function findExecutables(options: FindOptions = {}): FoundExecutable[] {
  const platform = options.platform ?? process.platform;
  const env = options.env ?? process.env;
  const home = options.home ?? homedir();
  const files = options.files ?? realFiles;
  const found: FoundExecutable[] = [];
  const seen = new Set<string>();
  const consider = (path: string, kind: ExecutableKind | null, source: FoundExecutable['source']): void => {
    const stat = runnableFile(path, files);
    if (typeof stat === 'string') return;
    let real: string;
    try {
      real = files === realFiles ? realpathSync(path) : path;
    } catch {
      return;
    }
    if (source !== 'added' && replaceableByOthers(stat, files.uid)) return;
    if (seen.has(real)) return;
    seen.add(real);
    found.push({ path, kind, source, sizeBytes: stat.size, mtimeMs: stat.mtimeMs });
  };
  const p = platform === 'win32' ? win32 : posix;
  for (const dir of pathDirs(env, platform).filter((d) => p.isAbsolute(d))) for (const kind of EXECUTABLE_KINDS) for (const name of executableNames(kind, platform)) consider(p.join(dir, name), kind, 'PATH');
  for (const place of usualPlaces(platform, env, home)) {
    for (const kind of EXECUTABLE_KINDS) for (const name of executableNames(kind, platform)) consider(p.join(place.dir, name), kind, 'usual place');
    if (place.llamaCppBuild) consider(p.join(place.dir, platform === 'win32' ? 'server.exe' : 'server'), 'llama-server', 'usual place');
  }
  for (const path of options.added ?? []) consider(path, kindFromName(path, platform), 'added');
  return found;
}

/** The folders on PATH (`Path` on Windows), empty entries left out. */
function pathDirs(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): string[] {
  return (env['PATH'] ?? env['Path'] ?? '').split(platform === 'win32' ? ';' : ':').filter((dir) => dir !== '');
}

/** The kind a file's name says, or null. */
export function kindFromName(path: string, platform: NodeJS.Platform = process.platform): ExecutableKind | null {
  const p = platform === 'win32' ? win32 : posix;
  const base = p.basename(path).toLowerCase().replace(/\.exe$/, '');
  if (base === 'llama-server') return 'llama-server';
  if (base === 'llamafile' || base.endsWith('.llamafile')) return 'llamafile';
  if (base === 'ollama') return 'ollama';
  return null;
}

/** The first line of `--version`'s output that names a version (llama-server prints
 *  `version: 4567 (abc1234)` on stderr, Ollama `ollama version is 0.5.7`, llamafile
 *  `llamafile v0.8.17`), at most 120 characters; null when none does. */
export function versionFromOutput(output: string): string | null {
  const lines = output.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== '');
  const line = lines.find((l) => /version|\bv?\d+\.\d+/i.test(l) && !/^warning:\s*could not connect/i.test(l));
  if (line === undefined) return null;
  // eslint-disable-next-line no-control-regex
  return line.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 120);
}

/** `--version` in a child: its version line, or null if it printed none, failed or took too long.
 *  Never rejects. */
export function readVersion(path: string, timeoutMs = VERSION_TIMEOUT_MS): Promise<string | null> {
  return new Promise((resolve) => {
    try {
      const child = execFile(path, ['--version'], { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: VERSION_OUTPUT_MAX, windowsHide: true, encoding: 'utf8' }, (_error, stdout, stderr) => {
        // Some print their version and exit non-zero (Ollama without a server): the text counts.
        resolve(versionFromOutput(`${String(stdout)}\n${String(stderr)}`));
      });
      child.stdin?.end();
    } catch {
      resolve(null);
    }
  });
}

/** Where a command name would be found on PATH (as spawn finds it), or the path itself. */
export function resolveCommand(command: string, env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform, files: FileFacts = realFiles): string {
  const p = platform === 'win32' ? win32 : posix;
  if (command.includes('/') || (platform === 'win32' && command.includes('\\'))) return command;
  const dirs = pathDirs(env, platform);
  const names = platform === 'win32' && !/\.[a-z0-9]+$/i.test(command) ? [command, `${command}.exe`, `${command}.cmd`, `${command}.bat`] : [command];
  for (const dir of dirs) {
    for (const name of names) {
      const candidate = p.join(dir, name);
      if (fileProblem(candidate, files) === null) return candidate;
    }
  }
  return command;
}

/** Whether the executable a profile names (a path, or a name looked up on PATH) exists and may
 *  be run; null when it may. */
export function checkEngineExecutable(command: string, env: NodeJS.ProcessEnv = process.env, files: FileFacts = realFiles, platform: NodeJS.Platform = process.platform): ExecutableProblem | null {
  const resolved = resolveCommand(command, env, platform, files);
  const bare = resolved === command && !isAbsolute(command) && !command.includes('/') && !command.includes('\\');
  if (bare) return { code: 'ENGINE_EXECUTABLE_MISSING', executable: command, problem: 'NOT_ON_PATH' };
  const problem = fileProblem(resolved, files);
  return problem === null ? null : { code: 'ENGINE_EXECUTABLE_MISSING', executable: resolved, problem };
}

export interface ExecutableEntry extends FoundExecutable {
  /** The first line of `--version` that names one; null when it printed none (or did not run). */
  version: string | null;
}

/** What the API and the CLI show of one (its path, kind, where it was found, its version). */
export function executableView({ path, kind, source, version }: ExecutableEntry): ExecutableView {
  return { path, kind, source, version };
}

/** The executables with their versions, each version read once per file. */
export class ExecutableCatalog {
  private readonly versions = new Map<string, Promise<string | null>>();

  constructor(private readonly options: { added: () => readonly string[]; find?: (added: readonly string[]) => FoundExecutable[]; version?: (path: string) => Promise<string | null> }) {}

  /** Found now (a quick stat of a few dozen paths). */
  found(): FoundExecutable[] {
    return (this.options.find ?? ((added) => findExecutables({ added })))(this.options.added());
  }

  async list(): Promise<ExecutableEntry[]> {
    const found = this.found();
    const read = this.options.version ?? readVersion;
    return Promise.all(
      found.map(async (entry) => {
        const key = `${entry.path}\u0000${entry.sizeBytes}\u0000${entry.mtimeMs}`;
        let version = this.versions.get(key);
        if (version === undefined) {
          version = read(entry.path);
          this.versions.set(key, version);
        }
        return { ...entry, version: await version };
      }),
    );
  }

  /** Whether a path is one of those found or added now. */
  isKnown(path: string): boolean {
    return this.found().some((entry) => entry.path === path);
  }
}
