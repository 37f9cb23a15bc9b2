/**
 * What each package would carry: electron-builder.yml's files / asarUnpack / extraResources rules
 * applied to this checkout by electron-builder's own matchers (scripts/packed-files.mjs), for every
 * target, without Electron. Needs `npm run build:native && npm run build:ts` first (and
 * `npm run build:renderer` for the dashboard check; CI runs `npm run build`).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { HELPER_FILES, OS_NAMES } from '../../scripts/before-pack.mjs';
import { describeBinaryFile } from '../../scripts/native-binary.mjs';
import { TARGETS, packedFiles, projectRoot, type PackedList } from '../../scripts/packed-files.mjs';

const HOST = `${process.platform}-${process.arch}`;
const lists = new Map<string, PackedList>();

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, entry.name);
      if (entry.isDirectory()) walk(p);
      else out.push(p);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

const rel = (p: string): string => relative(projectRoot, p).split('\\').join('/');
const list = (target: string): PackedList => lists.get(target)!;
const dests = (target: string): Set<string> => new Set(list(target).files.map((f) => f.dest));
const platformOf = (target: string) => target.split('-')[0] as 'linux' | 'win32' | 'darwin';
const archOf = (target: string) => target.split('-')[1]!;
/** The packages of an npm scope that a list carries. */
const scopePackages = (target: string, scope: string): string[] =>
  [...new Set(list(target).files.map((f) => f.dest.match(new RegExp(`/node_modules/${scope}/([^/]+)/`))?.[1]).filter((n): n is string => n !== undefined))].sort();

