/** Vulkan pinning, the pure parts: reading the lister's output, matching an NVML GPU to its Vulkan
 *  device (never by NVML's index), and the environment and note that follow. */
import { describe, expect, it } from 'vitest';
import { parseVulkanDevices, type VulkanDevice, type VulkanDeviceList } from '../../native/vulkan-devices.js';
import { CUDA_DEVICES_ENV, pinningFor, VULKAN_DEVICES_ENV, vulkanPinningWarning } from '../../electron/core/engines/device-pinning.js';
import { lookUpVulkanDevice } from '../../electron/core/engines/vulkan-lookup.js';
import { formatPci, matchVulkanDevice, parsePciBusId, vulkanUuidOfGpu } from '../../electron/core/engines/vulkan-match.js';
import { ENGINE_KINDS } from '../../electron/core/engines/profiles.js';
import type { GpuIdentity } from '../../electron/core/telemetry/types.js';

const UUID_A = 'GPU-aaaaaaaa-1111-2222-3333-444444444444';
const UUID_B = 'GPU-bbbbbbbb-1111-2222-3333-444444444444';
const NAME = 'NVIDIA GeForce RTX 4090';

/** One line as gpushare-vulkan-devices prints it. */
const line = (index: number, over: Record<string, unknown> = {}): string =>
  JSON.stringify({ index, deviceName: NAME, vendorID: 0x10de, deviceID: 0x2684, deviceType: 2, apiVersion: 4206847, pci: { domain: 0, bus: 1, device: 0, function: 0 }, deviceUUID: 'aaaaaaaa111122223333444444444444', ...over });

describe('reading the Vulkan device lister', () => {
  it('reads each device in order, then the count', () => {
    const out = [line(0), line(1, { deviceName: 'llvmpipe (LLVM 15.0.6, 256 bits)', vendorID: 0x10005, deviceType: 4, pci: null, deviceUUID: null }), '{"count":2}', ''].join('\n');
    const parsed = parseVulkanDevices(out);
    expect(parsed).toEqual({
      ok: true,
      devices: [
        { index: 0, name: NAME, vendorId: 0x10de, deviceId: 0x2684, deviceType: 'discrete-gpu', pci: { domain: 0, bus: 1, device: 0, function: 0 }, uuid: 'aaaaaaaa111122223333444444444444' },
        { index: 1, name: 'llvmpipe (LLVM 15.0.6, 256 bits)', vendorId: 0x10005, deviceId: 0x2684, deviceType: 'cpu', pci: null, uuid: null },
      ],
    });
    expect(parseVulkanDevices('{"count":0}\r\n')).toEqual({ ok: true, devices: [] });
  });

  it('garbage is "not available" with the reason, never a throw', () => {
    expect(parseVulkanDevices('Segmentation fault')).toEqual({ ok: false, reason: expect.stringContaining('line 1 is not JSON') });
    expect(parseVulkanDevices('')).toEqual({ ok: false, reason: expect.stringContaining('cut short') });
    expect(parseVulkanDevices('[1,2]\n{"count":0}')).toEqual({ ok: false, reason: 'line 1: not an object' });
    expect(parseVulkanDevices('null')).toEqual({ ok: false, reason: 'line 1: not an object' });
  });

  it('a list cut short, or counted wrong, is not taken', () => {
    expect(parseVulkanDevices(`${line(0)}\n${line(1)}\n`)).toEqual({ ok: false, reason: 'the list is cut short: no count after 2 devices' });
    expect(parseVulkanDevices(`${line(0)}\n${line(1).slice(0, 40)}`)).toEqual({ ok: false, reason: expect.stringContaining('line 2 is not JSON') });
    expect(parseVulkanDevices(`${line(0)}\n{"count":2}`)).toEqual({ ok: false, reason: 'it listed 1 device but counted 2' });
    expect(parseVulkanDevices(`${line(0)}\n{"count":1}\n${line(1)}`)).toEqual({ ok: false, reason: 'line 3 follows the count' });
    // Indices out of order: the list is not Vulkan's order.
    expect(parseVulkanDevices(`${line(1)}\n{"count":1}`)).toEqual({ ok: false, reason: 'line 1: index 1 where 0 was due' });
  });

  it('fields of the wrong type are refused, naming the field', () => {
    const bad = (over: Record<string, unknown>): string => {
      const parsed = parseVulkanDevices(`${line(0, over)}\n{"count":1}`);
      return parsed.ok ? 'accepted' : parsed.reason;
    };
    expect(bad({ deviceName: 7 })).toContain('deviceName');
    expect(bad({ deviceName: '  ' })).toContain('deviceName');
    expect(bad({ vendorID: '0x10de' })).toContain('vendorID');
    expect(bad({ vendorID: -1 })).toContain('vendorID');
    expect(bad({ deviceID: 1.5 })).toContain('deviceID');
    expect(bad({ deviceType: 5 })).toContain('deviceType');
    expect(bad({ deviceType: '2' })).toContain('deviceType');
    expect(bad({ pci: '0000:01:00.0' })).toContain('pci');
    expect(bad({ pci: { domain: 0, bus: 256, device: 0, function: 0 } })).toContain('not a PCI address');
    expect(bad({ pci: { domain: 0, bus: 1, device: 0 } })).toContain('not a PCI address');
    expect(bad({ deviceUUID: 'GPU-aaaaaaaa' })).toContain('deviceUUID');
    expect(bad({ deviceUUID: 12 })).toContain('deviceUUID');
    expect(bad({})).toBe('accepted');
  });
});

