import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bindingCacheDir, folderName, KEPT } from '../../scripts/llama-binding-build.mjs';

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
});
