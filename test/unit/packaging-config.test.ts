/**
 * electron-builder.yml itself: it validates against electron-builder's own schema, sets the fuses
 * the app needs, installs per user on Windows, builds each system's package on that system (the
 * release workflow's jobs), and the README's install section says what the configuration does.
 * Plus the pieces the packaging relies on: the beforePack check and the binary header reader.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import beforePack, { HELPER_FILES, nativePartProblems } from '../../scripts/before-pack.mjs';
import { declaredExports } from '../../scripts/check-native.mjs';
import { describeBinary, describeBinaryFile } from '../../scripts/native-binary.mjs';
import { TARGETS, loadBuilderConfig, projectRoot, readYaml } from '../../scripts/packed-files.mjs';

const require = createRequire(import.meta.url);
type Validate = ((data: unknown) => boolean) & { errors?: Array<{ instancePath: string; message?: string }> | null };
const Ajv = require('ajv').default as new (options: object) => { compile(schema: object): Validate };
const { expandMacro } = require('app-builder-lib/out/util/macroExpander') as { expandMacro(p: string, arch: string | null, appInfo: object, extra?: object): string };
const { getArtifactArchName, archFromString } = require('builder-util') as { getArtifactArchName(arch: number, ext: string): string; archFromString(name: string): number };
const { getWindowsInstallationDirName } = require('app-builder-lib/out/targets/targetUtil') as { getWindowsInstallationDirName(appInfo: object, tryProductName: boolean): string };
const { PlatformPackager } = require('app-builder-lib') as { PlatformPackager: { prototype: { generateFuseConfig(fuses: object): Promise<Record<string, unknown>> } } };
const { FuseV1Options } = require('@electron/fuses') as { FuseV1Options: Record<string, number> };
const { sanitizeFileName } = require('builder-util/out/filename') as { sanitizeFileName(name: string): string };

const config = loadBuilderConfig();
const pkg = JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { name: string; version: string; scripts: Record<string, string>; main: string };
const schema = JSON.parse(readFileSync(require.resolve('app-builder-lib/scheme.json'), 'utf8')) as object;
const workflow = readYaml(join(projectRoot, '.github', 'workflows', 'release.yml'));
// Line endings as checked out (CRLF on Windows runners) do not matter.
const readme = readFileSync(join(projectRoot, 'README.md'), 'utf8').replace(/\r\n/g, '\n');

/** A README section: from its heading to the next heading of the same level. */
function section(text: string, heading: string): string {
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`README has no "${heading}" section`);
  const level = heading.split(' ')[0]!;
  const rest = text.slice(start + heading.length + 2);
  const next = rest.search(new RegExp(`\\n${level} `));
  return next < 0 ? rest : rest.slice(0, next);
}

