#!/usr/bin/env node
// Builds the registry helper (gpushare.c), the watchdog (watchdog.c) and the Vulkan device lister
// (vulkan-devices.c) into build/native/<platform>-<arch>/ with the platform's
// C compiler. `--target win32-x64` cross-builds the Windows DLL with mingw-w64 (to prove it
// compiles on a Linux machine); on a Mac, `--target darwin-x64` / `darwin-arm64` builds either
// architecture. CC overrides the compiler.
import { spawnSync } from 'node:child_process';
import { mkdirSync, existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');

/** The native files' names per platform: one list for this build, packaging and the loaders. */
const FILES = JSON.parse(readFileSync(join(here, 'files.json'), 'utf8'));

function parseTarget(argv) {
  const i = argv.indexOf('--target');
  if (i === -1) return `${process.platform}-${process.arch}`;
  const target = argv[i + 1];
  if (!target || !/^(linux|darwin|win32)-(x64|arm64)$/.test(target)) {
    console.error(`build: --target must be <linux|darwin|win32>-<x64|arm64>, got ${JSON.stringify(target)}`);
    process.exit(2);
  }
  return target;
}

function compilerFor(target) {
  if (process.env.CC) return { cc: process.env.CC, msvc: /(^|[\\/])cl(\.exe)?$/i.test(process.env.CC) };
  const host = `${process.platform}-${process.arch}`;
  if (target === host) {
    if (process.platform === 'win32') return { cc: hasCommand('cl') ? 'cl' : 'gcc', msvc: hasCommand('cl') };
    return { cc: 'cc', msvc: false };
  }
  if (target === 'win32-x64') return { cc: 'x86_64-w64-mingw32-gcc', msvc: false };
  if (target === 'linux-arm64') return { cc: 'aarch64-linux-gnu-gcc', msvc: false };
  // Apple's clang builds either Mac architecture (-arch, below) on either kind of Mac.
  if (target.startsWith('darwin-') && process.platform === 'darwin') return { cc: 'cc', msvc: false };
  console.error(`build: no cross compiler known for ${target} on ${host}; set CC`);
  process.exit(2);
}

function hasCommand(cmd) {
  const probe = process.platform === 'win32' ? spawnSync('where', [cmd]) : spawnSync('sh', ['-c', `command -v ${cmd}`]);
  return probe.status === 0;
}

const target = parseTarget(process.argv.slice(2));
const [platform, arch] = target.split('-');
const outDir = join(root, 'build', 'native', target);
const out = join(outDir, FILES[platform].library);
const src = join(here, 'gpushare.c');
mkdirSync(outDir, { recursive: true });

const { cc, msvc } = compilerFor(target);
const exe = platform === 'win32' ? '.exe' : '';

/** One compiler run; exits the script with a clear message when it fails. */
function compile(sources, out, shared, libs = []) {
  let args;
  if (msvc) {
    args = ['/nologo', '/O2', '/W4', '/WX', shared ? '/LD' : '', ...sources, `/Fe:${out}`, `/Fo:${outDir}\\`].filter(Boolean);
  } else {
    args = ['-std=c11', '-O2', '-Wall', '-Wextra', '-Werror', '-o', out, ...sources];
    if (shared) args.unshift('-shared', '-fvisibility=hidden');
    // advapi32: the owner check of an existing section (GetSecurityInfo, the process token).
    if (platform === 'win32') args.push('-static-libgcc', '-ladvapi32');
    else if (shared) args.unshift('-fPIC');
    args.push(...libs);
    if (platform === 'darwin') {
      args.push('-arch', arch === 'arm64' ? 'arm64' : 'x86_64');
      if (shared) args.push('-install_name', `@rpath/${FILES.darwin.library}`);
    }
  }
  const result = spawnSync(cc, args, { stdio: 'inherit' });
  if (result.error) {
    console.error(`build: could not run the C compiler '${cc}': ${result.error.message}` +
      (platform === 'win32' && process.platform !== 'win32' ? ' (install mingw-w64: apt-get install gcc-mingw-w64-x86-64-posix)' : ' (install a C compiler, e.g. apt-get install gcc)'));
    process.exit(1);
  }
  if (result.status !== 0 || !existsSync(out)) {
    console.error(`build: ${cc} failed on ${sources.join(' ')} for ${target} (exit ${result.status})`);
    process.exit(1);
  }
  console.log(`build: ${target} -> ${out}`);
}

// The registry helper (loaded with koffi; on Windows with the job objects that hold a paced
// command's process tree) and the watchdog that ends paced trees when their supervisor dies.
compile(platform === 'win32' ? [src, join(here, 'jobs-win32.c')] : [src], out, true);
compile([join(here, 'watchdog.c')], join(outDir, FILES[platform].watchdog), false);
// The Vulkan device lister, run as its own process (a bad driver cannot take the app down).
// dlopen is in libdl on glibc before 2.34.
compile([join(here, 'vulkan-devices.c')], join(outDir, FILES[platform].vulkanDevices), false, platform === 'linux' && !msvc ? ['-ldl'] : []);
