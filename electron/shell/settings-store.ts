/**
 * The app's settings through electron-store: the same schema, options and file
 * (`<dataDir>/settings.json`) as `gpu-share serve` opens with conf, so both see one file.
 */
import Store from 'electron-store';
import { DEFAULT_API_PORT } from '../core/contract.js';
import { SettingsFileError, settingsConfOptions, settingsFrom, type Settings, type SettingsStore } from '../core/settings.js';

export function openAppSettings(dataDir: string): SettingsStore {
  // electron-store names the file `name` (it sets conf's configName from it itself).
  const { configName, ...shared } = settingsConfOptions(DEFAULT_API_PORT);
  try {
    const store = new Store<Settings>({ ...shared, name: configName, cwd: dataDir, fileExtension: 'json', watch: false });
    return settingsFrom(store);
  } catch (error) {
    throw new SettingsFileError(`settings file ${dataDir}/${configName}.json: ${error instanceof Error ? error.message : String(error)} (fix or remove it; it was left as it is)`);
  }
}
