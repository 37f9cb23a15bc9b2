// electron-builder's beforePack hook (electron-builder.yml): before a target is packed, checks that
// its native parts exist and are built for it — the registry helper, watchdog and Vulkan device lister
// (build/native/<platform>-<arch>/, from `npm run build:native` on that system), koffi's binary
// (@koromix/koffi-<platform>-<arch>) and node-llama-cpp's (@node-llama-cpp/<os>-<arch>…), which npm
// installs only for the system it runs on. Without them the package would build, install, and
// then fail at start; so packaging stops here with the list of what is missing.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeBinaryFile } from './native-binary.mjs';

const projectRoot = fileURLToPath(new URL('..', import.meta.url));

/** The helper's files per platform, [library, watchdog, Vulkan device lister], from
 *  native/files.json: the names native/build.mjs builds and native/paths.ts finds. */
const NATIVE_FILES = JSON.parse(readFileSync(join(projectRoot, 'native', 'files.json'), 'utf8'));
export const HELPER_FILES = Object.fromEntries(Object.entries(NATIVE_FILES).map(([platform, files]) => [platform, [files.library, files.watchdog, files.vulkanDevices]]));

/** electron-builder's ${os} for each platform (and node-llama-cpp's package prefix). */
export const OS_NAMES = { linux: 'linux', win32: 'win', darwin: 'mac' };

function filesUnder(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const s = statSync(p);
      if (s.isDirectory()) walk(p);
      else out.push(p);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

/** A path for messages: relative to the project, with forward slashes on every system. */
const shown = (projectDir, path) => relative(projectDir, path).split(sep).join('/');

function builtFor(path, platform, arch) {
  const kind = describeBinaryFile(path);
  if (kind === null) return 'is not a native binary';
  if (kind.platform !== platform || !kind.arches.includes(arch)) return `is built for ${kind.platform}-${kind.arches.join('+')}`;
  return null;
}

/**
 * What is missing or built for another system, for a package of `platform`-`arch`; empty when
 * everything is in place.
 * @param {string} projectDir
 * @param {'linux' | 'win32' | 'darwin'} platform
 * @param {string} arch
 * @returns {string[]}
 */
export function nativePartProblems(projectDir, platform, arch) {
  const problems = [];
  const target = `${platform}-${arch}`;
  const helperFiles = HELPER_FILES[platform];
  if (helperFiles === undefined) return [`no packaging for platform ${platform}`];

  const helperDir = join(projectDir, 'build', 'native', target);
  for (const file of helperFiles) {
    const path = join(helperDir, file);
    if (!existsSync(path)) {
      problems.push(`${shown(projectDir, path)} is missing: build it on a ${target} machine with \`npm run build:native\``);
      continue;
    }
    const wrong = builtFor(path, platform, arch);
    if (wrong) problems.push(`${shown(projectDir, path)} ${wrong}, not ${target}`);
  }

  const koffiDir = join(projectDir, 'node_modules', '@koromix', `koffi-${platform}-${arch}`);
  const koffiAddons = filesUnder(koffiDir).filter((p) => p.endsWith('.node'));
  if (koffiAddons.length === 0) {
    problems.push(`koffi's binary for ${target} (node_modules/@koromix/koffi-${platform}-${arch}) is not installed: run \`npm ci\` on a ${target} machine`);
  }
  for (const addon of koffiAddons) {
    const wrong = builtFor(addon, platform, arch);
    if (wrong) problems.push(`${shown(projectDir, addon)} ${wrong}, not ${target}`);
  }

  const prefix = `${OS_NAMES[platform]}-${arch}`;
  const llamaScope = join(projectDir, 'node_modules', '@node-llama-cpp');
  const llamaPackages = existsSync(llamaScope) ? readdirSync(llamaScope).filter((name) => name.startsWith(prefix)) : [];
  const llamaAddons = llamaPackages.flatMap((name) => filesUnder(join(llamaScope, name)).filter((p) => p.endsWith('.node')));
  if (llamaAddons.length === 0) {
    problems.push(`node-llama-cpp's binaries for ${target} (node_modules/@node-llama-cpp/${prefix}*) are not installed: run \`npm ci\` on a ${target} machine`);
  }
  for (const addon of llamaAddons) {
    const wrong = builtFor(addon, platform, arch);
    if (wrong) problems.push(`${shown(projectDir, addon)} ${wrong}, not ${target}`);
  }
  return problems;
}

/** The hook: context.arch is electron-builder's Arch enum. */
export default async function beforePack(context) {
  const { Arch } = createRequire(import.meta.url)('builder-util');
  const arch = Arch[context.arch];
  const platform = context.electronPlatformName;
  const problems = nativePartProblems(projectRoot, platform, arch);
  if (problems.length > 0) {
    throw new Error(`cannot package GPU Share for ${platform}-${arch}:\n  ${problems.join('\n  ')}\n` +
      'Packages are built on the system they are for (see README, "Build a package").');
  }
}