describe('electron-builder.yml', () => {
  it("validates against electron-builder's JSON schema (app-builder-lib/scheme.json), and the schema rejects a broken copy", () => {
    const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
    const ok = validate(config);
    expect(ok ? [] : validate.errors!.map((e) => `${e.instancePath} ${e.message}`)).toEqual([]);
    for (const broken of [
      { ...config, nsis: { ...config['nsis'], perMachine: 'yes' } },
      { ...config, electronFuses: { ...config['electronFuses'], runAsNodeTypo: false } },
      { ...config, asarUnpackTypo: [] },
    ]) {
      expect(validate(broken), JSON.stringify(Object.keys(broken))).toBe(false);
    }
  });

  it("passes electron-builder's own configuration check", async () => {
    const { validateConfiguration } = require('app-builder-lib/out/util/config/config') as { validateConfiguration(c: object, logger: object): Promise<void> };
    await expect(validateConfiguration(structuredClone(config), { isEnabled: false, add() {} })).resolves.toBeUndefined();
  });

  it('names the app and packs it into an asar archive, native parts unpacked', () => {
    expect(config['productName']).toBe('GPU Share');
    expect(config['appId']).toMatch(/^[a-z0-9-]+(\.[a-z0-9-]+)+$/);
    expect(config['asar']).toBe(true);
    expect(config['asarUnpack']).toEqual(expect.arrayContaining(['**/*.node', 'node_modules/@koromix/**', 'node_modules/@node-llama-cpp/**']));
    expect(config['npmRebuild']).toBe(false);
    expect(pkg.scripts['dist']).toBe('npm run build && electron-builder --config electron-builder.yml');
    // The patterns use only macros that expand to the target (${platform} would be the build host's).
    expect(JSON.stringify(config)).not.toContain('${platform}');
  });

  it('sets the fuses: RunAsNode on (node-llama-cpp forks to test its binaries); NODE_OPTIONS and --inspect off; asar integrity, asar-only and cookie encryption on', async () => {
    const fuses = config['electronFuses'] as Record<string, boolean>;
    expect(fuses).toEqual({
      runAsNode: true,
      enableNodeOptionsEnvironmentVariable: false,
      enableNodeCliInspectArguments: false,
      enableEmbeddedAsarIntegrityValidation: true,
      onlyLoadAppFromAsar: true,
      enableCookieEncryption: true,
    });
    // What electron-builder hands to @electron/fuses' flipFuses.
    const wire = await PlatformPackager.prototype.generateFuseConfig.call({}, fuses);
    expect(wire[FuseV1Options['RunAsNode']!]).toBe(true);
    expect(wire[FuseV1Options['EnableNodeOptionsEnvironmentVariable']!]).toBe(false);
    expect(wire[FuseV1Options['EnableNodeCliInspectArguments']!]).toBe(false);
    expect(wire[FuseV1Options['EnableEmbeddedAsarIntegrityValidation']!]).toBe(true);
    expect(wire[FuseV1Options['OnlyLoadAppFromAsar']!]).toBe(true);
    expect(wire[FuseV1Options['EnableCookieEncryption']!]).toBe(true);
    // With RunAsNode off nothing may rely on ELECTRON_RUN_AS_NODE: the shell uses utilityProcess.
    const shell = ['electron/main.ts', 'electron/shell/utility-spawn.ts'].filter((f) => existsSync(join(projectRoot, f)));
    for (const file of shell) expect(readFileSync(join(projectRoot, file), 'utf8'), file).not.toMatch(/ELECTRON_RUN_AS_NODE['"]?\]?\s*=\s*['"]1/);
  });

  it('Windows: a per-user NSIS installer that never asks for administrator rights', () => {
    const nsis = config['nsis'] as Record<string, unknown>;
    expect(config['win'].target).toEqual(['nsis']);
    expect(nsis['oneClick']).toBe(true);
    expect(nsis['perMachine']).toBe(false);
    expect(nsis['allowElevation']).toBe(false);
    expect(config['win'].requestedExecutionLevel).toBe('asInvoker');
  });

  it('macOS: a dmg, no LSUIElement (the shell shows the Dock icon only while the window is open)', () => {
    expect(config['mac'].target).toEqual(['dmg']);
    expect(config['mac'].extendInfo?.LSUIElement).toBeUndefined();
    const main = join(projectRoot, 'electron', 'main.ts');
    if (existsSync(main)) expect(readFileSync(main, 'utf8')).toMatch(/dock\.hide\(\)/);
  });

  it('Linux: AppImage and deb', () => {
    expect(config['linux'].target).toEqual(['AppImage', 'deb']);
  });

  it('`npm run dist` builds for the host only: no target forces an architecture', () => {
    for (const platform of ['linux', 'win', 'mac']) {
      for (const target of config[platform].target as unknown[]) expect(typeof target, `${platform}: ${JSON.stringify(target)}`).toBe('string');
    }
  });

  it('the beforePack hook is scripts/before-pack.mjs', async () => {
    expect(config['beforePack']).toBe('./scripts/before-pack.mjs');
    const hook = await import(pathToFileURL(join(projectRoot, config['beforePack'])).href);
    expect(hook.default).toBe(beforePack);
  });
});

describe('the release workflow', () => {
  const RUNNERS: Record<string, string> = {
    'ubuntu-24.04': 'linux-x64',
    'ubuntu-24.04-arm': 'linux-arm64',
    'windows-2022': 'win32-x64',
    'macos-15-intel': 'darwin-x64',
    'macos-15': 'darwin-arm64',
  };
  const jobs = workflow.jobs.package.strategy.matrix.include as Array<{ target: string; runner: string; builder: string }>;

  it('runs on a tag push, one job per target on a runner of that system and CPU', () => {
    expect(workflow.on.push.tags).toEqual(['v*']);
    expect(jobs.map((j) => j.target).sort()).toEqual([...TARGETS].sort());
    for (const job of jobs) {
      expect(RUNNERS[job.runner], `${job.target} on ${job.runner}`).toBe(job.target);
      const [platform, arch] = job.target.split('-');
      const flag = { linux: '--linux AppImage deb', win32: '--win nsis', darwin: '--mac dmg' }[platform!];
      expect(job.builder).toBe(`${flag} --${arch}`);
    }
  });

  it('builds and checks the helper on each runner, runs the packaging tests, then packages and uploads', () => {
    const steps = workflow.jobs.package.steps as Array<{ name?: string; run?: string; uses?: string; with?: Record<string, string> }>;
    const runs = steps.map((s) => s.run ?? '').join('\n');
    expect(runs).toContain('npm ci');
    expect(runs).toContain('npm run build');
    expect(runs).toContain('node scripts/check-native.mjs');
    expect(runs).toMatch(/vitest run test\/unit\/packaging\.test\.ts/);
    expect(runs).toContain('electron-builder --config electron-builder.yml --publish never ${{ matrix.builder }}');
    const upload = steps.find((s) => s.uses?.startsWith('actions/upload-artifact'));
    expect(upload?.with?.['path']).toContain(`${config['directories'].output}/*.dmg`);
    expect(workflow.jobs.release.if).toContain("startsWith(github.ref, 'refs/tags/v')");
  });

  it('the Windows helper exports the CI expects (GS_API of gpushare.h and jobs-win32.h = .ci/run list)', () => {
    const headers = ['gpushare.h', 'jobs-win32.h'].map((name) => readFileSync(join(projectRoot, 'native', name), 'utf8'));
    const ci = readFileSync(join(projectRoot, '.ci', 'run'), 'utf8');
    const expected = ci.match(/expected="([^"]*)"/)?.[1]?.trim().split(' ') ?? [];
    expect(headers.flatMap(declaredExports).sort()).toEqual(expected.sort());
  });
});

describe("the README's install section matches the configuration", () => {
  const install = section(readme, '## Install');
  // The AppInfo fields electron-builder's artifact names and install folder are made of.
  const appInfo = {
    name: pkg.name,
    sanitizedName: sanitizeFileName(pkg.name),
    version: '<version>',
    productName: config['productName'],
    sanitizedProductName: sanitizeFileName(config['productName']),
    productFilename: sanitizeFileName(config['productName']),
  };
  /** The artifact file name electron-builder gives a target (its artifactName pattern). */
  const artifact = (options: string, ext: string, arch: string) =>
    expandMacro(config[options].artifactName as string, getArtifactArchName(archFromString(arch), ext), appInfo, { ext });

  it('names every package the release workflow builds', () => {
    const names: string[] = [];
    for (const target of TARGETS) {
      const [platform, arch] = target.split('-') as [string, string];
      if (platform === 'linux') names.push(artifact('appImage', 'AppImage', arch), artifact('deb', 'deb', arch));
      if (platform === 'win32') names.push(artifact('nsis', 'exe', arch));
      if (platform === 'darwin') names.push(artifact('dmg', 'dmg', arch));
    }
    expect(names).toContain('gpu-share-<version>-x86_64.AppImage');
    expect(names).toContain('gpu-share_<version>_amd64.deb');
    for (const name of names) expect(install, name).toContain(name);
  });

  it('Windows: per-user, where electron-builder installs it, no administrator rights', () => {
    const nsis = config['nsis'];
    const dir = getWindowsInstallationDirName(appInfo, !nsis.oneClick || nsis.perMachine);
    const windows = section(install, '### Windows (x64)');
    expect(windows).toContain(`%LOCALAPPDATA%\\Programs\\${dir}`);
    expect(windows).toMatch(/current user only/);
    expect(windows).toMatch(/without administrator rights/);
  });

  it('Linux: where the deb installs, its command, its package name', () => {
    const linux = section(install, '### Linux (x64 and arm64)');
    expect(linux).toContain(`/opt/${config['productName']}/`);
    expect(linux).toContain(`\`${config['linux'].executableName}\``);
    expect(linux).toContain(`sudo apt remove ${pkg.name}`);
  });

  it('macOS: both CPUs, the Dock behaviour, and how to open an app that is not notarized', () => {
    const mac = section(install, '### macOS (Apple silicon and Intel)');
    expect(mac).toMatch(/Dock icon\s+only while its window is open/);
    if (config['mac'].notarize === false) expect(mac).toMatch(/not\s+notarized/);
    if (config['mac'].identity === '-') expect(mac).toMatch(/ad-hoc signature/);
    expect(mac).toContain(`/Applications/${config['productName']}.app`);
  });

  it('says how to build a package, and where it lands', () => {
    const build = section(readme, '## Build a package');
    expect(build).toContain('npm run dist');
    expect(build).toContain(`${config['directories'].output}/`);
    expect(build).toContain('scripts/before-pack.mjs');
  });
});

describe('beforePack: the target\'s native parts', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'gpu-share-before-pack-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
  const HOST = `${process.platform}-${process.arch}`;

  it('this checkout has everything for its own system', () => {
    expect(nativePartProblems(projectRoot, process.platform, process.arch)).toEqual([]);
  });

  it('names what is missing, and a helper built for another CPU', () => {
    expect(nativePartProblems(scratch, 'darwin', 'arm64')).toEqual([
      expect.stringContaining('build/native/darwin-arm64/libgpushare.dylib is missing'),
      expect.stringContaining('build/native/darwin-arm64/gpushare-watchdog is missing'),
      expect.stringContaining('build/native/darwin-arm64/gpushare-vulkan-devices is missing'),
      expect.stringContaining("koffi's binary for darwin-arm64"),
      expect.stringContaining("node-llama-cpp's binaries for darwin-arm64"),
    ]);
    // This machine's helper, copied where another CPU's should be.
    const platform = process.platform as 'linux' | 'win32' | 'darwin';
    const other = process.arch === 'x64' ? 'arm64' : 'x64';
    const dir = join(scratch, 'build', 'native', `${platform}-${other}`);
    mkdirSync(dir, { recursive: true });
    for (const file of HELPER_FILES[platform]) copyFileSync(join(projectRoot, 'build', 'native', HOST, file), join(dir, file));
    const problems = nativePartProblems(scratch, platform, other);
    expect(problems.filter((p) => p.includes(`is built for ${HOST}, not ${platform}-${other}`))).toHaveLength(3);
  });

  it('the hook refuses to pack with the list of problems', async () => {
    // Arch enum of builder-util: 1 = x64, 3 = arm64. Darwin parts are never built on this machine
    // unless it is a Mac; Windows arm64 is never packaged and never built.
    await expect(beforePack({ electronPlatformName: 'win32', arch: 3 })).rejects.toThrow(/cannot package GPU Share for win32-arm64:[\s\S]*gpushare\.dll is missing/);
  });
});

