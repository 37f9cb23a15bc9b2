#!/usr/bin/env node
// Builds only what changed since the last build, for `npm run serve` and `npm start` (`npm run
// build` and `npm test` still build everything):
// - the native helper, when a file it is compiled from is newer than one of its outputs;
// - the TypeScript through tsc's incremental mode (its state in dist/, so a removed dist/ starts
//   afresh), which rewrites only the outputs of changed sources;
// - the dashboard (vite), when a file it is built from — renderer/, or the core's modules it
//   imports (electron/core/), or the package's versions — is newer than dist/renderer/index.html.
// `--dry-run` prints what it would build and builds nothing.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, utimesSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dryRun = process.argv.includes('--dry-run');
const unknown = process.argv.slice(2).filter((a) => a !== '--dry-run');
if (unknown.length > 0) {
  console.error(`build-changed: unknown argument ${JSON.stringify(unknown[0])} (usage: node scripts/build-changed.mjs [--dry-run])`);
  process.exit(2);
}

/** The newest modification time (ms) among files under `paths` (files or folders), skipping
 *  node_modules and tests, which the builds do not read; 0 when there are none. */
function newestMtime(paths, skip = (name) => name === 'node_modules' || name.endsWith('.test.ts') || name === 'e2e') {
  let newest = 0;
  const visit = (path) => {
    let stat;
    try {
      stat = statSync(path);
    } catch {
      return;
    }
    if (stat.isDirectory()) {
      for (const name of readdirSync(path)) if (!skip(name)) visit(join(path, name));
    } else if (stat.isFile()) {
      newest = Math.max(newest, stat.mtimeMs);
    }
  };
  for (const path of paths) visit(path);
  return newest;
}

/** The oldest modification time among `files`; 0 (stale) when one is missing. */
function oldestOutput(files) {
  let oldest = Infinity;
  for (const file of files) {
    if (!existsSync(file)) return 0;
    oldest = Math.min(oldest, statSync(file).mtimeMs);
  }
  return oldest === Infinity ? 0 : oldest;
}

function run(what, command, args) {
  if (dryRun) {
    console.log(`build-changed: would build ${what}`);
    return;
  }
  const started = performance.now();
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (result.status !== 0) {
    console.error(`build-changed: building ${what} failed (exit ${result.status ?? result.signal})`);
    process.exit(1);
  }
  console.log(`build-changed: ${what} built in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';
const packageFiles = [join(root, 'package.json'), join(root, 'package-lock.json')];

// The native helper.
const native = JSON.parse(readFileSync(join(root, 'native', 'files.json'), 'utf8'))[process.platform];
const nativeDir = join(root, 'build', 'native', `${process.platform}-${process.arch}`);
const nativeOutputs = native === undefined ? [] : Object.values(native).map((name) => join(nativeDir, name));
const nativeSources = readdirSync(join(root, 'native')).filter((name) => /\.(c|h|mjs|json)$/.test(name)).map((name) => join(root, 'native', name));
if (nativeOutputs.length === 0 || newestMtime(nativeSources) > oldestOutput(nativeOutputs)) run('the native helper', process.execPath, [join(root, 'native', 'build.mjs')]);
else console.log('build-changed: the native helper is up to date');

// The TypeScript: tsc keeps what it needs to know in dist/, and writes only what changed; when no
// file it compiles is newer than that state, it is not even started (~2 s of loading saved).
const tsState = join(root, 'dist', 'tsconfig.build.tsbuildinfo');
const tsSources = [join(root, 'electron'), join(root, 'native'), join(root, 'test', 'bench'), join(root, 'test', 'fixtures'), join(root, 'tsconfig.json'), join(root, 'tsconfig.build.json'), ...packageFiles];
if (newestMtime(tsSources) > oldestOutput([tsState])) {
  run('the TypeScript (incremental)', npx, ['tsc', '-p', 'tsconfig.build.json', '--incremental', '--tsBuildInfoFile', join('dist', 'tsconfig.build.tsbuildinfo')]);
  // tsc leaves its state as it was when no file's content changed (a file only touched): mark it
  // current, or every later start would run tsc again.
  if (!dryRun && existsSync(tsState)) utimesSync(tsState, new Date(), new Date());
} else console.log('build-changed: the TypeScript is up to date');

// The dashboard.
const dashboard = join(root, 'dist', 'renderer', 'index.html');
const dashboardSources = [join(root, 'renderer'), join(root, 'electron', 'core'), ...packageFiles];
if (newestMtime(dashboardSources) > oldestOutput([dashboard])) run('the dashboard', npx, ['vite', 'build', '--config', 'renderer/vite.config.ts']);
else console.log('build-changed: the dashboard is up to date');
