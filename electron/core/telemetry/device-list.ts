/**
 * The devices telemetry discovers, in its order, as the commands that take a device key see them:
 * the first one is the default, `--gpu N` picks the N-th. One discovery and one sample, then the
 * provider is closed.
 */
import { discoverTelemetry, type DiscoverOptions } from './discovery.js';
import { stripBidiControls } from '../registry/codec.js';
import type { TelemetrySource } from './types.js';

export interface DeviceEntry {
  index: number;
  /** Its registry key (GPU-…, MIG-…, gpu-<hash>, metal-0, cpu-0, or a simulated key). */
  key: string;
  name: string;
  /** null when the device could not say (a GPU whose memory query failed). */
  totalBytes: number | null;
  source: TelemetrySource;
}

export interface DeviceList {
  devices: DeviceEntry[];
  /** Why this provider: one line ("NVML: 1 GPU (…)", "NVML unavailable: …; using the host CPU (cpu-0)"). */
  reason: string;
}

export function listDevices(options: DiscoverOptions): DeviceList {
  const { provider, reason } = discoverTelemetry(options);
  try {
    const devices = provider.sample().map((sample, index) => ({
      index,
      key: sample.key,
      name: stripBidiControls(sample.name),
      totalBytes: sample.health === 'OK' || sample.totalBytes > 0 ? sample.totalBytes : null,
      source: sample.source,
    }));
    return { devices, reason };
  } finally {
    provider.close();
  }
}
