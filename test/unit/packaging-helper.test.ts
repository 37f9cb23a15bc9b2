/**
 * The native helper in a package: electron-builder.yml copies build/native/<platform>-<arch>/
 * (where native/build.mjs writes) to <resources>/native/<platform>-<arch>/, which is exactly where
 * native/paths.ts looks when the app runs packaged; and when nothing is found, the error names
 * every path that was tried. No file is found in this test: existsSync answers "no" throughout.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  return { ...actual, existsSync: () => false };
});

const { HELPER_FILES } = await import('../../scripts/before-pack.mjs');
const { TARGETS, extraResourceRules, projectRoot } = await import('../../scripts/packed-files.mjs');
const { helperCandidates, loadRegistryHelper, RegistryError } = await import('../../native/helper.js');
const { findWatchdog, watchdogCandidates } = await import('../../native/process-control.js');
const { vulkanListerCandidates } = await import('../../native/vulkan-devices.js');

const RESOURCES = join('/opt', 'GPU Share', 'resources');
const OVERRIDE = join('/tmp', 'gpu-share-native-override');

/** Runs `fn` as if on `target` (process.platform and process.arch), packaged at RESOURCES. */
function asIf<T>(target: string, fn: () => T): T {
  const [platform, arch] = target.split('-');
  const saved = { platform: Object.getOwnPropertyDescriptor(process, 'platform')!, arch: Object.getOwnPropertyDescriptor(process, 'arch')! };
  Object.defineProperty(process, 'platform', { value: platform, configurable: true });
  Object.defineProperty(process, 'arch', { value: arch, configurable: true });
  try {
    return fn();
  } finally {
    Object.defineProperty(process, 'platform', saved.platform);
    Object.defineProperty(process, 'arch', saved.arch);
  }
}

describe('the native helper in a package', () => {
  beforeEach(() => {
    Object.defineProperty(process, 'resourcesPath', { value: RESOURCES, configurable: true, writable: true });
  });
  afterEach(() => {
    Reflect.deleteProperty(process, 'resourcesPath');
    delete process.env['GPU_SHARE_NATIVE_DIR'];
  });

  it('the extraResources rule puts each target\'s files exactly where native/paths.ts looks first when packaged', () => {
    for (const target of TARGETS) {
      const platform = target.split('-')[0] as 'linux' | 'win32' | 'darwin';
      const rules = extraResourceRules(target);
      expect(rules, target).toHaveLength(1);
      const [rule] = rules;
      expect(rule!.from, `${target}: copied from where native/build.mjs writes`).toBe(`build/native/${target}`);
      expect([...rule!.filter].sort(), target).toEqual([...HELPER_FILES[platform]].sort());
      const [library, watchdog, lister] = asIf(target, () => [helperCandidates(), watchdogCandidates(), vulkanListerCandidates()]);
      const packaged = (candidates: string[]) => relative(RESOURCES, candidates[0]!).split('\\').join('/');
      expect(packaged(library!), `${target}: the library`).toBe(`${rule!.to}/${HELPER_FILES[platform][0]}`);
      expect(packaged(watchdog!), `${target}: the watchdog`).toBe(`${rule!.to}/${HELPER_FILES[platform][1]}`);
      expect(packaged(lister!), `${target}: the Vulkan device lister`).toBe(`${rule!.to}/${HELPER_FILES[platform][2]}`);
    }
  });

  it('one list of native file names (native/files.json): the build writes them, the loaders look for them', () => {
    const build = readFileSync(join(projectRoot, 'native', 'build.mjs'), 'utf8');
    expect(build).toContain("'files.json'");
    expect(build).not.toMatch(/'[^']*gpushare[^']*\.(so|dll|dylib)'|`gpushare-watchdog/); // no second copy of a name
    for (const [platform, [library, watchdog, lister]] of Object.entries(HELPER_FILES)) {
      asIf(`${platform}-x64`, () => {
        expect(helperCandidates().every((path) => path.endsWith(library!)), platform).toBe(true);
        expect(watchdogCandidates().every((path) => path.endsWith(watchdog!)), platform).toBe(true);
        expect(vulkanListerCandidates().every((path) => path.endsWith(lister!)), platform).toBe(true);
      });
    }
    // What `npm run build:native` wrote on this machine carries the same names.
    const built = readdirSync(join(projectRoot, 'build', 'native', `${process.platform}-${process.arch}`));
    expect(built).toEqual(expect.arrayContaining([...HELPER_FILES[process.platform as 'linux']]));
  });

  it('a missing helper: the error names every path tried (override, resources, build folders)', () => {
    process.env['GPU_SHARE_NATIVE_DIR'] = OVERRIDE;
    const tried = helperCandidates();
    expect(tried[0]).toBe(join(OVERRIDE, HELPER_FILES[process.platform as 'linux'][0]!));
    expect(tried[1]).toBe(join(RESOURCES, 'native', `${process.platform}-${process.arch}`, HELPER_FILES[process.platform as 'linux'][0]!));
    expect(tried.some((p) => p === join(projectRoot, 'build', 'native', `${process.platform}-${process.arch}`, HELPER_FILES[process.platform as 'linux'][0]!))).toBe(true);
    let error: unknown;
    try {
      loadRegistryHelper();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RegistryError);
    expect((error as InstanceType<typeof RegistryError>).code).toBe('HELPER_MISSING');
    for (const path of tried) expect((error as Error).message).toContain(path);
  });

  it('a missing watchdog: the error names every path tried', () => {
    const tried = watchdogCandidates();
    expect(tried[0]).toBe(join(RESOURCES, 'native', `${process.platform}-${process.arch}`, HELPER_FILES[process.platform as 'linux'][1]!));
    expect(() => findWatchdog()).toThrow(/watchdog is missing/);
    let message = '';
    try {
      findWatchdog();
    } catch (e) {
      message = (e as Error).message;
    }
    for (const path of tried) expect(message).toContain(path);
  });
});