describe('native binary headers', () => {
  const header = (bytes: number[], length = 64) => {
    const b = Buffer.alloc(length);
    Buffer.from(bytes).copy(b);
    return b;
  };

  it('tells ELF, PE and Mach-O (thin and universal) apart, with their CPU', () => {
    const elf = header([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]);
    elf.writeUInt16LE(0xb7, 18);
    expect(describeBinary(elf)).toEqual({ platform: 'linux', arches: ['arm64'] });
    const pe = header([0x4d, 0x5a], 256);
    pe.writeUInt32LE(0x80, 0x3c);
    pe.writeUInt32BE(0x50450000, 0x80);
    pe.writeUInt16LE(0x8664, 0x84);
    expect(describeBinary(pe)).toEqual({ platform: 'win32', arches: ['x64'] });
    const macho = header([]);
    macho.writeUInt32LE(0xfeedfacf, 0);
    macho.writeUInt32LE(0x0100000c, 4);
    expect(describeBinary(macho)).toEqual({ platform: 'darwin', arches: ['arm64'] });
    const fat = header([]);
    fat.writeUInt32BE(0xcafebabe, 0);
    fat.writeUInt32BE(2, 4);
    fat.writeUInt32BE(0x01000007, 8);
    fat.writeUInt32BE(0x0100000c, 28);
    expect(describeBinary(fat)).toEqual({ platform: 'darwin', arches: ['x64', 'arm64'] });
    const javaClass = header([0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 0x34]);
    expect(describeBinary(javaClass)).toBeNull();
    expect(describeBinary(Buffer.from('#!/bin/sh\necho not native\n'))).toBeNull();
  });

  it('reads the helper built here as this machine\'s', () => {
    const platform = process.platform as 'linux' | 'win32' | 'darwin';
    const kind = describeBinaryFile(join(projectRoot, 'build', 'native', `${platform}-${process.arch}`, HELPER_FILES[platform][0]!));
    expect(kind).toEqual({ platform, arches: [process.arch] });
    const scratch = mkdtempSync(join(tmpdir(), 'gpu-share-header-'));
    writeFileSync(join(scratch, 'short'), 'x');
    expect(describeBinaryFile(join(scratch, 'short'))).toBeNull();
    rmSync(scratch, { recursive: true, force: true });
  });
});
