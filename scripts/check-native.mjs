#!/usr/bin/env node
// Checks the registry helper built for this machine (build/native/<platform>-<arch>/): both files
// are there and built for this system and CPU, and the library exports every function gpushare.h
// (and on Windows jobs-win32.h) declares (GS_API), found by loading it the way the app does, with koffi. The release workflow
// runs it on each system before packaging; .ci/run checks the mingw-w64 cross-build with objdump.
import koffi from 'koffi';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HELPER_FILES } from './before-pack.mjs';
import { describeBinaryFile } from './native-binary.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The functions gpushare.h exports, in the order it declares them. */
export function declaredExports(header) {
  return [...header.matchAll(/^GS_API\s+[\w\s*]+?\b(gs_\w+)\s*\(/gm)].map((m) => m[1]);
}

function main() {
  const target = `${process.platform}-${process.arch}`;
  const files = HELPER_FILES[process.platform];
  if (files === undefined) throw new Error(`no helper for ${process.platform}`);
  const dir = join(root, 'build', 'native', target);
  const problems = [];
  for (const file of files) {
    const path = join(dir, file);
    if (!existsSync(path)) {
      problems.push(`${path} is missing (npm run build:native)`);
      continue;
    }
    const kind = describeBinaryFile(path);
    if (kind === null || kind.platform !== process.platform || !kind.arches.includes(process.arch)) {
      problems.push(`${path} is not a ${target} binary (${kind ? `${kind.platform}-${kind.arches.join('+')}` : 'not native code'})`);
    }
  }
  // On Windows the DLL also holds the job objects of paced process trees (jobs-win32.h).
  const headers = process.platform === 'win32' ? ['gpushare.h', 'jobs-win32.h'] : ['gpushare.h'];
  const names = headers.flatMap((name) => declaredExports(readFileSync(join(root, 'native', name), 'utf8')));
  if (names.length === 0) problems.push('native/gpushare.h declares no GS_API function');
  const library = join(dir, files[0]);
  if (problems.length === 0) {
    const lib = koffi.load(library);
    for (const name of names) {
      try {
        lib.func(name, 'void', []);
      } catch {
        problems.push(`${files[0]} does not export ${name}`);
      }
    }
  }
  if (problems.length > 0) {
    console.error(`check-native: ${target}:\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`check-native: ${target}: ${files.join(', ')} built for ${target}; exports ${names.join(' ')}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) main();
