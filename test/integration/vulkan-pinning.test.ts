/**
 * Vulkan pinning end to end, with a fake Vulkan loader (test/fixtures/fake-vulkan) and the fake
 * libnvidia-ml: the real gpushare-vulkan-devices lists the fake's devices; `gpu-share serve` on the
 * fake NVML's two GPUs (same name, buses 01 and 02) launches a command engine on each, and each
 * engine finds in its own environment the index Vulkan gives its GPU — Vulkan lists a CPU device
 * first and the two GPUs in the reverse of NVML's order, so NVML's index would be wrong for both.
 * Without a loader nothing is pinned for Vulkan and the launch's log says why.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LaunchOutcome } from '../../electron/core/contract.js';
import { listVulkanDevices, vulkanListerCandidates } from '../../native/vulkan-devices.js';
import { buildFakeNvml, fakeUuid, writeFakeNvml } from '../fixtures/fake-nvml/build.js';
import { buildFakeVulkan, vulkanUuidOf, writeFakeVulkan, type FakeVulkanDevice } from '../fixtures/fake-vulkan/build.js';
import { CLI, exitOf, until } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, startServe, type Served } from '../fixtures/serve.js';

const GPU_NAME = 'NVIDIA Fake 24GB';
const UUIDS = [fakeUuid(process.pid * 16 + 5), fakeUuid(process.pid * 16 + 6)] as const;
const LLVMPIPE: FakeVulkanDevice = { name: 'llvmpipe (LLVM 15.0.6, 256 bits)', vendorId: 0x10005, deviceType: 4 };

let dir = '';
let vulkanLib = '';
let nvmlEnv: Record<string, string> = {};
const lister = vulkanListerCandidates().find((path) => existsSync(path));

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-vulkan-'));
  vulkanLib = buildFakeVulkan(join(dir, 'vulkan'));
  const nvmlJson = join(dir, 'nvml.json');
  writeFakeNvml(nvmlJson, {
    devices: [
      { uuid: UUIDS[0], name: GPU_NAME, total: 24 * 2 ** 30, used: 2 ** 30, processes: [], pciBusId: '00000000:01:00.0' },
      { uuid: UUIDS[1], name: GPU_NAME, total: 24 * 2 ** 30, used: 2 ** 30, processes: [], pciBusId: '00000000:02:00.0' },
    ],
  });
  nvmlEnv = { GPU_SHARE_NVML_LIB: buildFakeNvml(join(dir, 'nvml')), FAKE_NVML_JSON: nvmlJson, GPU_SHARE_SIM: '' };
}, 60_000);

afterAll(() => {
  for (const uuid of UUIDS) removeSegment(uuid);
  rmSync(dir, { recursive: true, force: true });
});

function devicesFile(name: string, devices: readonly FakeVulkanDevice[]): string {
  const file = join(dir, name);
  writeFakeVulkan(file, devices);
  return file;
}

describe('the Vulkan device lister against a fake loader', () => {
  it('is built beside the registry helper', () => {
    expect(lister, `tried ${vulkanListerCandidates().join(', ')}`).toBeDefined();
  });

  it('lists the devices in the loader\'s order with their PCI address and deviceUUID', async () => {
    const file = devicesFile('listed.txt', [
      LLVMPIPE,
      { name: GPU_NAME, vendorId: 0x10de, deviceType: 2, pci: '0000:02:00.0', uuid: vulkanUuidOf(UUIDS[1]) },
      { name: 'NVIDIA Old', vendorId: 0x10de, deviceType: 2 },
    ]);
    const listed = await listVulkanDevices({ env: { GPU_SHARE_VULKAN_LIB: vulkanLib, FAKE_VULKAN_DEVICES: file } });
    expect(listed).toEqual({
      available: true,
      devices: [
        { index: 0, name: LLVMPIPE.name, vendorId: 0x10005, deviceId: 0x2684, deviceType: 'cpu', pci: null, uuid: null },
        { index: 1, name: GPU_NAME, vendorId: 0x10de, deviceId: 0x2684, deviceType: 'discrete-gpu', pci: { domain: 0, bus: 2, device: 0, function: 0 }, uuid: vulkanUuidOf(UUIDS[1]) },
        { index: 2, name: 'NVIDIA Old', vendorId: 0x10de, deviceId: 0x2684, deviceType: 'discrete-gpu', pci: null, uuid: null },
      ],
    });
  });

  it('no loader, a failing vkCreateInstance, a hang and garbage are each "not available" with the reason', async () => {
    const file = devicesFile('one.txt', [LLVMPIPE]);
    expect(await listVulkanDevices({ env: { GPU_SHARE_VULKAN_LIB: join(dir, 'missing', 'libvulkan.so.1') } })).toEqual({ available: false, reason: expect.stringMatching(/^no Vulkan loader: .*missing\/libvulkan\.so\.1/) });
    // VK_ERROR_INCOMPATIBLE_DRIVER, what the real loader says without a driver.
    expect(await listVulkanDevices({ env: { GPU_SHARE_VULKAN_LIB: vulkanLib, FAKE_VULKAN_DEVICES: file, FAKE_VULKAN_CREATE: '-9' } })).toEqual({ available: false, reason: 'Vulkan instance creation failed: vkCreateInstance failed: VkResult -9' });
    const hangs = join(dir, 'hangs.sh');
    writeFileSync(hangs, '#!/bin/sh\nexec sleep 30\n', { mode: 0o755 });
    const started = Date.now();
    expect(await listVulkanDevices({ lister: hangs, timeoutMs: 300 })).toEqual({ available: false, reason: 'the Vulkan device lister did not answer within 0.3 s' });
    expect(Date.now() - started).toBeLessThan(10_000);
    const garbage = join(dir, 'garbage.sh');
    writeFileSync(garbage, '#!/bin/sh\necho \'{"index":0,"deviceName":"x"\'\n', { mode: 0o755 });
    expect(await listVulkanDevices({ lister: garbage })).toEqual({ available: false, reason: expect.stringContaining("the Vulkan device lister's output does not read: line 1 is not JSON") });
    const crashes = join(dir, 'crashes.sh');
    writeFileSync(crashes, '#!/bin/sh\nkill -SEGV $$\n', { mode: 0o755 });
    expect(await listVulkanDevices({ lister: crashes })).toEqual({ available: false, reason: 'the Vulkan device lister was ended by SIGSEGV' });
  });
});

/** A command engine that writes its environment to `file` and stays up. */
const ENV_WRITER = "require('node:fs').writeFileSync(process.argv[1], JSON.stringify(process.env)); setInterval(() => {}, 1000);";

