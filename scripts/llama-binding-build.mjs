#!/usr/bin/env node
// `npm run llama-binding:build [-- --remove]`: builds node-llama-cpp's CPU binding on this machine
// from the llama.cpp source it bundles (a git bundle; nothing is downloaded), the way its own
// `node-llama-cpp source download --gpu false` does, and keeps the result in a cache outside the
// clone, keyed by node-llama-cpp's version, the source's commit and the platform:
//   <cache>/node-llama-cpp/<version>-<commit>-<platform>-<arch>/{Release/, buildDone.status}
// <cache> is $GPU_SHARE_CACHE, else $XDG_CACHE_HOME/gpu-share, else ~/.cache/gpu-share. A build
// that is already there is copied into node_modules/node-llama-cpp/llama/localBuilds, where
// node-llama-cpp prefers it to its prebuilt binaries.
//
// Why: the prebuilt CPU binaries start and join their decode threads for every token, so the
// built-in engine decodes with one thread (engines/builtin/defaults.ts). A build made here uses
// OpenMP, whose threads live on, and decodes on every physical core, as llama-server does.
// GPU engines keep node-llama-cpp's prebuilt CUDA or Vulkan binaries.
//
// `--remove` takes the build out of node_modules again (the cache is kept), for side-by-side runs.
// `--optional` is how `npm install` runs it (postinstall): on Linux only (where GCC's OpenMP makes
// the difference; elsewhere the prebuilt binaries stay), never when GPU_SHARE_PREBUILT_BINDING=1,
// and whatever happens it exits 0, saying in one line why the engine keeps the prebuilt binaries.
// Progress goes to stderr; the binding's folder is stdout's last line.
// Exit codes: 0 built, reused or removed (or, with --optional, always); 1 the build failed; 2
// something it needs is missing.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { patchAddon, patchId } from './llama-binding-patch.mjs';
import { bundleCommit, cacheBase, log, Missing, onPath, run } from './llama-server-build.mjs';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
export const NODE_LLAMA_CPP = join(root, 'node_modules', 'node-llama-cpp');
/** node-llama-cpp's folder name for a CPU-only build here (`getBuildFolderNameForBuildOptions`). */
export const folderName = (platform = process.platform, arch = process.arch) => `${platform === 'win32' ? 'win' : platform === 'darwin' ? 'mac' : platform}-${arch}`;
const LOCAL_BUILDS = join(NODE_LLAMA_CPP, 'llama', 'localBuilds');

/** The cache folder of one build: node-llama-cpp's version, llama.cpp's commit, our patch's id. */
export function bindingCacheDir(base, version, commit, folder, patch) {
  return join(base, 'node-llama-cpp', `${version}-${commit.slice(0, 12)}-${patch}-${folder}`);
}

/** What node-llama-cpp needs of a local build to load it: the Release folder and the marker. */
export const KEPT = ['Release', 'buildDone.status'];

