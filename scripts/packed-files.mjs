#!/usr/bin/env node
// What electron-builder would put into the package for one target, computed without Electron and
// without packing anything: electron-builder.yml's files / asarUnpack / extraResources rules are
// applied to this checkout by electron-builder's own code (its file matchers, its production
// dependency collector, its node_modules walker and its asar unpack rules), with the ${os} and
// ${arch} macros of the target. Used by test/unit/packaging.test.ts; run it to see the figures:
//
//   node scripts/packed-files.mjs                 # every target: files and sizes
//   node scripts/packed-files.mjs linux-x64 --list  # one target, every file
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const yaml = require('js-yaml');
const { Arch, walk } = require('builder-util');
const { Platform } = require('app-builder-lib/out/core');
const { expandMacro } = require('app-builder-lib/out/util/macroExpander');
const { getMainFileMatchers, getNodeModuleFileMatcher, getFileMatchers } = require('app-builder-lib/out/fileMatcher');
const { computeFileSets, computeNodeModuleFileSets, getDestinationPath } = require('app-builder-lib/out/util/appFileCopier');
const { detectUnpackedDirs } = require('app-builder-lib/out/asar/unpackDetector');
const { determinePackageManagerEnv } = require('app-builder-lib/out/node-module-collector');
const { TmpDir } = require('temp-file');

export const projectRoot = fileURLToPath(new URL('..', import.meta.url)).replace(/[\\/]$/, '');

/** The targets GPU Share is packaged for. */
export const TARGETS = ['linux-x64', 'linux-arm64', 'win32-x64', 'darwin-x64', 'darwin-arm64'];

const PLATFORMS = { linux: Platform.LINUX, win32: Platform.WINDOWS, darwin: Platform.MAC };

/** A YAML file parsed with the parser electron-builder uses (js-yaml). */
export function readYaml(path) {
  return yaml.load(readFileSync(path, 'utf8'));
}

/** electron-builder.yml, parsed as electron-builder parses it. */
export function loadBuilderConfig(projectDir = projectRoot) {
  return readYaml(join(projectDir, 'electron-builder.yml'));
}

/** What electron-builder's PlatformPackager knows about a target that the file rules depend on. */
function targetContext(target, projectDir, config) {
  const [platformName, archName] = target.split('-');
  const platform = PLATFORMS[platformName];
  if (platform === undefined || Arch[archName] === undefined) throw new Error(`unknown target ${target}`);
  const packageJson = JSON.parse(readFileSync(join(projectDir, 'package.json'), 'utf8'));
  const platformOptions = config[platform.buildConfigurationKey] ?? {};
  const appInfo = {
    name: packageJson.name,
    version: packageJson.version,
    productName: config.productName,
    sanitizedProductName: config.productName,
    productFilename: config.productName,
  };
  // As PlatformPackager.createGetFileMatchersOptions expands patterns for a target.
  const macroExpander = (pattern) => expandMacro(pattern, archName, appInfo, { os: platform.buildConfigurationKey, '/*': '{,/**/*}' });
  // A stand-in for the unpacked app's resources folder: only its paths are used, nothing is written.
  const resourcesDir = join(tmpdir(), 'gpu-share-packed-files', target, 'resources');
  const outDir = resolve(projectDir, config.directories?.output ?? 'dist');
  const options = { macroExpander, customBuildOptions: platformOptions, globalOutDir: outDir, defaultSrc: projectDir };
  return { platform, platformOptions, packageJson, macroExpander, resourcesDir, options };
}

/**
 * The extraResources rules for `target` as electron-builder expands them: the source folder
 * (relative to the project), the destination (relative to the resources folder) and the filter.
 */
export function extraResourceRules(target, { projectDir = projectRoot, config = loadBuilderConfig(projectDir) } = {}) {
  const { resourcesDir, options } = targetContext(target, projectDir, config);
  return (getFileMatchers(config, 'extraResources', resourcesDir, options) ?? []).map((m) => ({
    from: toPosix(relative(projectDir, m.from)),
    to: toPosix(relative(resourcesDir, m.to)),
    filter: [...m.patterns],
  }));
}

/**
 * Every file of the package for `target` (e.g. 'linux-x64'), with where it ends up relative to
 * the app's resources folder: `app.asar/<path>` (inside the archive), `app.asar.unpacked/<path>`
 * (beside it, for native code) or an extra resource such as `native/linux-x64/libgpushare.so`.
 * @returns {Promise<{ target: string, files: Array<{ source: string, dest: string, where: 'asar' | 'unpacked' | 'resources', size: number }>, nodeModules: { considered: number, packed: number } }>}
 */
