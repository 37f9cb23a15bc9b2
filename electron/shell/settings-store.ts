/**
 * The app's settings through electron-store: the same schema, options and file
 * (`<dataDir>/settings.json`) as `gpu-share serve` opens with conf, so both see one file.
 */
import Store from 'electron-store';
import { DEFAULT_API_PORT } from '../core/contract.js';
import { join } from 'node:path';
import { openWithRecovery, settingsConfOptions, settingsFrom, type Settings, type SettingsStore } from '../core/settings.js';

export function openAppSettings(dataDir: string, onProblem?: (message: string) => void): SettingsStore {
  // electron-store names the file `name` (it sets conf's configName from it itself).
  const { configName, ...shared } = settingsConfOptions(DEFAULT_API_PORT);
  const { conf, loadProblem } = openWithRecovery(() => new Store<Settings>({ ...shared, name: configName, cwd: dataDir, fileExtension: 'json', watch: false }), join(dataDir, `${configName}.json`));
  return { ...settingsFrom(conf, onProblem), loadProblem };
}
