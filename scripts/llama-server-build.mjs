#!/usr/bin/env node
// `npm run llama-server:build [-- --cuda] [-- --source TARBALL]`: builds llama.cpp's `llama-server`
// from the llama.cpp source that the installed node-llama-cpp bundles (a git bundle), or from a
// `git archive` tarball of it (xz), into a cache outside the clone, keyed by the source's commit:
//   <cache>/llama-server/<commit>/llama-server              (CPU)
//   <cache>/llama-server/<commit>-cuda-<archs>/llama-server (--cuda, for the GPUs present)
// <cache> is $GPU_SHARE_CACHE, else $XDG_CACHE_HOME/gpu-share, else ~/.cache/gpu-share. A build
// that is already there is reused. Progress goes to stderr; the binary's path is stdout's last line.
// Nothing is downloaded: the web UI, curl, OpenSSL and CMake's FetchContent are all off.
// Plain Node and no node_modules: it runs where only Node, a compiler and CMake are installed.
// Exit codes: 0 built or reused, 1 the build failed, 2 something it needs is missing (one line).
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { availableParallelism, homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
export const BUNDLE = join(root, 'node_modules', 'node-llama-cpp', 'llama', 'gitRelease.bundle');

/** Where slow builds live: outside the clone, shared by every checkout on the machine. */
export function cacheBase(env = process.env) {
  if (env.GPU_SHARE_CACHE) return env.GPU_SHARE_CACHE;
  return join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'gpu-share');
}

/** Where built llama-servers live. */
export function cacheRoot(env = process.env) {
  return join(cacheBase(env), 'llama-server');
}

/** The cache folder of one build: the commit, and for CUDA the architectures it was built for. */
export function variantName(commit, cudaArchs) {
  return cudaArchs === null ? commit : `${commit}-cuda-${cudaArchs.join('-')}`;
}

/** `nvidia-smi --query-gpu=compute_cap --format=csv,noheader` ("9.0\n8.6\n") → ['86', '90']:
 *  CMAKE_CUDA_ARCHITECTURES for the GPUs present, each once. Lines that are not a capability are
 *  an error (a driver message in place of figures must not build for a wrong target). */
export function cudaArchsFromComputeCaps(text) {
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  if (lines.length === 0) throw new Error('nvidia-smi listed no GPU');
  const archs = new Set();
  for (const line of lines) {
    const m = /^(\d+)\.(\d+)$/.exec(line);
    if (m === null) throw new Error(`nvidia-smi printed ${JSON.stringify(line)} where a compute capability (such as 9.0) belongs`);
    archs.add(`${m[1]}${m[2]}`);
  }
  return [...archs].sort((a, b) => Number(a) - Number(b));
}

/** The commit a `git archive` tarball was made from: its pax global header's `comment=` record
 *  (the first 512-byte block is the header, the next holds its records); null when there is none. */
export function commitOfTarHeader(head) {
  const text = Buffer.from(head).subarray(0, 1024).toString('latin1');
  if (!text.startsWith('pax_global_header')) return null;
  const m = /\d+ comment=([0-9a-f]{40})\n/.exec(text.slice(512));
  return m === null ? null : m[1];
}

/** CMake's flags: only what llama-server needs, nothing fetched, static so the binary moves alone. */
export function cmakeFlags(cudaArchs, nvcc) {
  const flags = [
    '-DCMAKE_BUILD_TYPE=Release',
    '-DLLAMA_CURL=OFF',
    '-DLLAMA_BUILD_UI=OFF',
    '-DLLAMA_USE_PREBUILT_UI=OFF',
    '-DLLAMA_OPENSSL=OFF',
    '-DLLAMA_BUILD_TESTS=OFF',
    '-DLLAMA_BUILD_EXAMPLES=OFF',
    '-DBUILD_SHARED_LIBS=OFF',
    '-DFETCHCONTENT_FULLY_DISCONNECTED=ON',
  ];
  if (cudaArchs !== null) flags.push('-DGGML_CUDA=ON', `-DCMAKE_CUDA_ARCHITECTURES=${cudaArchs.join(';')}`, '-DGGML_CUDA_NCCL=OFF', `-DCMAKE_CUDA_COMPILER=${nvcc}`, `-DCUDAToolkit_ROOT=${dirname(dirname(nvcc))}`);
  return flags;
}

