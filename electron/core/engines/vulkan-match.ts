/**
 * Which Vulkan device is an NVML GPU: the index llama.cpp's GGML_VK_VISIBLE_DEVICES takes, in
 * Vulkan's own enumeration order. Pure: both lists come in as data. NVML's index is never used,
 * nor any fallback to it: no match is an answer of its own, with the reason.
 *
 * Only an NVIDIA device (vendor 0x10de) that is not a CPU device can match, and its name must
 * agree with NVML's (spaces trimmed). Then, in order:
 *
 * 1. deviceUUID. NVIDIA's Vulkan driver reports the GPU's UUID (nvidia-smi's GPU-…, without the
 *    prefix and dashes) as VkPhysicalDeviceIDProperties.deviceUUID — the identity CUDA–Vulkan
 *    interop relies on — so an equal UUID is the same GPU, and it tells two GPUs apart even where
 *    one driver lists no PCI bus. It is tried first because it is the stronger proof; it never
 *    rules a device out (another driver for the same GPU, such as Mesa's, reports its own UUID,
 *    and the bus id still names the GPU).
 * 2. The PCI bus id: NVML's "00000000:01:00.0" and VK_EXT_pci_bus_info's domain/bus/device/
 *    function numbers, compared as numbers. Two Vulkan devices at that address with the same name
 *    (two drivers for one GPU, neither with its UUID) are not told apart: no match.
 * 3. The name alone, for a Vulkan device that has no bus id (or when NVML has none): only when the
 *    name is unique both among NVML's GPUs and among Vulkan's devices.
 */
import type { PciAddress, VulkanDevice } from '../../../native/vulkan-devices.js';
import type { GpuIdentity } from '../telemetry/types.js';

export const NVIDIA_VENDOR_ID = 0x10de;

export type VulkanMatchVia = 'uuid' | 'pci-bus-id' | 'name';

/** Where a GPU is in Vulkan's order, or why that is not known. */
export type VulkanMatch = { index: number; via: VulkanMatchVia } | { index: null; reason: string };

/** NVML's busId ("00000000:01:00.0", the legacy "0000:01:00.0"), as numbers; null when it does
 *  not read as one. */
export function parsePciBusId(text: string): PciAddress | null {
  const m = /^([0-9a-f]{1,8}):([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$/i.exec(text.trim());
  if (m === null) return null;
  const device = parseInt(m[3] ?? '', 16);
  if (device > 0x1f) return null;
  return { domain: parseInt(m[1] ?? '', 16), bus: parseInt(m[2] ?? '', 16), device, function: parseInt(m[4] ?? '', 16) };
}

/** "0000:01:00.0", for messages. */
export function formatPci(pci: PciAddress): string {
  const hex = (n: number, width: number): string => n.toString(16).padStart(width, '0');
  return `${hex(pci.domain, 4)}:${hex(pci.bus, 2)}:${hex(pci.device, 2)}.${pci.function}`;
}

const samePci = (a: PciAddress, b: PciAddress): boolean => a.domain === b.domain && a.bus === b.bus && a.device === b.device && a.function === b.function;

const nameOf = (name: string): string => name.trim().replace(/\s+/g, ' ');

/** NVIDIA's GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) as Vulkan's 32 hex digits; null
 *  for anything else (a MIG instance's UUID is not a Vulkan device's). */
export function vulkanUuidOfGpu(uuid: string | null): string | null {
  if (uuid === null) return null;
  const m = /^GPU-([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{12})$/i.exec(uuid);
  return m === null ? null : m.slice(1).join('').toLowerCase();
}

/** The Vulkan device of `gpu` (one of `gpus`, NVML's whole list) among `vulkan`. */
export function matchVulkanDevice(gpu: GpuIdentity, gpus: readonly GpuIdentity[], vulkan: readonly VulkanDevice[]): VulkanMatch {
  const name = nameOf(gpu.name);
  const eligible = vulkan.filter((v) => v.vendorId === NVIDIA_VENDOR_ID && v.deviceType !== 'cpu' && nameOf(v.name) === name);
  if (eligible.length === 0) {
    return { index: null, reason: vulkan.length === 0 ? 'Vulkan lists no device' : `no NVIDIA Vulkan device is named "${name}" (Vulkan lists ${vulkan.map((v) => `"${nameOf(v.name)}"`).join(', ')})` };
  }

  const uuid = vulkanUuidOfGpu(gpu.uuid);
  if (uuid !== null) {
    const byUuid = eligible.filter((v) => v.uuid === uuid);
    if (byUuid.length === 1 && byUuid[0] !== undefined) return { index: byUuid[0].index, via: 'uuid' };
  }

  const pci = gpu.pciBusId === null ? null : parsePciBusId(gpu.pciBusId);
  if (pci !== null) {
    const atBus = eligible.filter((v) => v.pci !== null && samePci(v.pci, pci));
    if (atBus.length === 1 && atBus[0] !== undefined) return { index: atBus[0].index, via: 'pci-bus-id' };
    if (atBus.length > 1) return { index: null, reason: `Vulkan devices ${atBus.map((v) => v.index).join(' and ')} are both "${name}" at ${formatPci(pci)}` };
  }

  // The name alone: only for a Vulkan device without a bus id (or when NVML gave none), and only
  // when the name tells one GPU from every other on both sides.
  const withoutBus = pci === null ? eligible : eligible.filter((v) => v.pci === null);
  const where = pci === null ? '' : ` at ${formatPci(pci)}`;
  if (withoutBus.length === 0) return { index: null, reason: `no Vulkan device "${name}" is${where}` };
  const nvmlNamed = gpus.filter((g) => nameOf(g.name) === name).length;
  const vulkanNamed = vulkan.filter((v) => nameOf(v.name) === name).length;
  if (nvmlNamed !== 1 || vulkanNamed !== 1) {
    const which = nvmlNamed !== 1 ? `NVML lists ${nvmlNamed} GPUs` : `Vulkan lists ${vulkanNamed} devices`;
    return { index: null, reason: `only the name could tell "${name}" (${pci === null ? 'NVML gives no bus id' : 'Vulkan gives no bus id'}), and ${which} of that name` };
  }
  const only = withoutBus[0];
  return only === undefined ? { index: null, reason: `no Vulkan device "${name}"` } : { index: only.index, via: 'name' };
}
