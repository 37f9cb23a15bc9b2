/** Which tests need a real NVIDIA GPU, decided the same way everywhere: `nvidia-smi -L` lists a GPU
 *  and NVML, through our binding, reports one. The fake libnvidia-ml alone never turns them on. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFakeNvml, fakeUuid, writeFakeNvml } from '../fixtures/fake-nvml/build.js';
import { realGpuPresent } from '../fixtures/gpu-checks.js';

let dir = '';
let lib = '';
let nvidiaSmi = '';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-gpu-gate-'));
  lib = buildFakeNvml(dir, 'full');
  const json = join(dir, 'fake.json');
  writeFakeNvml(json, { devices: [{ uuid: fakeUuid(1), name: 'NVIDIA Fake', total: 8 << 30, used: 1 << 28, processes: [] }] });
  process.env['FAKE_NVML_JSON'] = json;
  nvidiaSmi = join(dir, 'nvidia-smi');
  writeFileSync(nvidiaSmi, `#!/bin/sh\n[ "$1" = -L ] && echo "GPU 0: NVIDIA Fake (UUID: ${fakeUuid(1)})"\n`, { mode: 0o755 });
});

afterAll(() => {
  delete process.env['FAKE_NVML_JSON'];
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(process.platform !== 'linux')('the GPU tests’ gate', () => {
  it('opens where nvidia-smi lists a GPU and NVML reports one', () => {
    expect(realGpuPresent({ nvidiaSmi, env: { GPU_SHARE_NVML_LIB: lib } })).toBe(true);
  });

  it('stays shut without nvidia-smi, even with a (fake) libnvidia-ml that reports a GPU', () => {
    expect(realGpuPresent({ nvidiaSmi: join(dir, 'no-nvidia-smi'), env: { GPU_SHARE_NVML_LIB: lib } })).toBe(false);
  });

  it('stays shut when nvidia-smi lists a GPU but no NVML library loads', () => {
    expect(realGpuPresent({ nvidiaSmi, env: { GPU_SHARE_NVML_LIB: join(dir, 'missing-libnvidia-ml.so.1') } })).toBe(false);
  });

  it('stays shut when nvidia-smi fails (a driver that is not loaded)', () => {
    const failing = join(dir, 'nvidia-smi-failing');
    writeFileSync(failing, '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2\nexit 9\n', { mode: 0o755 });
    expect(realGpuPresent({ nvidiaSmi: failing, env: { GPU_SHARE_NVML_LIB: lib } })).toBe(false);
  });
});