const vk = (index: number, over: Partial<VulkanDevice> = {}): VulkanDevice => ({ index, name: NAME, vendorId: 0x10de, deviceId: 0x2684, deviceType: 'discrete-gpu', pci: null, uuid: null, ...over });
const pci = (bus: number) => ({ domain: 0, bus, device: 0, function: 0 });
const gpu = (key: string, over: Partial<GpuIdentity> = {}): GpuIdentity => ({ key, name: NAME, uuid: key, pciBusId: null, ...over });
const LLVMPIPE = (index: number): VulkanDevice => vk(index, { name: 'llvmpipe (LLVM 15.0.6, 256 bits)', vendorId: 0x10005, deviceType: 'cpu' });

describe('matching an NVML GPU to its Vulkan device', () => {
  it('reads both forms of a PCI bus id as numbers', () => {
    expect(parsePciBusId('00000000:01:00.0')).toEqual(pci(1));
    expect(parsePciBusId('0000:4B:1f.3')).toEqual({ domain: 0, bus: 0x4b, device: 0x1f, function: 3 });
    expect(parsePciBusId('00000000:01:20.0')).toBeNull();
    expect(parsePciBusId('01:00.0')).toBeNull();
    expect(formatPci({ domain: 0, bus: 0x4b, device: 0x1f, function: 3 })).toBe('0000:4b:1f.3');
    expect(vulkanUuidOfGpu(UUID_A)).toBe('aaaaaaaa111122223333444444444444');
    expect(vulkanUuidOfGpu('MIG-aaaaaaaa-1111-2222-3333-444444444444')).toBeNull();
  });

  it('tells two GPUs of the same name apart by bus id, whatever order Vulkan lists them in', () => {
    const gpus = [gpu(UUID_A, { pciBusId: '00000000:01:00.0' }), gpu(UUID_B, { pciBusId: '00000000:02:00.0' })];
    // Vulkan lists them reversed (no UUIDs: only the bus id can tell them).
    const vulkan = [vk(0, { pci: pci(2) }), vk(1, { pci: pci(1) })];
    expect(matchVulkanDevice(gpus[0]!, gpus, vulkan)).toEqual({ index: 1, via: 'pci-bus-id' });
    expect(matchVulkanDevice(gpus[1]!, gpus, vulkan)).toEqual({ index: 0, via: 'pci-bus-id' });
    // In NVML's order: the same answer per GPU, never NVML's index.
    const inOrder = [vk(0, { pci: pci(1) }), vk(1, { pci: pci(2) })];
    expect(matchVulkanDevice(gpus[1]!, gpus, inOrder)).toEqual({ index: 1, via: 'pci-bus-id' });
  });

  it("takes NVIDIA's deviceUUID first where it equals the GPU's UUID", () => {
    const gpus = [gpu(UUID_A), gpu(UUID_B)];
    const vulkan = [vk(0, { uuid: vulkanUuidOfGpu(UUID_B) }), vk(1, { uuid: vulkanUuidOfGpu(UUID_A) })];
    expect(matchVulkanDevice(gpus[0]!, gpus, vulkan)).toEqual({ index: 1, via: 'uuid' });
    // A UUID of another driver does not rule out the device its bus id names.
    const other = [vk(0, { uuid: 'ffffffffffffffffffffffffffffffff', pci: pci(1) })];
    expect(matchVulkanDevice(gpu(UUID_A, { pciBusId: '00000000:01:00.0' }), [gpu(UUID_A)], other)).toEqual({ index: 0, via: 'pci-bus-id' });
  });

  it('without a bus id: by a name unique on both sides, else not at all', () => {
    const one = [gpu(UUID_A, { pciBusId: '00000000:01:00.0' })];
    expect(matchVulkanDevice(one[0]!, one, [LLVMPIPE(0), vk(1)])).toEqual({ index: 1, via: 'name' });
    // Two GPUs of that name on NVML's side: not told apart.
    const two = [gpu(UUID_A), gpu(UUID_B)];
    const dup = matchVulkanDevice(two[0]!, two, [vk(0)]);
    expect(dup.index).toBeNull();
    expect(dup).toEqual({ index: null, reason: expect.stringContaining('NVML lists 2 GPUs') });
    // Two Vulkan devices of that name, neither with a bus id.
    const twoVk = matchVulkanDevice(one[0]!, one, [vk(0), vk(1)]);
    expect(twoVk).toEqual({ index: null, reason: expect.stringContaining('Vulkan lists 2 devices') });
  });

  it('never matches a CPU device, another vendor, another name, or a device at another bus id', () => {
    const cpuNamedLikeIt = vk(0, { deviceType: 'cpu', vendorId: 0x10005 });
    const only = [gpu(UUID_A)];
    expect(matchVulkanDevice(only[0]!, only, [LLVMPIPE(0)]).index).toBeNull();
    expect(matchVulkanDevice(only[0]!, only, [cpuNamedLikeIt]).index).toBeNull();
    expect(matchVulkanDevice(only[0]!, only, [vk(0, { vendorId: 0x1002 })]).index).toBeNull();
    expect(matchVulkanDevice(only[0]!, only, [vk(0, { name: 'NVIDIA GeForce RTX 4080' })])).toEqual({ index: null, reason: expect.stringContaining('no NVIDIA Vulkan device is named') });
    const atOne = [gpu(UUID_A, { pciBusId: '00000000:01:00.0' })];
    expect(matchVulkanDevice(atOne[0]!, atOne, [vk(0, { pci: pci(2) })])).toEqual({ index: null, reason: `no Vulkan device "${NAME}" is at 0000:01:00.0` });
    expect(matchVulkanDevice(atOne[0]!, atOne, [])).toEqual({ index: null, reason: 'Vulkan lists no device' });
  });

  it('two Vulkan devices at one bus id with the same name (two drivers, no UUID to choose) are not guessed between', () => {
    const atOne = [gpu(UUID_A, { pciBusId: '00000000:01:00.0' })];
    expect(matchVulkanDevice(atOne[0]!, atOne, [vk(0, { pci: pci(1) }), vk(1, { pci: pci(1) })]).index).toBeNull();
    // With its UUID, the one that has it.
    expect(matchVulkanDevice(atOne[0]!, atOne, [vk(0, { pci: pci(1) }), vk(1, { pci: pci(1), uuid: vulkanUuidOfGpu(UUID_A) })])).toEqual({ index: 1, via: 'uuid' });
  });
});

