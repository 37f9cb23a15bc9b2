/**
 * Which registry key a command uses, decided from what the user gave and what telemetry found.
 * Pure: the devices come in as data, the answer goes out as data.
 */
import { createHash } from 'node:crypto';
import type { Checked } from './validate.js';

/** The key of a GPU that has no UUID (our own rule; opencoti hashes the same facts, its format is
 *  unknown): `gpu-` + the first 12 hex digits of sha256("<name>|<PCI bus id>"). */
export function hashGpuKey(name: string, pciBusId: string): string {
  return `gpu-${createHash('sha256').update(`${name}|${pciBusId}`).digest('hex').slice(0, 12)}`;
}

export interface KeyChoice {
  /** --gpu-key K: used as given (a test's own key, a device on another telemetry source). */
  gpuKey?: string | undefined;
  /** --gpu N: the N-th device telemetry discovers. */
  gpu?: number | undefined;
}

export interface KnownDevice {
  index: number;
  key: string;
  name: string;
}

const listOf = (devices: readonly KnownDevice[]): string =>
  devices.length === 0 ? 'none' : devices.map((d) => `${d.index}: ${d.key} (${d.name})`).join(', ');

/** --gpu-key wins, then --gpu N, then the first device. */
export function chooseGpuKey(choice: KeyChoice, devices: readonly KnownDevice[]): Checked<string> {
  if (choice.gpuKey !== undefined) return { ok: true, value: choice.gpuKey };
  if (choice.gpu !== undefined) {
    const device = devices[choice.gpu];
    if (device === undefined) return { ok: false, message: `--gpu ${choice.gpu}: there is no device ${choice.gpu} (devices: ${listOf(devices)})` };
    return { ok: true, value: device.key };
  }
  const first = devices[0];
  if (first === undefined) return { ok: false, message: 'telemetry found no device; give --gpu-key' };
  return { ok: true, value: first.key };
}

/** The line a watcher of an unknown key gets on stderr (it still runs: someone may join later);
 *  null when the key is a device's or has a segment. */
export function unknownKeyNote(gpuKey: string, devices: readonly KnownDevice[], segmentKeys: readonly string[]): string | null {
  if (devices.some((d) => d.key === gpuKey) || segmentKeys.includes(gpuKey)) return null;
  const others = segmentKeys.filter((key) => !devices.some((d) => d.key === key));
  return (
    `no device has the key ${gpuKey} and no registry exists for it yet; devices: ${listOf(devices)}` +
    (others.length > 0 ? `; other registries: ${others.join(', ')}` : '')
  );
}
