/** Where GPU Share keeps its data (settings, profiles, envelopes, token) when no --data-dir is
 *  given: the platform's per-user application data folder. */
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  if (env['GPU_SHARE_DATA_DIR']) return env['GPU_SHARE_DATA_DIR'];
  if (platform === 'win32') return join(env['APPDATA'] ?? join(homedir(), 'AppData', 'Roaming'), 'GPU Share');
  if (platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'GPU Share');
  return join(env['XDG_DATA_HOME'] ?? join(homedir(), '.local', 'share'), 'gpu-share');
}

/** The built dashboard (dist/renderer), beside the compiled core: this file runs as
 *  dist/electron/core/paths.js, in the repository or inside the packaged app's asar. */
export function rendererDir(): string {
  return join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'renderer');
}