const USAGE = 'usage: llama-server-build [--cuda] [--cuda-arch 90[,89…]] [--source llama.cpp.tar.xz] [--jobs N] | --pack-source OUT.tar.xz';

/** What `--pack-source` leaves out of the tarball: nothing the llama-server build reads (models'
 *  vocabularies, docs, tests and examples, which are off, the web UI's own tests). */
export const PACK_EXCLUDES = ['models', 'docs', 'media', 'benches', 'tests', 'examples', 'pocs', 'gguf-py', 'conversion', 'tools/ui/tests', '.github'];

/** Something the build needs is missing: one line, exit code 2. */
export class Missing extends Error {}

export function log(text) {
  process.stderr.write(`${text}\n`);
}

export function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'], ...options });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.slice(0, 3).join(' ')}… exited with ${result.status ?? result.signal}`);
  return result;
}

function capture(command, args, env = process.env) {
  const result = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env });
  return result.error || result.status !== 0 ? null : result.stdout;
}

export const onPath = (name, env = process.env) => capture('sh', ['-c', `command -v ${name}`], env)?.trim() || null;

/** nvcc inside a toolkit first: CMake finds cuBLAS and the runtime from nvcc's folder, and an nvcc
 *  on PATH may be a wrapper script elsewhere. */
export function findNvcc(env = process.env, standard = ['/usr/local/cuda/bin/nvcc']) {
  const candidates = [env.CUDA_HOME && join(env.CUDA_HOME, 'bin', 'nvcc'), ...standard, onPath('nvcc', env)].filter(Boolean);
  return candidates.find((c) => existsSync(c)) ?? null;
}

/** The llama.cpp commit node-llama-cpp's git bundle holds (`how` says how to get the bundle). */
export function bundleCommit(how = 'npm install') {
  if (!existsSync(BUNDLE)) throw new Missing(`no llama.cpp source: ${BUNDLE} is missing (${how})`);
  if (onPath('git') === null) throw new Missing('git is not installed (needed to read the llama.cpp bundle)');
  const heads = capture('git', ['bundle', 'list-heads', BUNDLE]) ?? '';
  const commit = /^([0-9a-f]{40}) HEAD$/m.exec(heads)?.[1];
  if (commit === undefined) throw new Missing(`${BUNDLE} names no HEAD commit`);
  return commit;
}

/** The source to build and its commit: node-llama-cpp's git bundle, or a git-archive tarball. */
function resolveSource(tarball) {
  if (tarball !== undefined) {
    const file = resolve(tarball);
    if (!existsSync(file)) throw new Missing(`--source: no such file: ${file}`);
    // xz-compressed as made by --pack-source, or a plain .tar where xz is not installed.
    const plain = file.endsWith('.tar');
    if (!plain && onPath('xz') === null) throw new Missing('--source: xz is not installed (needed to unpack the tarball; a plain .tar works without it)');
    const head = spawnSync('sh', ['-c', plain ? 'head -c 1024 "$1"' : 'xz -dc "$1" | head -c 1024', 'sh', file], { stdio: ['ignore', 'pipe', 'ignore'] }).stdout;
    const commit = commitOfTarHeader(head);
    if (commit === null) throw new Missing(`--source: ${file} is not a \`git archive\` tarball (no commit in its pax header)`);
    return { commit, unpack: (into) => run('tar', [plain ? '-xf' : '-xJf', file, '-C', into]) };
  }
  const commit = bundleCommit('npm install, or give --source llama.cpp.tar.xz');
  return {
    commit,
    unpack: (into) => {
      run('git', ['clone', '--quiet', '--no-checkout', BUNDLE, into]);
      run('git', ['-C', into, '-c', 'advice.detachedHead=false', 'checkout', '--quiet', commit]);
    },
  };
}

