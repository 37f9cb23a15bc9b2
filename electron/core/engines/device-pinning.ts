/**
 * Which device an engine runs on, and how it is held there. Pure: the devices, and where the
 * device is in Vulkan's order, come in as data; the choice and the environment go out as data.
 *
 * - The device: the one asked for (the Launch dialog, `launch --gpu`), else the profile's
 *   preferred one while it is present, else the one selected in the header, else the one with the
 *   most free memory (ties: discovery order).
 * - The pinning: an engine learns its device only from its environment at spawn, and each build
 *   reads its own variable, so a GPU gets both where both are known:
 *   - CUDA: for a GPU that has a CUDA UUID (`GPU-…`, a MIG instance's `MIG-…`),
 *     `CUDA_VISIBLE_DEVICES=<UUID>`, for every engine kind: llama-server, llamafile and
 *     opencoti-llamafile are CUDA programs, a command engine is whatever it runs, and
 *     node-llama-cpp (the built-in engine) has no device option of its own.
 *   - Vulkan: `GGML_VK_VISIBLE_DEVICES=<index>`, the GPU's index in Vulkan's own enumeration
 *     order (llama.cpp's Vulkan backend indexes vkEnumeratePhysicalDevices with it, and refuses
 *     to start on an index past the end). NVML's index is not that order: the index comes from
 *     vulkan-match.ts, which matches the NVML GPU to a Vulkan device by UUID, PCI bus id and name
 *     (never by NVML's index), from the list gpushare-vulkan-devices prints (a separate process;
 *     Vulkan is never loaded here). Without a match a Vulkan build is left unpinned, and the note
 *     says why. A profile that sets a Vulkan loader variable (VK_…) may see another order: its
 *     Vulkan build is not pinned either.
 *   A profile's own CUDA_VISIBLE_DEVICES or GGML_VK_VISIBLE_DEVICES is the user's choice and is
 *   kept. The host CPU (`cpu-0`) and Apple's one GPU (`metal-0`) need nothing beyond joining their
 *   registry.
 */
import type { EngineKind } from './profiles.js';
import type { VulkanMatch } from './vulkan-match.js';

/** What a registry key says about how the device can be named to an engine. */
export type DeviceKind =
  /** An NVIDIA GPU or MIG instance with a UUID: CUDA_VISIBLE_DEVICES takes it as it is. */
  | 'cuda'
  /** An NVIDIA GPU without a UUID (keyed `gpu-<hash>`): CUDA can only number it, in an order NVML
   *  does not give. */
  | 'gpu-without-uuid'
  | 'metal'
  | 'cpu'
  /** Any other key (a simulated device, a test's own key): nothing to pin it by. */
  | 'other';

export const CUDA_DEVICES_ENV = 'CUDA_VISIBLE_DEVICES';
export const VULKAN_DEVICES_ENV = 'GGML_VK_VISIBLE_DEVICES';

export function deviceKindOf(gpuKey: string): DeviceKind {
  if (/^(GPU|MIG)-/.test(gpuKey)) return 'cuda';
  if (/^gpu-[0-9a-f]{12}$/.test(gpuKey)) return 'gpu-without-uuid';
  if (gpuKey === 'metal-0') return 'metal';
  if (gpuKey === 'cpu-0') return 'cpu';
  return 'other';
}

/** Whether a device of this key is an NVIDIA GPU that Vulkan may list (and so worth looking up). */
export function isNvidiaGpuKey(gpuKey: string): boolean {
  const kind = deviceKindOf(gpuKey);
  return kind === 'cuda' || kind === 'gpu-without-uuid';
}

export interface Pinning {
  /** Variables added to the engine's environment (the profile's own win over them). */
  env: Record<string, string>;
  /** One line for the log saying what holds the engine to its device and what does not; null
   *  when nothing needs saying. */
  note: string | null;
}

const ENGINE_WORDS: Readonly<Record<EngineKind, string>> = {
  builtin: 'the built-in engine (node-llama-cpp)',
  'llama-server': 'llama-server',
  llamafile: 'llamafile',
  'opencoti-llamafile': 'opencoti-llamafile',
  command: 'the command',
};

/** Where the device is in Vulkan's order when nobody looked (a spec launched without the lookup). */
export const VULKAN_NOT_LOOKED_UP: VulkanMatch = { index: null, reason: "Vulkan's device order was not looked up" };

const VIA_WORDS = { uuid: 'its UUID', 'pci-bus-id': 'its PCI bus id and name', name: 'its name, unique on both sides' } as const;

/** Loader variables that change which devices Vulkan lists, or their order. */
const VULKAN_LOADER_ENV = /^(VK_|MESA_VK_DEVICE_SELECT)/;

const ownOf = (profileEnv: Readonly<Record<string, string>>, name: string): string | undefined => (Object.hasOwn(profileEnv, name) ? profileEnv[name] : undefined);