describe('packed files per target', () => {
  beforeAll(async () => {
    if (!existsSync(join(projectRoot, 'dist', 'electron', 'cli.js'))) {
      throw new Error('dist/electron is not built: run `npm run build:ts` (and `npm run build:native`) before the packaging tests');
    }
    for (const target of TARGETS) lists.set(target, await packedFiles(target));
    for (const target of TARGETS) {
      const { files, nodeModules } = list(target);
      const mib = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;
      const size = (where: string) => mib(files.filter((f) => f.where === where).reduce((s, f) => s + f.size, 0));
      console.log(`${target}: ${files.length} files; app.asar ${size('asar')}, unpacked ${size('unpacked')}, resources ${size('resources')}; ` +
        `node_modules files left out: ${nodeModules.considered - nodeModules.packed} of ${nodeModules.considered}`);
    }
  }, 300_000);

  it('every target carries the built app: package.json, bin/, dist/electron JS, dist/native', () => {
    const built = [
      ...filesUnder(join(projectRoot, 'dist', 'electron')).filter((p) => /\.c?js$/.test(p)),
      ...filesUnder(join(projectRoot, 'dist', 'native')).filter((p) => p.endsWith('.js')),
      ...filesUnder(join(projectRoot, 'bin')),
      join(projectRoot, 'package.json'),
    ].map(rel);
    expect(built).toContain('dist/electron/cli.js');
    for (const target of TARGETS) {
      const packed = dests(target);
      const missing = built.filter((p) => !packed.has(`app.asar/${p}`));
      expect(missing, `${target}: built files not packed`).toEqual([]);
    }
  });

  it('every target carries the dashboard (dist/renderer)', () => {
    const renderer = join(projectRoot, 'dist', 'renderer');
    if (!existsSync(join(renderer, 'index.html'))) {
      throw new Error('dist/renderer/index.html is missing: the renderer is not built (run `npm run build:renderer`; CI runs `npm run build` first)');
    }
    const built = filesUnder(renderer).map(rel).filter((p) => !p.endsWith('.map'));
    for (const target of TARGETS) {
      const packed = dests(target);
      expect(built.filter((p) => !packed.has(`app.asar/${p}`)), `${target}: renderer files not packed`).toEqual([]);
    }
  });

  it('each system gets its own tray icons and the app icon', () => {
    const expected: Record<string, RegExp> = {
      linux: /^tray-[a-z-]+\.png$/,
      win32: /^tray-[a-z-]+\.ico$/,
      darwin: /^tray-[a-z-]+Template(@2x)?\.png$/,
    };
    const all = readdirSync(join(projectRoot, 'resources', 'tray'));
    for (const target of TARGETS) {
      const tray = list(target).files.filter((f) => f.dest.startsWith('app.asar/resources/tray/')).map((f) => f.dest.split('/').pop()!).sort();
      expect(tray, target).toEqual(all.filter((n) => expected[platformOf(target)]!.test(n)).sort());
      expect(tray.length).toBeGreaterThanOrEqual(5);
      expect(dests(target).has('app.asar/resources/icons/icon.png'), target).toBe(true);
    }
  });

  it('no tests, fixtures, models, source maps or build outputs', () => {
    const forbidden = [
      /(^|\/)(test|tests|__tests__|fixtures)\//,
      /\.test\.[cm]?js$/,
      /\.gguf$/i,
      /\.map$/,
      /^app\.asar(\.unpacked)?\/(dist\/test|build|native|electron|renderer\/src|scripts|\.github)\//,
      /^app\.asar(\.unpacked)?\/[^/]+\.(ts|yml|md)$/,
      /(^|\/)gitRelease\.bundle$/,
    ];
    for (const target of TARGETS) {
      const bad = list(target).files.map((f) => f.dest).filter((d) => forbidden.some((re) => re.test(d)));
      expect(bad, `${target}: files that must not be packed`).toEqual([]);
    }
  });

  it('native code is never inside app.asar, and is built for the target only', () => {
    for (const target of TARGETS) {
      const wrong: string[] = [];
      for (const f of list(target).files) {
        const kind = describeBinaryFile(f.source);
        const nativeByName = /\.(node|so|dll|dylib|exe)$/.test(f.dest);
        if (kind === null && !nativeByName) continue;
        if (f.where === 'asar') wrong.push(`${f.dest}: native code inside app.asar`);
        if (kind === null) continue;
        if (kind.platform !== platformOf(target) || !kind.arches.includes(archOf(target))) {
          wrong.push(`${f.dest}: built for ${kind.platform}-${kind.arches.join('+')}`);
        }
      }
      expect(wrong, `${target}: native binaries`).toEqual([]);
    }
  });

  it("koffi's and node-llama-cpp's platform packages: the target's own, never another system's", () => {
    // What this machine has installed (npm installs the host's, and node-llama-cpp's arm builds too).
    const installed = (scope: string) => (existsSync(join(projectRoot, 'node_modules', scope)) ? readdirSync(join(projectRoot, 'node_modules', scope)) : []);
    for (const target of TARGETS) {
      const platform = platformOf(target);
      const arch = archOf(target);
      const koffi = scopePackages(target, '@koromix');
      expect(koffi, `${target}: koffi binaries`).toEqual(installed('@koromix').filter((n) => n === `koffi-${platform}-${arch}`));
      const llama = scopePackages(target, '@node-llama-cpp');
      // All of the target's builds but the CUDA fallback (-ext).
      expect(llama, `${target}: node-llama-cpp binaries`).toEqual(installed('@node-llama-cpp').filter((n) => n.startsWith(`${OS_NAMES[platform]}-${arch}`) && !n.endsWith('-ext')).sort());
      const reflink = scopePackages(target, '@reflink').filter((n) => n !== 'reflink');
      expect(reflink.every((n) => n.startsWith(`reflink-${platform}-${arch}`)), `${target}: ${reflink.join(', ')}`).toBe(true);
      // node-llama-cpp itself is there (its JS in the archive).
      expect(dests(target).has('app.asar/node_modules/node-llama-cpp/package.json'), target).toBe(true);
      // Never a binding built on this machine (npm run llama-binding:build; CI builds one): tuned
      // for this CPU, and with it electron-builder unpacked all of node-llama-cpp, which then
      // could not find its dependencies.
      expect([...dests(target)].filter((d) => d.includes('node-llama-cpp/llama/localBuilds')), target).toEqual([]);
    }
    // On this machine the host's own binaries are installed, so its package carries them.
    expect(scopePackages(HOST, '@koromix')).toEqual([`koffi-${HOST}`]);
    expect(scopePackages(HOST, '@node-llama-cpp').length).toBeGreaterThan(0);
  });

  it('the registry helper and watchdog are extra resources at native/<platform>-<arch>/ (where native/paths.ts looks)', () => {
    expect(existsSync(join(projectRoot, 'build', 'native', HOST)), `build/native/${HOST} is missing: run \`npm run build:native\``).toBe(true);
    for (const target of TARGETS) {
      const helper = list(target).files.filter((f) => f.where === 'resources');
      const built = existsSync(join(projectRoot, 'build', 'native', target, HELPER_FILES[platformOf(target)][0]!));
      // Targets not built on this machine (another system's compiler) have nothing to copy yet;
      // packaging-helper.test.ts checks their rule.
      const expected = built ? HELPER_FILES[platformOf(target)].map((file) => `native/${target}/${file}`).sort() : [];
      expect(helper.map((f) => f.dest).sort(), target).toEqual(expected);
      for (const f of helper) expect(statSync(f.source).size, f.dest).toBeGreaterThan(0);
    }
  });
});