function main() {
  const { values } = parseArgs({ options: { cuda: { type: 'boolean', default: false }, 'cuda-arch': { type: 'string' }, source: { type: 'string' }, jobs: { type: 'string' }, 'pack-source': { type: 'string' }, help: { type: 'boolean', default: false } } });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const jobs = values.jobs === undefined ? availableParallelism() : Number(values.jobs);
  if (!Number.isInteger(jobs) || jobs < 1) throw new Missing(`--jobs: must be a whole number ≥ 1 (got ${values.jobs})`);
  if (values['pack-source'] !== undefined) {
    const source = resolveSource(undefined);
    // A `git archive` of the bundle's commit (its pax header names the commit), xz-compressed.
    const out = resolve(values['pack-source']);
    const tmp = join(cacheRoot(), 'src', `pack-${process.pid}`);
    rmSync(tmp, { recursive: true, force: true });
    try {
      run('git', ['clone', '--quiet', '--bare', BUNDLE, tmp]);
      const spec = ['.', ...PACK_EXCLUDES.map((p) => `:(exclude)${p}`)];
      const script = 'dir=$1; commit=$2; shift 2; set -o pipefail 2>/dev/null; git -C "$dir" archive --format=tar "$commit" -- "$@" | xz -9 -T0 > "$OUT_FILE"';
      run('bash', ['-c', script, 'bash', tmp, source.commit, ...spec], { env: { ...process.env, OUT_FILE: out } });
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
    log(`llama.cpp ${source.commit} packed`);
    console.log(out);
    return 0;
  }
  for (const tool of ['cmake', 'c++', 'cc']) if (onPath(tool) === null) throw new Missing(`${tool} is not installed (llama-server needs CMake and a C/C++ compiler)`);
  let cudaArchs = null;
  let nvcc = null;
  if (values.cuda) {
    nvcc = findNvcc();
    if (nvcc === null) throw new Missing('--cuda: no nvcc (not on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin): install the CUDA toolkit, or build without --cuda');
    if (values['cuda-arch'] !== undefined) {
      cudaArchs = values['cuda-arch'].split(',').map((a) => a.trim());
      if (cudaArchs.some((a) => !/^\d{2,3}[af]?$/.test(a))) throw new Missing(`--cuda-arch: architectures such as 90 or 89,90 (got ${values['cuda-arch']})`);
    } else {
      const caps = capture('nvidia-smi', ['--query-gpu=compute_cap', '--format=csv,noheader']);
      if (caps === null) throw new Missing('--cuda: nvidia-smi found no GPU to build for (give --cuda-arch to build for one anyway)');
      cudaArchs = cudaArchsFromComputeCaps(caps);
    }
  } else if (values['cuda-arch'] !== undefined) throw new Missing('--cuda-arch: only with --cuda');

  const source = resolveSource(values.source);
  const cache = cacheRoot();
  const variant = variantName(source.commit, cudaArchs);
  const binary = join(cache, variant, 'llama-server');
  if (existsSync(binary)) {
    log(`llama-server ${variant}: already built`);
    console.log(binary);
    return 0;
  }
  const started = Date.now();
  const srcDir = join(cache, 'src', source.commit);
  if (!existsSync(srcDir)) {
    log(`unpacking llama.cpp ${source.commit} into ${srcDir}`);
    const partial = `${srcDir}.partial-${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    source.unpack(partial);
    renameSync(partial, srcDir);
  }
  const buildDir = join(cache, 'build', variant);
  const generator = onPath('ninja') !== null && !existsSync(join(buildDir, 'Makefile')) ? ['-G', 'Ninja'] : [];
  log(`building llama-server ${variant} (${cudaArchs === null ? 'CPU' : `CUDA ${cudaArchs.join(', ')}, ${nvcc}`}, ${jobs} jobs) in ${buildDir}`);
  run('cmake', ['-S', srcDir, '-B', buildDir, ...generator, ...cmakeFlags(cudaArchs, nvcc)], { stdio: ['ignore', 'ignore', 'inherit'] });
  run('cmake', ['--build', buildDir, '--target', 'llama-server', '-j', String(jobs)], { stdio: ['ignore', 2, 'inherit'] });
  const built = join(buildDir, 'bin', 'llama-server');
  if (!existsSync(built)) throw new Error(`the build left no ${built}`);
  mkdirSync(dirname(binary), { recursive: true });
  const partial = `${binary}.partial-${process.pid}`;
  copyFileSync(built, partial);
  chmodSync(partial, 0o755);
  renameSync(partial, binary);
  log(`llama-server ${variant} built in ${Math.round((Date.now() - started) / 1000)} s`);
  console.log(binary);
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main();
  } catch (error) {
    // A flag that does not parse (node's ERR_PARSE_ARGS_*) is the caller's to fix, like a missing tool.
    if (error instanceof Missing || String(error?.code).startsWith('ERR_PARSE_ARGS')) {
      log(`llama-server:build: ${error.message.split('\n')[0]}`);
      if (!(error instanceof Missing)) log(USAGE);
      process.exitCode = 2;
    } else {
      log(`llama-server:build failed: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 1;
    }
  }
}
