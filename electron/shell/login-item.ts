/**
 * Launch at login on Linux, where Electron's login-item settings do nothing: an XDG autostart
 * entry (`$XDG_CONFIG_HOME/autostart/gpu-share.desktop`) that desktop sessions start at login.
 * Pure: the path and the file's text; shell-extras.ts writes and removes it.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';

export function autostartFile(env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string {
  const configHome = env['XDG_CONFIG_HOME'] !== undefined && env['XDG_CONFIG_HOME'] !== '' ? env['XDG_CONFIG_HOME'] : join(home, '.config');
  return join(configHome, 'autostart', 'gpu-share.desktop');
}

/** One argument of an Exec line (Desktop Entry Specification, "The Exec key"): quoted, with `"`,
 *  backquote, `$` and backslash escaped inside the quotes, and `%` doubled (field codes). */
export function desktopExecArgument(argument: string): string {
  const escaped = argument.replace(/["`$\\]/g, (c) => `\\${c}`).replace(/%/g, '%%');
  return /^[A-Za-z0-9_./:=+-]+$/.test(argument) ? escaped : `"${escaped}"`;
}

/** The entry's text; `command` is the executable and its arguments (the AppImage, or the
 *  Electron binary with the app folder when unpackaged). */
export function autostartEntry(command: readonly string[]): string {
  // Desktop entries also treat a backslash outside quotes as an escape: as a string value the
  // whole Exec line has its backslashes doubled once more.
  const exec = command.map(desktopExecArgument).join(' ').replace(/\\/g, '\\\\');
  return ['[Desktop Entry]', 'Type=Application', 'Name=GPU Share', 'Comment=Share one GPU between local LLM engines', `Exec=${exec}`, 'Terminal=false', 'X-GNOME-Autostart-enabled=true', ''].join('\n');
}
