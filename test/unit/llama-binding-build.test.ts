import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { bindingCacheDir, folderName, KEPT, NODE_LLAMA_CPP, optionalSkip } from '../../scripts/llama-binding-build.mjs';
import { ORIGINAL_SUFFIX, patchAddon, patchId, patchText, STEP_SOURCE } from '../../scripts/llama-binding-patch.mjs';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'llama-binding-build.mjs');

describe('llama-binding:build', () => {
  it("names the build as node-llama-cpp looks for it, and keys its cache by version, commit, our patch and platform", () => {
    expect(folderName('linux', 'x64')).toBe('linux-x64');
    expect(folderName('darwin', 'arm64')).toBe('mac-arm64');
    expect(folderName('win32', 'x64')).toBe('win-x64');
    expect(bindingCacheDir('/c', '3.21.1', '80fb11ac73e66d89eae2c6a91d8a77428fa733ed', 'linux-x64', '0a1b2c3d')).toBe('/c/node-llama-cpp/3.21.1-80fb11ac73e6-0a1b2c3d-linux-x64');
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

describe("llama-binding:build's patch (gpuShareDecodeStep)", () => {
  const addon = join(NODE_LLAMA_CPP, 'llama', 'addon');
  const step = readFileSync(STEP_SOURCE, 'utf8');
  /** node-llama-cpp's file as shipped: the copy a build here kept beside it, or the installed one. */
  const shipped = (file: string): string => {
    const original = join(addon, `${file}${ORIGINAL_SUFFIX}`);
    const text = readFileSync(existsSync(original) ? original : join(addon, file), 'utf8');
    expect(text, `${file} as shipped`).not.toContain('GpuShareDecodeStep');
    return text;
  };

  it("fits the pinned node-llama-cpp's addon: declared, registered beside sampleToken, defined before the class's init", () => {
    const header = patchText('AddonContext.h', shipped('AddonContext.h'), step);
    const source = patchText('AddonContext.cpp', shipped('AddonContext.cpp'), step);
    if (header instanceof Error) throw header;
    if (source instanceof Error) throw source;
    expect(header).toContain('Napi::Value SampleToken(const Napi::CallbackInfo& info);\n        Napi::Value GpuShareDecodeStep(const Napi::CallbackInfo& info);\n');
    expect(source).toContain('InstanceMethod("sampleToken", &AddonContext::SampleToken),\n                InstanceMethod("gpuShareDecodeStep", &AddonContext::GpuShareDecodeStep),\n');
    expect(source.indexOf('Napi::Value AddonContext::GpuShareDecodeStep(')).toBeLessThan(source.indexOf('void AddonContext::init(Napi::Object exports) {'));
    expect(source.split('AddonContext::GpuShareDecodeStep(').length - 1).toBe(1);
    // Twice is once.
    expect(patchText('AddonContext.cpp', source, step)).toBe(source);
    expect(patchText('AddonContext.h', header, step)).toBe(header);
  });

  it('patches a changed step into the files as shipped (kept beside them), not into the last patch', () => {
    const folder = mkdtempSync(join(tmpdir(), 'gpushare-addon-'));
    try {
      for (const file of ['AddonContext.h', 'AddonContext.cpp']) writeFileSync(join(folder, file), shipped(file));
      const older = step.replace('gpu-share: one generated token', 'gpu-share (an earlier step): one generated token');
      patchAddon(folder, older);
      expect(readFileSync(join(folder, `AddonContext.cpp${ORIGINAL_SUFFIX}`), 'utf8')).toBe(shipped('AddonContext.cpp'));
      expect(readFileSync(join(folder, 'AddonContext.cpp'), 'utf8')).toContain('an earlier step');
      patchAddon(folder, step);
      const source = readFileSync(join(folder, 'AddonContext.cpp'), 'utf8');
      expect(source).not.toContain('an earlier step');
      expect(source).toContain('gpu-share: one generated token');
      expect(source.split('AddonContext::GpuShareDecodeStep(').length - 1).toBe(1);
      expect(readFileSync(join(folder, 'AddonContext.h'), 'utf8').split('GpuShareDecodeStep').length - 1).toBe(1);
      // Twice is once.
      patchAddon(folder, step);
      expect(readFileSync(join(folder, 'AddonContext.cpp'), 'utf8')).toBe(source);
      // A patched file whose original is gone: said, and nothing written.
      rmSync(join(folder, `AddonContext.cpp${ORIGINAL_SUFFIX}`));
      expect(() => patchAddon(folder, older)).toThrow(/AddonContext\.cpp holds an earlier gpu-share patch and not the file as shipped .*npm ci/);
      expect(readFileSync(join(folder, 'AddonContext.cpp'), 'utf8')).toBe(source);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('names the anchor that another node-llama-cpp lacks, and patches nothing', () => {
    const changed = shipped('AddonContext.cpp').replace('InstanceMethod("sampleToken"', 'InstanceMethod("sampleTokenV2"');
    const result = patchText('AddonContext.cpp', changed, step);
    expect(result).toBeInstanceOf(Error);
    expect(String(result)).toMatch(/AddonContext\.cpp: the anchor "InstanceMethod\(\\"sampleToken\\", &AddonContext::SampleToken\),".* 0 times, not once/);
  });

  it("keys the build's cache by the step's source", () => {
    expect(patchId(step)).toMatch(/^[0-9a-f]{8}$/);
    expect(patchId(`${step} `)).not.toBe(patchId(step));
  });
});