describe('the environment and note of a Vulkan pin', () => {
  it('sets GGML_VK_VISIBLE_DEVICES beside CUDA_VISIBLE_DEVICES, and says what is pinned', () => {
    for (const kind of ENGINE_KINDS) {
      const pinned = pinningFor(kind, UUID_B, {}, { index: 1, via: 'pci-bus-id' });
      expect(pinned.env, kind).toEqual({ [CUDA_DEVICES_ENV]: UUID_B, [VULKAN_DEVICES_ENV]: '1' });
      expect(pinned.note, kind).toContain(`pinned to ${UUID_B} through ${CUDA_DEVICES_ENV}; a Vulkan build through ${VULKAN_DEVICES_ENV}=1 (Vulkan device 1, matched by its PCI bus id and name)`);
    }
    // A GPU without a UUID: Vulkan alone can pin it.
    expect(pinningFor('llama-server', 'gpu-0123456789ab', {}, { index: 0, via: 'name' })).toEqual({
      env: { [VULKAN_DEVICES_ENV]: '0' },
      note: expect.stringMatching(/not pinned for CUDA.*a Vulkan build through GGML_VK_VISIBLE_DEVICES=0/),
    });
  });

  it('without a match: no GGML_VK_VISIBLE_DEVICES, and the note says why', () => {
    const unpinned = pinningFor('builtin', UUID_B, {}, { index: null, reason: 'Vulkan\'s devices are not known: no Vulkan loader' });
    expect(unpinned.env).toEqual({ [CUDA_DEVICES_ENV]: UUID_B });
    expect(unpinned.note).toContain("a Vulkan build is not pinned (Vulkan's devices are not known: no Vulkan loader) and runs on Vulkan's default device");
    expect(pinningFor('builtin', UUID_B).note).toContain("Vulkan's device order was not looked up");
    for (const key of ['cpu-0', 'metal-0']) expect(pinningFor('builtin', key, {}, { index: 0, via: 'uuid' })).toEqual({ env: {}, note: null });
  });

  it("keeps the profile's own GGML_VK_VISIBLE_DEVICES, and does not pin when the profile changes the loader's view", () => {
    const own = pinningFor('llama-server', UUID_B, { [VULKAN_DEVICES_ENV]: '0' }, { index: 1, via: 'uuid' });
    expect(own.env).toEqual({ [CUDA_DEVICES_ENV]: UUID_B });
    expect(own.note).toContain(`keeps the profile's own ${VULKAN_DEVICES_ENV}=0`);
    const loader = pinningFor('llama-server', UUID_B, { VK_DRIVER_FILES: '/x/nvidia_icd.json' }, { index: 1, via: 'uuid' });
    expect(loader.env).toEqual({ [CUDA_DEVICES_ENV]: UUID_B });
    expect(loader.note).toContain('the profile sets VK_DRIVER_FILES');
    // Its own CUDA_VISIBLE_DEVICES leaves the Vulkan pin as it is.
    expect(pinningFor('llama-server', UUID_B, { [CUDA_DEVICES_ENV]: '0,1' }, { index: 1, via: 'uuid' }).env).toEqual({ [VULKAN_DEVICES_ENV]: '1' });
  });

  it('the built-in engine warns about Vulkan only when its GPU was not matched', () => {
    expect(vulkanPinningWarning('vulkan', { [CUDA_DEVICES_ENV]: UUID_B, [VULKAN_DEVICES_ENV]: '1' })).toBeNull();
    expect(vulkanPinningWarning('vulkan', { [CUDA_DEVICES_ENV]: UUID_B })).toMatch(/not matched to a Vulkan device .*runs on Vulkan's default device/);
    expect(vulkanPinningWarning('cuda', { [CUDA_DEVICES_ENV]: UUID_B })).toBeNull();
    expect(vulkanPinningWarning('vulkan', {})).toBeNull();
    expect(vulkanPinningWarning(false, { [CUDA_DEVICES_ENV]: UUID_B })).toBeNull();
  });
});

describe('looking the device up before a launch', () => {
  const listed: VulkanDeviceList = { available: true, devices: [vk(0, { pci: pci(2) }), vk(1, { pci: pci(1) })] };
  const nvml = { gpuIdentities: () => [gpu(UUID_A, { pciBusId: '00000000:01:00.0' }), gpu(UUID_B, { pciBusId: '00000000:02:00.0' })] };

  it('lists Vulkan only for an NVIDIA GPU that NVML reports', async () => {
    let runs = 0;
    const list = async (): Promise<VulkanDeviceList> => {
      runs++;
      return listed;
    };
    expect(await lookUpVulkanDevice(UUID_A, nvml, list)).toEqual({ index: 1, via: 'pci-bus-id' });
    expect(await lookUpVulkanDevice('cpu-0', nvml, list)).toEqual({ index: null, reason: 'cpu-0 is not an NVIDIA GPU' });
    expect(await lookUpVulkanDevice(UUID_A, {}, list)).toEqual({ index: null, reason: expect.stringContaining('not a GPU that NVML reports') });
    expect(await lookUpVulkanDevice('GPU-elsewhere', nvml, list)).toEqual({ index: null, reason: 'NVML does not report GPU-elsewhere' });
    expect(runs).toBe(1);
  });

  it('"not available" and a failing NVML are reasons, not errors', async () => {
    expect(await lookUpVulkanDevice(UUID_A, nvml, async () => ({ available: false, reason: 'no Vulkan loader: libvulkan.so.1: cannot open shared object file' }))).toEqual({
      index: null,
      reason: "Vulkan's devices are not known: no Vulkan loader: libvulkan.so.1: cannot open shared object file",
    });
    const broken = {
      gpuIdentities: (): GpuIdentity[] => {
        throw new Error('GPU_IS_LOST');
      },
    };
    expect(await lookUpVulkanDevice(UUID_A, broken, async () => listed)).toEqual({ index: null, reason: 'NVML could not list its GPUs: GPU_IS_LOST' });
  });
});