export async function packedFiles(target, { projectDir = projectRoot, config = loadBuilderConfig(projectDir) } = {}) {
  const { platform, platformOptions, packageJson, macroExpander, resourcesDir, options } = targetContext(target, projectDir, config);
  const tempDirManager = new TmpDir('gpu-share-packed-files');
  const pmEnv = await determinePackageManagerEnv({ projectDir, appDir: projectDir, workspaceRoot: undefined }).value;
  const workspaceRoot = (await pmEnv.workspaceRoot) || projectDir;
  const info = {
    projectDir,
    appDir: projectDir,
    buildResourcesDir: resolve(projectDir, config.directories?.buildResources ?? 'build'),
    config,
    metadata: packageJson,
    originalMetadata: packageJson,
    nodePackageName: packageJson.name,
    appInfo: { type: packageJson.type },
    isPrepackedAppAsar: false,
    areNodeModulesHandledExternally: false,
    debugLogger: { isEnabled: false, add() {} },
    tempDirManager,
    getPackageManager: async () => pmEnv.pm,
    getWorkspaceRoot: async () => workspaceRoot,
  };
  const platformPackager = { info, config, platform, platformSpecificBuildOptions: platformOptions };

  const appDest = join(resourcesDir, 'app');
  const outDir = options.globalOutDir;

  try {
    // Extra resources are excluded from the app itself (PlatformPackager.doPack).
    const extraMatchers = getFileMatchers(config, 'extraResources', resourcesDir, options) ?? [];
    const excludePatterns = [];
    for (const matcher of extraMatchers) matcher.computeParsedPatterns(excludePatterns, projectDir);

    const mainMatchers = getMainFileMatchers(projectDir, appDest, macroExpander, platformOptions, platformPackager, outDir, false);
    if (excludePatterns.length > 0) for (const matcher of mainMatchers) matcher.excludePatterns = excludePatterns;
    const appSets = await computeFileSets(mainMatchers, null, platformPackager, false);
    const moduleMatcher = getNodeModuleFileMatcher(projectDir, appDest, macroExpander, platformOptions, info);
    const moduleSets = await computeNodeModuleFileSets(platformPackager, moduleMatcher);
    const fileSets = [...appSets, ...moduleSets].filter((set) => set.files.length > 0);

    // AsarPackager's rule: a file is unpacked when asarUnpack matches it or when its module holds
    // native code (smartUnpack, on unless asar.smartUnpack is false).
    const unpackMatcher = getFileMatchers(config, 'asarUnpack', appDest, options)?.[0];
    const unpackFilter = unpackMatcher?.createFilter();
    const unpackedDirs = new Set();
    if (config.asar?.smartUnpack !== false) for (const set of fileSets) detectUnpackedDirs(set, unpackedDirs);
    const isUnpacked = (dest, file, stat) => {
      if (unpackFilter?.(file, stat)) return true;
      for (const dir of unpackedDirs) if (dest === dir || dest.startsWith(dir + sep)) return true;
      return false;
    };

    const files = [];
    for (const set of fileSets) {
      for (const file of set.files) {
        const stat = set.metadata.get(file);
        if (stat == null || stat.isDirectory()) continue;
        const dest = relative(appDest, getDestinationPath(file, set));
        const unpacked = config.asar !== false && isUnpacked(dest, file, stat);
        const where = config.asar === false ? 'resources' : unpacked ? 'unpacked' : 'asar';
        const prefix = config.asar === false ? 'app' : unpacked ? 'app.asar.unpacked' : 'app.asar';
        files.push({ source: file, dest: toPosix(join(prefix, dest)), where, size: stat.size });
      }
    }

    // Extra resources, as fileMatcher.copyFiles copies them.
    for (const matcher of extraMatchers) {
      let fromStat;
      try { fromStat = statSync(matcher.from); } catch { continue; } // electron-builder warns and skips
      if (fromStat.isFile()) {
        files.push({ source: matcher.from, dest: toPosix(relative(resourcesDir, matcher.to)), where: 'resources', size: fromStat.size });
        continue;
      }
      if (matcher.isEmpty() || matcher.containsOnlyIgnore()) matcher.prependPattern('**/*');
      const found = await walk(matcher.from, matcher.createFilter());
      for (const file of found) {
        const stat = statSync(file);
        if (!stat.isFile()) continue;
        const dest = join(matcher.to, relative(matcher.from, file));
        files.push({ source: file, dest: toPosix(relative(resourcesDir, dest)), where: 'resources', size: stat.size });
      }
    }

    // How much of the production dependencies' content the rules leave out.
    let considered = 0;
    for (const set of moduleSets) considered += countFiles(set.src);
    const packedModules = files.filter((f) => f.dest.includes('/node_modules/')).length;
    files.sort((a, b) => (a.dest < b.dest ? -1 : a.dest > b.dest ? 1 : 0));
    return { target, files, nodeModules: { considered, packed: packedModules } };
  } finally {
    await tempDirManager.cleanup();
  }
}

function toPosix(p) {
  return p.split(sep).join('/');
}

/** Files under a module folder, its nested node_modules left out (they are modules of their own). */
function countFiles(dir) {
  let n = 0;
  const stack = [dir];
  while (stack.length > 0) {
    const d = stack.pop();
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules') stack.push(join(d, entry.name));
      } else n++;
    }
  }
  return n;
}

function mib(bytes) {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

async function main(argv) {
  const list = argv.includes('--list');
  const targets = argv.filter((a) => !a.startsWith('--'));
  for (const target of targets.length > 0 ? targets : TARGETS) {
    const { files, nodeModules } = await packedFiles(target);
    const by = (where) => files.filter((f) => f.where === where);
    const sum = (fs) => fs.reduce((s, f) => s + f.size, 0);
    console.log(`${target}: ${files.length} files, ${mib(sum(files))} (app.asar ${by('asar').length} files ${mib(sum(by('asar')))}, ` +
      `unpacked ${by('unpacked').length} files ${mib(sum(by('unpacked')))}, resources ${by('resources').length} files ${mib(sum(by('resources')))}); ` +
      `node_modules: ${nodeModules.packed} of ${nodeModules.considered} files packed, ${nodeModules.considered - nodeModules.packed} left out`);
    if (list) for (const f of files) console.log(`  ${f.dest}  ${f.size}`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