/** The environment an engine wrote to `file`; null until it is there whole (the engine may be
 *  caught mid-write: a file that does not parse yet is read again). */
function writtenEnv(file: string): Record<string, string> | null {
  try {
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>) : null;
  } catch {
    return null;
  }
}

/** Its profile: a command profile is the local user's to make, so it is written before serve
 *  starts (over HTTP it would be refused). */
const envWriter = (id: string): object => ({ id, name: id, capabilities: ['env'], engineKind: 'command', command: process.execPath, args: ['-e', ENV_WRITER, join(dir, `${id}.env.json`)], contextSize: 256, priority: 'background' });

async function launchEnvWriter(served: Served, id: string, gpuKey: string): Promise<{ env: Record<string, string>; engineId: string }> {
  const file = join(dir, `${id}.env.json`);
  const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: id, gpuKey });
  expect(launched.status, JSON.stringify(launched.body)).toBe(202);
  const engineId = launched.body.engine?.id ?? '';
  const env = await until(() => writtenEnv(file), 20_000, `${id} writing its environment`);
  return { env, engineId };
}

describe('serve pins each engine to its GPU\'s index in Vulkan\'s order', () => {
  it('matched by PCI bus id: a CPU device first and the GPUs reversed give GPU 0 → Vulkan 2, GPU 1 → Vulkan 1', async () => {
    // deviceUUIDs of another driver (not the GPUs'), so that the bus id decides.
    const file = devicesFile('reversed.txt', [
      LLVMPIPE,
      { name: GPU_NAME, vendorId: 0x10de, deviceType: 2, pci: '0000:02:00.0', uuid: 'ffffffffffffffffffffffffffffff02' },
      { name: GPU_NAME, vendorId: 0x10de, deviceType: 2, pci: '0000:01:00.0', uuid: 'ffffffffffffffffffffffffffffff01' },
    ]);
    const served = await startServe({ dataDir: join(dir, 'data-bus'), profiles: [envWriter('env-a'), envWriter('env-b')], env: { ...nvmlEnv, GPU_SHARE_VULKAN_LIB: vulkanLib, FAKE_VULKAN_DEVICES: file } });
    try {
      const onA = await launchEnvWriter(served, 'env-a', UUIDS[0]);
      expect(onA.env['CUDA_VISIBLE_DEVICES']).toBe(UUIDS[0]);
      expect(onA.env['GGML_VK_VISIBLE_DEVICES']).toBe('2');
      const onB = await launchEnvWriter(served, 'env-b', UUIDS[1]);
      expect(onB.env['CUDA_VISIBLE_DEVICES']).toBe(UUIDS[1]);
      expect(onB.env['GGML_VK_VISIBLE_DEVICES']).toBe('1');
      const note = await until(() => served.log.find((l) => l.startsWith('env-a: ') && l.includes('GGML_VK_VISIBLE_DEVICES')), 5_000, 'the pinning note');
      expect(note).toContain(`pinned to ${UUIDS[0]} through CUDA_VISIBLE_DEVICES; a Vulkan build through GGML_VK_VISIBLE_DEVICES=2 (Vulkan device 2, matched by its PCI bus id and name)`);
      for (const id of [onA.engineId, onB.engineId]) expect((await call(served, 'POST', `/api/engines/${id}/stop`)).status).toBe(200);
    } finally {
      await served.stop();
    }
  }, 90_000);

  it('`gpu-share launch` pins the same way (the profile made through serve above)', async () => {
    const file = join(dir, 'env-b.env.json');
    rmSync(file, { force: true });
    const env = { ...process.env, ...nvmlEnv, GPU_SHARE_VULKAN_LIB: vulkanLib, FAKE_VULKAN_DEVICES: join(dir, 'reversed.txt') };
    const child = spawn(process.execPath, [CLI, 'launch', 'env-b', '--gpu', '1', '--data-dir', join(dir, 'data-bus')], { stdio: ['ignore', 'pipe', 'pipe'], env });
    const stderr: string[] = [];
    createInterface({ input: child.stderr }).on('line', (line) => stderr.push(line));
    try {
      const written = await until(() => writtenEnv(file), 20_000, 'env-b writing its environment');
      expect(written['CUDA_VISIBLE_DEVICES']).toBe(UUIDS[1]);
      expect(written['GGML_VK_VISIBLE_DEVICES']).toBe('1');
      expect(stderr.join('\n')).toContain('a Vulkan build through GGML_VK_VISIBLE_DEVICES=1 (Vulkan device 1, matched by its PCI bus id and name)');
    } finally {
      child.kill('SIGTERM');
      await exitOf(child);
    }
  }, 60_000);

  it('matched by deviceUUID where the driver reports the GPU\'s own', async () => {
    const file = devicesFile('uuids.txt', [
      { name: GPU_NAME, vendorId: 0x10de, deviceType: 2, pci: '0000:02:00.0', uuid: vulkanUuidOf(UUIDS[1]) },
      { name: GPU_NAME, vendorId: 0x10de, deviceType: 2, pci: '0000:01:00.0', uuid: vulkanUuidOf(UUIDS[0]) },
    ]);
    const served = await startServe({ dataDir: join(dir, 'data-uuid'), profiles: [envWriter('uuid-a')], env: { ...nvmlEnv, GPU_SHARE_VULKAN_LIB: vulkanLib, FAKE_VULKAN_DEVICES: file } });
    try {
      const onA = await launchEnvWriter(served, 'uuid-a', UUIDS[0]);
      expect(onA.env['GGML_VK_VISIBLE_DEVICES']).toBe('1');
      expect(served.log.find((l) => l.startsWith('uuid-a: '))).toContain('(Vulkan device 1, matched by its UUID)');
      expect((await call(served, 'POST', `/api/engines/${onA.engineId}/stop`)).status).toBe(200);
    } finally {
      await served.stop();
    }
  }, 90_000);

  it('without a Vulkan loader: CUDA pinned, Vulkan not, and the log says why', async () => {
    const served = await startServe({ dataDir: join(dir, 'data-none'), profiles: [envWriter('none-b')], env: { ...nvmlEnv, GPU_SHARE_VULKAN_LIB: join(dir, 'missing', 'libvulkan.so.1') } });
    try {
      const onB = await launchEnvWriter(served, 'none-b', UUIDS[1]);
      expect(onB.env['CUDA_VISIBLE_DEVICES']).toBe(UUIDS[1]);
      expect(onB.env['GGML_VK_VISIBLE_DEVICES']).toBeUndefined();
      const note = await until(() => served.log.find((l) => l.startsWith('none-b: ')), 5_000, 'the pinning note');
      expect(note).toMatch(/a Vulkan build is not pinned \(Vulkan's devices are not known: no Vulkan loader: .*\) and runs on Vulkan's default device/);
      expect((await call(served, 'POST', `/api/engines/${onB.engineId}/stop`)).status).toBe(200);
    } finally {
      await served.stop();
    }
  }, 90_000);
});
