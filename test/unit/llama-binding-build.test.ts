import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { bindingCacheDir, folderName, KEPT, optionalSkip } from '../../scripts/llama-binding-build.mjs';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'llama-binding-build.mjs');

describe('llama-binding:build', () => {
  it("names the build as node-llama-cpp looks for it, and keys its cache by version, commit and platform", () => {
    expect(folderName('linux', 'x64')).toBe('linux-x64');
    expect(folderName('darwin', 'arm64')).toBe('mac-arm64');
    expect(folderName('win32', 'x64')).toBe('win-x64');
    expect(bindingCacheDir('/c', '3.21.1', '80fb11ac73e66d89eae2c6a91d8a77428fa733ed', 'linux-x64')).toBe('/c/node-llama-cpp/3.21.1-80fb11ac73e6-linux-x64');
    // What node-llama-cpp checks before it loads a local build (getLocalBuildBinaryPath).
    expect(KEPT).toEqual(['Release', 'buildDone.status']);
  });

  it('refuses an unknown flag in one line with exit 2', () => {
    const result = spawnSync(process.execPath, [SCRIPT, '--fast'], { encoding: 'utf8' });
    expect(result.status).toBe(2);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^llama-binding:build: .*--fast/);
  });

  it('builds on install (--optional) on Linux only, and not when the user asks for the prebuilt binaries', () => {
    expect(optionalSkip('linux', {})).toBeNull();
    expect(optionalSkip('linux', { GPU_SHARE_PREBUILT_BINDING: '1' })).toBe('GPU_SHARE_PREBUILT_BINDING=1');
    expect(optionalSkip('darwin', {})).toMatch(/only built on install on Linux, this is darwin/);
    expect(optionalSkip('win32', { GPU_SHARE_PREBUILT_BINDING: '0' })).toMatch(/this is win32/);
  });

  it('never fails npm install: with nothing it needs, --optional says in one line why and what the engine uses, and exits 0', () => {
    const cache = mkdtempSync(join(tmpdir(), 'gpushare-binding-cache-'));
    try {
      // No git, CMake or compiler on the PATH, and nothing cached.
      const env = { ...process.env, PATH: '/nonexistent', GPU_SHARE_CACHE: cache };
      const optional = spawnSync(process.execPath, [SCRIPT, '--optional'], { encoding: 'utf8', env });
      expect(optional.status).toBe(0);
      expect(optional.stderr.trim().split('\n')).toHaveLength(1);
      expect(optional.stderr).toMatch(/^llama-binding:build: not built \(git is not installed.*prebuilt binaries.*npm run llama-binding:build/);
      // Asked for by name, the same is an error.
      const asked = spawnSync(process.execPath, [SCRIPT], { encoding: 'utf8', env });
      expect(asked.status).toBe(2);
      // A bad command line stays one, --optional or not.
      expect(spawnSync(process.execPath, [SCRIPT, '--optional', '--remove'], { encoding: 'utf8', env }).status).toBe(2);
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });
});
