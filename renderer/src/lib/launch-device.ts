/** The device selector of the Launch dialog and Add/Edit model: its options and its default, by
 *  the core's own rule (device-pinning.ts): the profile's preferred device while present, else
 *  the device chosen in the header, else the one with the most free memory. */
import type { DeviceView, Profile } from '../../../electron/core/contract.js';
import { chooseLaunchDevice } from '../../../electron/core/engines/device-pinning.js';
import { deviceLabel, formatBytes } from '../../../electron/core/planner/describe.js';

export interface DeviceOption {
  key: string;
  /** `GPU 1 "RTX 4090" · 20.1 GiB free`. */
  label: string;
}

/** `selectedKey`: the device the user chose in the header; null when they never chose one. */
export function defaultLaunchDevice(profile: Pick<Profile, 'gpuKey'>, selectedKey: string | null, devices: readonly DeviceView[]): string | null {
  return chooseLaunchDevice({ preferred: profile.gpuKey, selected: selectedKey, devices: devices.map((d) => ({ key: d.key, freeBytes: d.vram?.freeBytes ?? null })) })?.key ?? null;
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
