/**
 * Vulkan's physical devices in Vulkan's own enumeration order (the order llama.cpp's
 * GGML_VK_VISIBLE_DEVICES indexes), learnt by running gpushare-vulkan-devices (vulkan-devices.c)
 * as a child process with a timeout: Vulkan is never loaded into this process, so a driver that
 * hangs or crashes costs a "not available", never the app.
 *
 * The loader is the platform's (libvulkan.so.1, vulkan-1.dll, libvulkan.1.dylib), or the file
 * named by $GPU_SHARE_VULKAN_LIB. The lister runs with this process's environment, which is the
 * environment an engine inherits: the Vulkan loader's own variables (VK_DRIVER_FILES, …) shape
 * both lists alike.
 *
 * "Not available" is a value ({ available: false, reason }), never an exception: no loader, no
 * driver, no lister, a timeout, a crash, or output that does not read as the lister's.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { nativeCandidates, nativeFileNames } from './paths.js';

/** VkPhysicalDeviceType, by its value. */
export const VULKAN_DEVICE_TYPES = ['other', 'integrated-gpu', 'discrete-gpu', 'virtual-gpu', 'cpu'] as const;
export type VulkanDeviceType = (typeof VULKAN_DEVICE_TYPES)[number];

/** A PCI address as VK_EXT_pci_bus_info gives it. */
export interface PciAddress {
  domain: number;
  bus: number;
  device: number;
  function: number;
}

export interface VulkanDevice {
  /** Its place in vkEnumeratePhysicalDevices' order. */
  index: number;
  name: string;
  /** PCI vendor id (0x10de: NVIDIA). */
  vendorId: number;
  deviceId: number;
  deviceType: VulkanDeviceType;
  /** null: the device does not list VK_EXT_pci_bus_info. */
  pci: PciAddress | null;
  /** VkPhysicalDeviceIDProperties.deviceUUID, 32 lower-case hex digits; null: a Vulkan 1.0 device. */
  uuid: string | null;
}

export type VulkanDeviceList = { available: true; devices: VulkanDevice[] } | { available: false; reason: string };

export type ParsedVulkanDevices = { ok: true; devices: VulkanDevice[] } | { ok: false; reason: string };

const U32_MAX = 0xffff_ffff;

const isU32 = (value: unknown, max = U32_MAX): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= max;

function parsePci(value: unknown): PciAddress | null | string {
  if (value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) return 'pci is neither an object nor null';
  const pci = value as Record<string, unknown>;
  const { domain, bus, device } = pci;
  const fn = pci['function'];
  if (!isU32(domain) || !isU32(bus, 0xff) || !isU32(device, 0x1f) || !isU32(fn, 0x7)) return `pci ${JSON.stringify(value)} is not a PCI address`;
  return { domain, bus, device, function: fn };
}

/** One device line; a string says what is wrong with it. */
function parseDevice(value: unknown, expectedIndex: number): VulkanDevice | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not an object';
  const d = value as Record<string, unknown>;
  if (d['index'] !== expectedIndex) return `index ${JSON.stringify(d['index'])} where ${expectedIndex} was due`;
  const name = d['deviceName'];
  if (typeof name !== 'string' || name.trim() === '') return 'deviceName is not a non-empty string';
  const vendorId = d['vendorID'];
  const deviceId = d['deviceID'];
  if (!isU32(vendorId)) return 'vendorID is not a 32-bit unsigned integer';
  if (!isU32(deviceId)) return 'deviceID is not a 32-bit unsigned integer';
  const type = d['deviceType'];
  if (!isU32(type, VULKAN_DEVICE_TYPES.length - 1)) return `deviceType ${JSON.stringify(type)} is not a VkPhysicalDeviceType`;
  const pci = parsePci(d['pci']);
  if (typeof pci === 'string') return pci;
  const uuid = d['deviceUUID'];
  if (uuid !== null && (typeof uuid !== 'string' || !/^[0-9a-f]{32}$/.test(uuid))) return 'deviceUUID is neither 32 hex digits nor null';
  return { index: expectedIndex, name, vendorId, deviceId, deviceType: VULKAN_DEVICE_TYPES[type] ?? 'other', pci, uuid };
}

