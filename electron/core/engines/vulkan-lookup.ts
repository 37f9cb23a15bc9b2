/**
 * Where a launch's device is in Vulkan's order, for pinningFor: looked up only for an NVIDIA GPU
 * that the telemetry provider (NVML) lists with its name, UUID and PCI bus id. Vulkan's own list
 * comes from the lister process, run once for the life of this process (vulkanDevices); another
 * device (the CPU, Apple's GPU, a simulated one) never runs it.
 */
import { vulkanDevices, type VulkanDeviceList } from '../../../native/vulkan-devices.js';
import type { TelemetryProvider } from '../telemetry/types.js';
import { isNvidiaGpuKey } from './device-pinning.js';
import { matchVulkanDevice, type VulkanMatch } from './vulkan-match.js';

export async function lookUpVulkanDevice(gpuKey: string, provider: Pick<TelemetryProvider, 'gpuIdentities'>, list: () => Promise<VulkanDeviceList> = vulkanDevices): Promise<VulkanMatch> {
  if (!isNvidiaGpuKey(gpuKey)) return { index: null, reason: `${gpuKey} is not an NVIDIA GPU` };
  if (provider.gpuIdentities === undefined) return { index: null, reason: `${gpuKey} is not a GPU that NVML reports` };
  let gpus;
  try {
    gpus = provider.gpuIdentities();
  } catch (error) {
    return { index: null, reason: `NVML could not list its GPUs: ${error instanceof Error ? error.message : String(error)}` };
  }
  const gpu = gpus.find((g) => g.key === gpuKey);
  if (gpu === undefined) return { index: null, reason: `NVML does not report ${gpuKey}` };
  const listed = await list();
  if (!listed.available) return { index: null, reason: `Vulkan's devices are not known: ${listed.reason}` };
  return matchVulkanDevice(gpu, gpus, listed.devices);
}
