/** The device key of a command that takes one: as given, or found by telemetry (the first device,
 *  or --gpu N). Discovery runs only when no key was given. */
import { chooseGpuKey, type KeyChoice } from '../registry/keys.js';
import { listDevices } from '../telemetry/device-list.js';

/** --gpu N names no device, or telemetry found none: a usage error (exit 2). */
export class DeviceChoiceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeviceChoiceError';
  }
}

export function resolveGpuKey(choice: KeyChoice, wallUs: () => number): string {
  if (choice.gpuKey !== undefined) return choice.gpuKey;
  const chosen = chooseGpuKey(choice, listDevices({ wallUs }).devices);
  if (!chosen.ok) throw new DeviceChoiceError(chosen.message);
  return chosen.value;
}