/** The lister's standard output: one JSON object per device in order, then {"count":N}. Pure. */
export function parseVulkanDevices(stdout: string): ParsedVulkanDevices {
  const lines = stdout.split(/\r?\n/).filter((line) => line.trim() !== '');
  const devices: VulkanDevice[] = [];
  for (const [i, line] of lines.entries()) {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return { ok: false, reason: `line ${i + 1} is not JSON: ${JSON.stringify(line.slice(0, 80))}` };
    }
    const isCount = typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 1 && 'count' in value;
    if (isCount) {
      const count = (value as { count: unknown }).count;
      if (count !== devices.length) return { ok: false, reason: `it listed ${devices.length} device${devices.length === 1 ? '' : 's'} but counted ${JSON.stringify(count)}` };
      if (i !== lines.length - 1) return { ok: false, reason: `line ${i + 2} follows the count` };
      return { ok: true, devices };
    }
    const device = parseDevice(value, devices.length);
    if (typeof device === 'string') return { ok: false, reason: `line ${i + 1}: ${device}` };
    devices.push(device);
  }
  return { ok: false, reason: `the list is cut short: no count after ${devices.length} device${devices.length === 1 ? '' : 's'}` };
}

/** Where the lister is looked for (see paths.ts). */
export function vulkanListerCandidates(): string[] {
  return nativeCandidates(nativeFileNames().vulkanDevices);
}

/** The lister's exit codes (vulkan-devices.c), as reasons. */
const EXIT_REASONS: Readonly<Record<number, string>> = {
  2: 'no Vulkan loader',
  3: 'the Vulkan loader lacks an entry point',
  4: 'Vulkan instance creation failed',
  5: 'Vulkan could not enumerate its devices',
};

export interface ListVulkanDevicesOptions {
  /** The lister executable; default: the first of vulkanListerCandidates() that exists. */
  lister?: string;
  /** Default: process.env ($GPU_SHARE_VULKAN_LIB names another loader). */
  env?: NodeJS.ProcessEnv;
  /** Default: 5 s. */
  timeoutMs?: number;
}

export const VULKAN_LIST_TIMEOUT_MS = 5_000;

/** Runs the lister once (no cache; see vulkanDevices). Never rejects. */
export function listVulkanDevices(options: ListVulkanDevicesOptions = {}): Promise<VulkanDeviceList> {
  const lister = options.lister ?? vulkanListerCandidates().find((path) => existsSync(path));
  if (lister === undefined) return Promise.resolve({ available: false, reason: `the Vulkan device lister is missing (tried ${vulkanListerCandidates().join(', ')}; npm run build:native)` });
  const env = options.env ?? process.env;
  const loader = env['GPU_SHARE_VULKAN_LIB'];
  const args = loader !== undefined && loader !== '' ? [loader] : [];
  const timeoutMs = options.timeoutMs ?? VULKAN_LIST_TIMEOUT_MS;
  return new Promise((resolve) => {
    execFile(lister, args, { env, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1 << 20, windowsHide: true }, (error, stdout, stderr) => {
      const said = stderr.trim().split(/\r?\n/)[0] ?? '';
      if (error !== null) {
        const failure = error as NodeJS.ErrnoException & { code?: number | string; killed?: boolean; signal?: NodeJS.Signals | null };
        let reason: string;
        if (failure.killed === true && failure.signal === 'SIGKILL') reason = `the Vulkan device lister did not answer within ${(timeoutMs / 1000).toFixed(1)} s`;
        else if (typeof failure.code === 'number') reason = `${EXIT_REASONS[failure.code] ?? `the Vulkan device lister exited with ${failure.code}`}${said === '' ? '' : `: ${said}`}`;
        else if (typeof failure.signal === 'string') reason = `the Vulkan device lister was ended by ${failure.signal}${said === '' ? '' : `: ${said}`}`;
        else reason = `the Vulkan device lister could not run: ${failure.message}`;
        resolve({ available: false, reason });
        return;
      }
      const parsed = parseVulkanDevices(stdout);
      resolve(parsed.ok ? { available: true, devices: parsed.devices } : { available: false, reason: `the Vulkan device lister's output does not read: ${parsed.reason}` });
    });
  });
}

let cached: Promise<VulkanDeviceList> | null = null;

/** Vulkan's devices, looked up once for the life of this process (the first caller's run; its
 *  "not available" is kept too: the machine's drivers do not change under a running app). */
export function vulkanDevices(): Promise<VulkanDeviceList> {
  cached ??= listVulkanDevices();
  return cached;
}
