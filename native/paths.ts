/** Where the native artefacts (the registry helper, the watchdog, the Vulkan device lister) are
 *  looked for, in order: $GPU_SHARE_NATIVE_DIR, the packaged app's resources, the development
 *  build folder. */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import nativeFiles from './files.json' with { type: 'json' };

/** The native files' names on this platform (native/files.json: one list for the build script,
 *  packaging and these loaders). */
export function nativeFileNames(): { library: string; watchdog: string; vulkanDevices: string } {
  const platform = process.platform === 'darwin' || process.platform === 'win32' ? process.platform : 'linux';
  return nativeFiles[platform];
}

export function nativeCandidates(file: string): string[] {
  const target = `${process.platform}-${process.arch}`;
  const candidates: string[] = [];
  const override = process.env['GPU_SHARE_NATIVE_DIR'];
  if (override) candidates.push(join(override, file));
  const resources = (process as NodeJS.Process & { resourcesPath?: string }).resourcesPath;
  if (resources) candidates.push(join(resources, 'native', target, file));
  // This file runs from native/ (sources) or dist/native/ (built): look upwards for build/.
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    candidates.push(join(dir, 'build', 'native', target, file));
    dir = dirname(dir);
  }
  return candidates;
}
