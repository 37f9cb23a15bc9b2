import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkEngineExecutable, ExecutableCatalog, findExecutables, readVersion, usualPlaces, versionFromOutput } from '../../electron/core/engines/executables.js';
import { engineExecutableProblem } from '../../electron/core/engines/launch-spec.js';
import { LocalAdditionsStore, readAdditions } from '../../electron/core/engines/local-additions.js';
import { loaderEnvName, remoteProfileProblem } from '../../electron/core/engines/remote-profile.js';
import { validateProfile, type Profile } from '../../electron/core/engines/profiles.js';

let dir: string;
const script = (path: string, body: string, mode = 0o755): string => {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, mode);
  return path;
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-exe-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('engine executables on this machine', () => {
  it('finds llama-server, llamafile and ollama on PATH and in the usual places, each file once, and those added', () => {
    const bin = join(dir, 'bin');
    const home = join(dir, 'home');
    const build = join(home, 'llama.cpp', 'build', 'bin');
    const local = join(home, '.local', 'bin');
    for (const d of [bin, build, local]) mkdirSync(d, { recursive: true });
    script(join(bin, 'llama-server'), 'echo "version: 4567 (abc1234)" >&2');
    script(join(bin, 'ollama'), 'echo "ollama version is 0.5.7"');
    script(join(build, 'server'), 'echo "version: 1 (old)" >&2'); // llama.cpp's old name, in its build folder
    script(join(local, 'llamafile'), 'echo "llamafile v0.8.17"');
    symlinkSync(join(bin, 'llama-server'), join(local, 'llama-server')); // the same file again
    script(join(local, 'ollama'), 'exit 0', 0o644); // not executable: skipped
    script(join(dir, 'writable-llama'), 'exit 0', 0o777);
    mkdirSync(join(dir, 'wbin'));
    symlinkSync(join(dir, 'writable-llama'), join(dir, 'wbin', 'llama-server')); // anyone may replace it: skipped
    mkdirSync(join(bin, 'llamafile')); // a folder by that name: skipped
    const added = script(join(dir, 'my-engine'), 'echo "my-engine 2.0"');
    const found = findExecutables({ platform: 'linux', env: { PATH: `${bin}:${join(dir, 'wbin')}:relative/bin` }, home, added: [added, join(dir, 'missing')] });
    expect(found.map(({ path, kind, source }) => ({ path, kind, source }))).toEqual([
      { path: join(bin, 'llama-server'), kind: 'llama-server', source: 'PATH' },
      { path: join(bin, 'ollama'), kind: 'ollama', source: 'PATH' },
      { path: join(local, 'llamafile'), kind: 'llamafile', source: 'usual place' },
      { path: join(build, 'server'), kind: 'llama-server', source: 'usual place' },
      { path: added, kind: null, source: 'added' },
    ]);
  });

  it('reads each one\'s version in a child with a timeout, once per file', async () => {
    const fast = script(join(dir, 'fast'), 'echo "warning: something"; echo "version: 4567 (abc1234)" >&2; exit 1');
    const slow = script(join(dir, 'slow'), 'sleep 30');
    const silent = script(join(dir, 'silent'), 'exit 0');
    expect(await readVersion(fast)).toBe('version: 4567 (abc1234)');
    const started = Date.now();
    expect(await readVersion(slow, 500)).toBeNull();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await readVersion(silent)).toBeNull();
    expect(await readVersion(join(dir, 'nothing-here'))).toBeNull();
    expect(versionFromOutput('Warning: could not connect to a running Ollama instance\nWarning: client version is 0.5.7\n')).toBe('Warning: client version is 0.5.7');
    expect(versionFromOutput('llamafile v0.8.17\n')).toBe('llamafile v0.8.17');

    let reads = 0;
    const catalog = new ExecutableCatalog({
      added: () => [fast],
      version: async () => {
        reads++;
        return 'v1';
      },
    });
    await catalog.list();
    await catalog.list();
    expect(reads).toBe(catalog.found().length);
    expect(catalog.isKnown(fast)).toBe(true);
    expect(catalog.isKnown(join(dir, 'elsewhere'))).toBe(false);
  });

  it('knows the usual places of each OS', () => {
    expect(usualPlaces('darwin', {}, '/Users/u').map((p) => p.dir)).toEqual(expect.arrayContaining(['/opt/homebrew/bin', '/usr/local/bin', '/Users/u/.local/bin', '/Users/u/llama.cpp/build/bin', '/Applications/Ollama.app/Contents/Resources']));
    expect(usualPlaces('win32', { LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' }, 'C:\\Users\\u').map((p) => p.dir)).toEqual(expect.arrayContaining(['C:\\Users\\u\\AppData\\Local\\Programs\\Ollama', 'C:\\Users\\u\\AppData\\Local\\Microsoft\\WinGet\\Links', 'C:\\Users\\u\\llama.cpp\\build\\bin\\Release']));
    expect(usualPlaces('linux', {}, '/home/u').map((p) => p.dir)).toEqual(expect.arrayContaining(['/usr/local/bin', '/home/u/.local/bin', '/home/linuxbrew/.linuxbrew/bin', '/home/u/llama.cpp/build/bin']));
  });

  it('says why a profile\'s executable cannot run: not on PATH, missing, not a file, not executable', () => {
    const empty = join(dir, 'empty');
    mkdirSync(empty, { recursive: true });
    expect(checkEngineExecutable('llama-server', { PATH: empty })).toEqual({ code: 'ENGINE_EXECUTABLE_MISSING', executable: 'llama-server', problem: 'NOT_ON_PATH' });
    expect(checkEngineExecutable(join(dir, 'gone', 'llama-server'), {})).toEqual({ code: 'ENGINE_EXECUTABLE_MISSING', executable: join(dir, 'gone', 'llama-server'), problem: 'MISSING' });
    expect(checkEngineExecutable(empty, {})?.problem).toBe('NOT_A_FILE');
    expect(checkEngineExecutable(script(join(dir, 'plain'), 'exit 0', 0o644), {})?.problem).toBe('NOT_EXECUTABLE');
    expect(checkEngineExecutable('sh', process.env)).toBeNull();
    // A profile's own PATH is where its engine will look.
    const profile = validateProfile({ id: 'l', name: 'l', capabilities: ['chat'], engineKind: 'llama-server', modelPath: '/m.gguf', contextSize: 256, priority: 'interactive', env: { PATH: empty } }, 'profile');
    expect(engineExecutableProblem(profile)?.problem).toBe('NOT_ON_PATH');
    expect(engineExecutableProblem({ ...profile, engineKind: 'builtin', command: null })).toBeNull();
  });

  it('keeps what the local user added in local.json, refusing a link, a FIFO and a bad document with one line', () => {
    const data = join(dir, 'data');
    const store = new LocalAdditionsStore(data);
    expect(store.add('executables', '/opt/x/llama-server')).toBe(true);
    expect(store.add('executables', '/opt/x/llama-server')).toBe(false);
    expect(() => store.add('modelFolders', 'relative/path')).toThrow(/absolute path/);
    expect(new LocalAdditionsStore(data).get()).toEqual({ executables: ['/opt/x/llama-server'], modelFolders: [] });
    const linked = join(dir, 'linked');
    mkdirSync(linked);
    symlinkSync(join(data, 'local.json'), join(linked, 'local.json'));
    expect(readAdditions(join(linked, 'local.json'))).toEqual({ ok: false, problem: expect.stringContaining('symbolic link') });
    const bad = join(dir, 'bad');
    mkdirSync(bad);
    writeFileSync(join(bad, 'local.json'), JSON.stringify({ version: 1, executables: ['x'] }));
    expect(new LocalAdditionsStore(bad).loadProblem).toMatch(/executables\[0\]: must be an absolute path/);
  });
});

describe('what runs is never chosen over HTTP', () => {
  const base = (extra: Record<string, unknown>): Profile => validateProfile({ id: 'p', name: 'p', capabilities: ['chat'], engineKind: 'llama-server', modelPath: '/m.gguf', contextSize: 256, priority: 'interactive', ...extra }, 'profile');
  const known = new Set(['/usr/local/bin/llama-server']);

  it('refuses a command profile, made or edited', () => {
    const command = validateProfile({ id: 'c', name: 'c', capabilities: ['chat'], engineKind: 'command', command: '/bin/sh', args: ['-c', 'id'], contextSize: 1, priority: 'lab' }, 'profile');
    expect(remoteProfileProblem(null, command, known)?.field).toBe('engineKind');
    expect(remoteProfileProblem(command, { ...command, name: 'renamed' }, known)?.field).toBe('engineKind');
    expect(remoteProfileProblem(command, { ...command, engineKind: 'llama-server' }, known)?.field).toBe('engineKind');
  });

  it('lets a profile pick an executable on the list (or the default), not another', () => {
    expect(remoteProfileProblem(null, base({ command: '/usr/local/bin/llama-server', args: ['--flash-attn'] }), known)).toBeNull();
    expect(remoteProfileProblem(null, base({ command: null }), known)).toBeNull();
    expect(remoteProfileProblem(null, base({ command: '/tmp/evil' }), known)?.field).toBe('command');
    // One written by hand keeps working from a browser while it is left as it is.
    const handWritten = base({ command: '/opt/mine/llama-server' });
    expect(remoteProfileProblem(handWritten, { ...handWritten, weight: 2 }, known)).toBeNull();
    expect(remoteProfileProblem(handWritten, { ...handWritten, engineKind: 'llamafile' }, known)?.field).toBe('command');
  });

  it('refuses arguments that make the engine write a file, when they are added', () => {
    expect(remoteProfileProblem(null, base({ args: ['--log-file', '/home/u/.bashrc'] }), known)?.field).toBe('args');
    expect(remoteProfileProblem(null, base({ args: ['--slot-save-path=/tmp/x'] }), known)?.field).toBe('args');
    expect(remoteProfileProblem(null, base({ args: ['--threads', '4', '--flash-attn', 'on'] }), known)).toBeNull();
    const logged = base({ args: ['--log-file', '/var/log/llama.log'] });
    expect(remoteProfileProblem(logged, { ...logged, weight: 2 }, known)).toBeNull();
  });

  it('refuses loader environment that is added or changed, not what was there', () => {
    for (const name of ['LD_PRELOAD', 'LD_LIBRARY_PATH', 'DYLD_INSERT_LIBRARIES', 'NODE_OPTIONS', 'PATH', 'ld_preload', 'GLIBC_TUNABLES']) expect(loaderEnvName(name), name).toBe(true);
    for (const name of ['CUDA_VISIBLE_DEVICES', 'HF_HOME', 'LLAMA_ARG_CTX_SIZE']) expect(loaderEnvName(name), name).toBe(false);
    expect(remoteProfileProblem(null, base({ env: { LD_PRELOAD: '/tmp/x.so' } }), known)?.field).toBe('env');
    const withPath = base({ env: { LD_LIBRARY_PATH: '/opt/cuda/lib' } });
    expect(remoteProfileProblem(withPath, { ...withPath, env: { ...withPath.env, HF_HOME: '/x' } }, known)).toBeNull();
    expect(remoteProfileProblem(withPath, { ...withPath, env: { LD_LIBRARY_PATH: '/tmp' } }, known)?.field).toBe('env');
  });
});
