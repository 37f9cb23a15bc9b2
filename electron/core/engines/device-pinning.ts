/**
 * Which device an engine runs on, and how it is held there. Pure: the devices come in as data,
 * the choice and the environment go out as data.
 *
 * - The device: the one asked for (the Launch dialog, `launch --gpu`), else the profile's
 *   preferred one while it is present, else the one selected in the header, else the one with the
 *   most free memory (ties: discovery order).
 * - The pinning: an engine learns its device only from its environment at spawn. For a GPU that
 *   has a CUDA UUID (`GPU-…`, a MIG instance's `MIG-…`) that is `CUDA_VISIBLE_DEVICES=<UUID>`,
 *   for every engine kind: llama-server, llamafile and opencoti-llamafile are CUDA programs, a
 *   command engine is whatever it runs, and node-llama-cpp (the built-in engine) has no device
 *   option of its own. Vulkan numbers devices in its own order, which GPU Share has no way to
 *   learn (it never loads Vulkan), and NVML's index is not that order: a Vulkan build is left
 *   unpinned, and the launch says so. The host CPU (`cpu-0`) and Apple's one GPU (`metal-0`) need
 *   nothing beyond joining their registry.
 */
import type { EngineKind } from './profiles.js';

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

export function deviceKindOf(gpuKey: string): DeviceKind {
  if (/^(GPU|MIG)-/.test(gpuKey)) return 'cuda';
  if (/^gpu-[0-9a-f]{12}$/.test(gpuKey)) return 'gpu-without-uuid';
  if (gpuKey === 'metal-0') return 'metal';
  if (gpuKey === 'cpu-0') return 'cpu';
  return 'other';
}

export interface Pinning {
  /** Variables added to the engine's environment (the profile's own win over them). */
  env: Record<string, string>;
  /** One line for the log when the engine is not (or not wholly) held to the device; null when
   *  nothing needs saying. */
  note: string | null;
}

const ENGINE_WORDS: Readonly<Record<EngineKind, string>> = {
  builtin: 'the built-in engine (node-llama-cpp)',
  'llama-server': 'llama-server',
  llamafile: 'llamafile',
  'opencoti-llamafile': 'opencoti-llamafile',
  command: 'the command',
};

/** The environment that holds an engine of `engineKind` to the device `gpuKey`. `profileEnv`: the
 *  profile's own variables; a CUDA_VISIBLE_DEVICES set there is the user's choice and is kept. */
export function pinningFor(engineKind: EngineKind, gpuKey: string, profileEnv: Readonly<Record<string, string>> = {}): Pinning {
  const engine = ENGINE_WORDS[engineKind];
  switch (deviceKindOf(gpuKey)) {
    case 'cuda': {
      const own = Object.hasOwn(profileEnv, CUDA_DEVICES_ENV) ? profileEnv[CUDA_DEVICES_ENV] : undefined;
      if (own !== undefined && own !== gpuKey) {
        return { env: {}, note: `${engine} keeps the profile's own ${CUDA_DEVICES_ENV}=${own}; it joins the registry of ${gpuKey} all the same` };
      }
      return {
        env: { [CUDA_DEVICES_ENV]: gpuKey },
        note: `${engine} is pinned to ${gpuKey} through ${CUDA_DEVICES_ENV}; a Vulkan build of it is not pinned (GPU Share cannot learn Vulkan's device order) and runs on Vulkan's default device`,
      };
    }
    case 'gpu-without-uuid':
      return { env: {}, note: `${engine} is not pinned: ${gpuKey} has no UUID to name it by in ${CUDA_DEVICES_ENV}, and CUDA's numbering is not NVML's; it runs on its default device` };
    case 'metal':
    case 'cpu':
      return { env: {}, note: null };
    case 'other':
      return { env: {}, note: `${engine} is not pinned: ${gpuKey} is not a GPU UUID; it runs on its default device and joins the registry of ${gpuKey}` };
  }
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
