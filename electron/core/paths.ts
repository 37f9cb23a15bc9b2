/** Where GPU Share keeps its data (settings, profiles, envelopes, token) when no --data-dir is
 *  given: the platform's per-user application data folder. */
import { homedir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  if (env['GPU_SHARE_DATA_DIR']) return env['GPU_SHARE_DATA_DIR'];
  if (platform === 'win32') return join(env['APPDATA'] ?? join(homedir(), 'AppData', 'Roaming'), 'GPU Share');
  if (platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'GPU Share');
  // XDG: an empty or relative XDG_DATA_HOME is to be ignored (a relative one would put the data
  // folder wherever the command happens to run).
  const xdg = env['XDG_DATA_HOME'];
  return join(xdg !== undefined && isAbsolute(xdg) ? xdg : join(homedir(), '.local', 'share'), 'gpu-share');
}

/** The built dashboard (dist/renderer), beside the compiled core: this file runs as
 *  dist/electron/core/paths.js, in the repository or inside the packaged app's asar. */
export function rendererDir(): string {
  return join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'renderer');
}

/** The built-in engine's host process (dist/electron/core/engines/builtin/engine-host.js), beside
 *  the compiled core as the dashboard is. */
export function builtinHostPath(): string {
  return join(dirname(fileURLToPath(import.meta.url)), 'engines', 'builtin', 'engine-host.js');
}
