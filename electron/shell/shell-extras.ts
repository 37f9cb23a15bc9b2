/**
 * What only the desktop shell can do for the dashboard (contract ShellExtras): the file picker,
 * the data folder, launch at login (the OS's login items on macOS and Windows, an XDG autostart
 * entry on Linux; the setting is mirrored into the settings file for `gpu-share serve` to show).
 */
import { app, dialog, shell, type BrowserWindow, type OpenDialogOptions } from 'electron';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ApiError, type ShellExtras } from '../core/contract.js';
import type { SettingsStore } from '../core/settings.js';
import { autostartEntry, autostartFile } from './login-item.js';

export interface ShellExtrasOptions {
  settings: SettingsStore;
  dataDir: string;
  /** The dashboard window, to parent the file picker on (null: none open). */
  window(): BrowserWindow | null;
  /** How the OS starts the app at login: the executable, and the app folder when unpackaged. */
  launchCommand: readonly string[];
}

export function createShellExtras(options: ShellExtrasOptions): ShellExtras {
  const loginItemArgs = options.launchCommand.slice(1);
  const readLaunchAtLogin = (): boolean => {
    if (process.platform === 'linux') return existsSync(autostartFile());
    return app.getLoginItemSettings({ args: loginItemArgs }).openAtLogin;
  };
  return {
    async pickModelFile() {
      const dialogOptions: OpenDialogOptions = {
        title: 'Choose a GGUF model',
        properties: ['openFile'],
        filters: [{ name: 'GGUF models', extensions: ['gguf'] }],
      };
      const parent = options.window();
      const result = parent === null ? await dialog.showOpenDialog(dialogOptions) : await dialog.showOpenDialog(parent, dialogOptions);
      return result.canceled ? null : (result.filePaths[0] ?? null);
    },
    async openDataFolder() {
      const failure = await shell.openPath(options.dataDir);
      if (failure !== '') throw new ApiError('INTERNAL', `could not open ${options.dataDir}: ${failure}`);
    },
    async getLaunchAtLogin() {
      return readLaunchAtLogin();
    },
    async setLaunchAtLogin(enabled) {
      if (process.platform === 'linux') {
        const file = autostartFile();
        if (enabled) {
          mkdirSync(dirname(file), { recursive: true });
          writeFileSync(file, autostartEntry(options.launchCommand), { mode: 0o644 });
        } else {
          rmSync(file, { force: true });
        }
      } else {
        // The window stays closed at login anyway: the app starts in the tray.
        app.setLoginItemSettings({ openAtLogin: enabled, path: options.launchCommand[0] ?? process.execPath, args: loginItemArgs });
      }
      const now = readLaunchAtLogin();
      options.settings.update({ launchAtLogin: now });
      return now;
    },
  };
}
