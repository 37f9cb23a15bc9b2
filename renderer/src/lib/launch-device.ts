/** The device selector of the Launch dialog and Add/Edit model: its options and its default. The
 *  default is the core's (AppState.launchDefaults, by device-pinning.ts's rule): the profile's
 *  preferred device while present, else the device chosen in the header, else the core's choice
 *  (the only device, or the one with the most free memory). */
import type { DeviceView, LaunchDefault } from '../../../electron/core/contract.js';
import { deviceLabel, formatBytes } from '../../../electron/core/planner/describe.js';

export interface DeviceOption {
  key: string;
  /** `GPU 1 "RTX 4090" · 20.1 GiB free`. */
  label: string;
}

/** `selectedKey`: the device the user chose in the header; null when they never chose one. */
export function defaultLaunchDevice(profileId: string, selectedKey: string | null, launchDefaults: readonly LaunchDefault[], devices: readonly Pick<DeviceView, 'key'>[]): string | null {
  const core = launchDefaults.find((d) => d.profileId === profileId) ?? null;
  if (core?.why === 'preferred') return core.gpuKey;
  if (selectedKey !== null && devices.some((d) => d.key === selectedKey)) return selectedKey;
  return core?.gpuKey ?? null;
}

export function deviceOptions(devices: readonly DeviceView[]): DeviceOption[] {
  return devices.map((d, index) => ({ key: d.key, label: `${deviceLabel({ key: d.key, name: d.name, index })} · ${d.vram === null ? 'free memory not known' : `${formatBytes(d.vram.freeBytes)} free`}` }));
}

/** How the dialog names the device a plan is for: `GPU 1 "RTX 4090" [GPU-…]`. */
export function planDeviceName(key: string, devices: readonly DeviceView[]): string {
  const index = devices.findIndex((d) => d.key === key);
  const device = devices[index];
  return device === undefined ? key : `${deviceLabel({ key, name: device.name, index })} [${key}]`;
}