function copyBuild(from, to) {
  const partial = `${to}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  for (const entry of KEPT) cpSync(join(from, entry), join(partial, entry), { recursive: true });
  rmSync(to, { recursive: true, force: true });
  renameSync(partial, to);
}

/** Loads node-llama-cpp as the built-in engine does on the CPU and says what it got. */
function loadedBinding() {
  const script = `import('node-llama-cpp').then(async ({ getLlama, LlamaLogLevel }) => {
    const llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, logLevel: LlamaLogLevel.error });
    const oneCallStep = typeof llama._bindings?.AddonContext?.prototype?.gpuShareDecodeStep === 'function';
    console.log(JSON.stringify({ buildType: llama.buildType, systemInfo: llama.systemInfo, oneCallStep }));
    process.exit(0);
  })`;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const line = result.stdout?.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line);
  } catch {
    throw new Error(`node-llama-cpp did not load (exit ${result.status ?? result.signal})`);
  }
}

/** What the engine does without the build, and how to get it later. */
const PREBUILT_NOTE = "the built-in engine keeps node-llama-cpp's prebuilt binaries (one decode thread less than the physical cores); `npm run llama-binding:build` builds the faster one";

/** Why `--optional` does not build here (null: it does). Pure. */
export function optionalSkip(platform, env) {
  if (env.GPU_SHARE_PREBUILT_BINDING === '1') return 'GPU_SHARE_PREBUILT_BINDING=1';
  if (platform !== 'linux') return `only built on install on Linux, this is ${platform}`;
  return null;
}

function parseFlags(argv) {
  const { values } = parseArgs({ args: argv, options: { remove: { type: 'boolean', default: false }, optional: { type: 'boolean', default: false }, help: { type: 'boolean', default: false } } });
  if (values.optional && values.remove) throw new Error('--optional and --remove: one or the other');
  return values;
}

function main(values) {
  if (values.help) {
    console.log('usage: llama-binding-build [--remove | --optional]');
    return 0;
  }
  if (values.optional) {
    const skip = optionalSkip(process.platform, process.env);
    if (skip !== null) {
      log(`llama-binding:build: skipped (${skip}); ${PREBUILT_NOTE}`);
      return 0;
    }
  }
  if (!existsSync(join(NODE_LLAMA_CPP, 'package.json'))) throw new Missing(`node-llama-cpp is not installed (${NODE_LLAMA_CPP}): npm install`);
  const folder = folderName();
  const target = join(LOCAL_BUILDS, folder);
  if (values.remove) {
    rmSync(target, { recursive: true, force: true });
    log(`removed ${target}: node-llama-cpp's prebuilt binaries are used again`);
    return 0;
  }
  const version = JSON.parse(readFileSync(join(NODE_LLAMA_CPP, 'package.json'), 'utf8')).version;
  const commit = bundleCommit();
  const patch = patchId();
  const cached = bindingCacheDir(cacheBase(), version, commit, folder, patch);
  if (existsSync(join(cached, 'buildDone.status'))) {
    log(`node-llama-cpp ${version} binding (llama.cpp ${commit.slice(0, 12)}, ${folder}): already built, copied from ${cached}`);
  } else {
    // bundleCommit has checked git.
    for (const tool of ['cmake', 'c++', 'cc']) if (onPath(tool) === null) throw new Missing(`${tool} is not installed (the binding needs CMake, a C/C++ compiler and git)`);
    const started = Date.now();
    log(`building node-llama-cpp ${version}'s CPU binding from llama.cpp ${commit.slice(0, 12)} (its bundle) for this machine, with gpu-share's one-call decode step (${patch}); a few minutes`);
    // Our one change to its addon (scripts/llama-binding-patch.mjs); a source that does not fit fails here.
    patchAddon(join(NODE_LLAMA_CPP, 'llama', 'addon'));
    // node-llama-cpp's own build: its CMake options, OpenMP where the compiler has it, this CPU's
    // instructions. Its output (CMake's progress) goes to our stderr.
    run(process.execPath, [join(NODE_LLAMA_CPP, 'dist', 'cli', 'cli.js'), 'source', 'download', '--gpu', 'false', '--noUsageExample'], { cwd: root, stdio: ['ignore', 2, 'inherit'] });
    if (!existsSync(join(target, 'buildDone.status'))) throw new Error(`the build left no ${join(target, 'buildDone.status')}`);
    copyBuild(target, cached);
    // The source stays behind in node_modules otherwise (~200 MB); CMake's files go with the copy below.
    rmSync(join(NODE_LLAMA_CPP, 'llama', 'llama.cpp'), { recursive: true, force: true });
    log(`built in ${Math.round((Date.now() - started) / 1000)} s, kept in ${cached}`);
  }
  // Both ways, node_modules holds exactly what node-llama-cpp loads (KEPT).
  copyBuild(cached, target);
  const loaded = loadedBinding();
  if (loaded.buildType !== 'localBuild') throw new Error(`node-llama-cpp loaded its ${loaded.buildType} binary, not the build in ${target}`);
  if (!loaded.oneCallStep) throw new Error(`the build in ${target} has no gpuShareDecodeStep (the patch did not take)`);
  log(`node-llama-cpp loads it: ${/OPENMP = 1/.test(loaded.systemInfo) ? 'OpenMP (the built-in engine decodes on every physical core)' : 'no OpenMP (the built-in engine keeps a core free)'}`);
  console.log(target);
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const firstLine = (error) => (error instanceof Error ? error.message : String(error)).split('\n')[0];
  // Null until the command line is parsed: an error before that is a bad command line.
  let values = null;
  try {
    values = parseFlags(process.argv.slice(2));
    process.exitCode = main(values);
  } catch (error) {
    if (values === null) {
      // A bad command line, --optional or not.
      log(`llama-binding:build: ${firstLine(error)}`);
      process.exitCode = 2;
    } else if (values.optional) {
      // npm install goes on: the engine runs on the prebuilt binaries.
      log(`llama-binding:build: ${error instanceof Missing ? 'not built' : 'the build failed'} (${firstLine(error)}); ${PREBUILT_NOTE}`);
      process.exitCode = 0;
    } else if (error instanceof Missing) {
      log(`llama-binding:build: ${firstLine(error)}`);
      process.exitCode = 2;
    } else {
      log(`llama-binding:build failed: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 1;
    }
  }
}