/** The Vulkan half: the variable to set, and the clause for the note. */
function vulkanPart(vulkan: VulkanMatch, profileEnv: Readonly<Record<string, string>>): { env: Record<string, string>; said: string } {
  const own = ownOf(profileEnv, VULKAN_DEVICES_ENV);
  if (own !== undefined) return { env: {}, said: `a Vulkan build keeps the profile's own ${VULKAN_DEVICES_ENV}=${own}` };
  if (vulkan.index === null) return { env: {}, said: `a Vulkan build is not pinned (${vulkan.reason}) and runs on Vulkan's default device` };
  const loaderVariable = Object.keys(profileEnv).find((name) => VULKAN_LOADER_ENV.test(name));
  if (loaderVariable !== undefined) return { env: {}, said: `a Vulkan build is not pinned: the profile sets ${loaderVariable}, which can change Vulkan's device order (Vulkan device ${vulkan.index} without it); it runs on Vulkan's default device` };
  return { env: { [VULKAN_DEVICES_ENV]: String(vulkan.index) }, said: `a Vulkan build through ${VULKAN_DEVICES_ENV}=${vulkan.index} (Vulkan device ${vulkan.index}, matched by ${VIA_WORDS[vulkan.via]})` };
}

/** The environment that holds an engine of `engineKind` to the device `gpuKey`. `profileEnv`: the
 *  profile's own variables (kept where they name a device). `vulkan`: where the device is in
 *  Vulkan's order (see vulkan-match.ts), looked up by the caller. */
export function pinningFor(engineKind: EngineKind, gpuKey: string, profileEnv: Readonly<Record<string, string>> = {}, vulkan: VulkanMatch = VULKAN_NOT_LOOKED_UP): Pinning {
  const engine = ENGINE_WORDS[engineKind];
  switch (deviceKindOf(gpuKey)) {
    case 'cuda': {
      const vk = vulkanPart(vulkan, profileEnv);
      const own = ownOf(profileEnv, CUDA_DEVICES_ENV);
      if (own !== undefined && own !== gpuKey) {
        return { env: vk.env, note: `${engine} keeps the profile's own ${CUDA_DEVICES_ENV}=${own}; it joins the registry of ${gpuKey} all the same; ${vk.said}` };
      }
      return { env: { [CUDA_DEVICES_ENV]: gpuKey, ...vk.env }, note: `${engine} is pinned to ${gpuKey} through ${CUDA_DEVICES_ENV}; ${vk.said}` };
    }
    case 'gpu-without-uuid': {
      const vk = vulkanPart(vulkan, profileEnv);
      return { env: vk.env, note: `${engine} is not pinned for CUDA: ${gpuKey} has no UUID to name it by in ${CUDA_DEVICES_ENV}, and CUDA's numbering is not NVML's, so a CUDA build runs on its default device; ${vk.said}` };
    }
    case 'metal':
    case 'cpu':
      return { env: {}, note: null };
    case 'other':
      return { env: {}, note: `${engine} is not pinned: ${gpuKey} is not a GPU UUID; it runs on its default device and joins the registry of ${gpuKey}` };
  }
}

/** What the built-in engine says once node-llama-cpp has chosen its backend (`gpu`), from its own
 *  environment: null when nothing needs saying (not Vulkan; Vulkan pinned through
 *  GGML_VK_VISIBLE_DEVICES; no GPU meant, as on cpu-0). */
export function vulkanPinningWarning(gpu: string | false, env: Readonly<Record<string, string | undefined>>): string | null {
  if (gpu !== 'vulkan') return null;
  const vulkan = env[VULKAN_DEVICES_ENV];
  const cuda = env[CUDA_DEVICES_ENV];
  if ((vulkan !== undefined && vulkan !== '') || cuda === undefined || cuda === '') return null;
  return `node-llama-cpp chose Vulkan, which ${CUDA_DEVICES_ENV}=${cuda} does not pin, and its GPU was not matched to a Vulkan device (no ${VULKAN_DEVICES_ENV}; the launch's log says why): it runs on Vulkan's default device`;
}

/** A device as the choice sees it. */
export interface DeviceCandidate {
  key: string;
  /** What it could give a new engine now; null when unknown (no fresh sample, failed device). */
  freeBytes: number | null;
}

export interface DeviceChoiceInput {
  /** Asked for explicitly (the dialog's selector, `--gpu`): used as given. */
  requested?: string | null | undefined;
  /** The profile's preferred device: used while it is among the devices. */
  preferred?: string | null | undefined;
  /** The device selected in the header: used while it is among the devices. */
  selected?: string | null | undefined;
  /** In discovery order. */
  devices: readonly DeviceCandidate[];
}

export type DeviceChoiceReason = 'requested' | 'preferred' | 'selected' | 'most-free' | 'only';

export interface DeviceChoice {
  key: string;
  why: DeviceChoiceReason;
}

/** The device to launch on (see the header); null only when there is no device at all. */
export function chooseLaunchDevice(input: DeviceChoiceInput): DeviceChoice | null {
  const present = (key: string | null | undefined): key is string => key !== undefined && key !== null && input.devices.some((d) => d.key === key);
  if (input.requested !== undefined && input.requested !== null) return { key: input.requested, why: 'requested' };
  if (present(input.preferred)) return { key: input.preferred, why: 'preferred' };
  if (present(input.selected)) return { key: input.selected, why: 'selected' };
  if (input.devices.length === 1) return { key: input.devices[0]?.key ?? '', why: 'only' };
  let best: DeviceCandidate | null = null;
  for (const device of input.devices) {
    if (best === null || (device.freeBytes ?? -1) > (best.freeBytes ?? -1)) best = device;
  }
  return best === null ? null : { key: best.key, why: 'most-free' };
}
