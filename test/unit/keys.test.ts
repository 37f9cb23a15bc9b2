import { describe, expect, it } from 'vitest';
import { chooseGpuKey, unknownKeyNote } from '../../electron/core/registry/keys.js';

const DEVICES = [
  { index: 0, key: 'GPU-aaaa', name: 'NVIDIA A' },
  { index: 1, key: 'GPU-bbbb', name: 'NVIDIA B' },
];

describe('chooseGpuKey', () => {
  it('uses --gpu-key as given, else --gpu N, else the first device', () => {
    expect(chooseGpuKey({ gpuKey: 't-mine' }, DEVICES)).toEqual({ ok: true, value: 't-mine' });
    expect(chooseGpuKey({ gpu: 1 }, DEVICES)).toEqual({ ok: true, value: 'GPU-bbbb' });
    expect(chooseGpuKey({}, DEVICES)).toEqual({ ok: true, value: 'GPU-aaaa' });
  });

  it('names the devices when --gpu N is out of range, and asks for a key when there is none', () => {
    expect(chooseGpuKey({ gpu: 2 }, DEVICES)).toEqual({ ok: false, message: '--gpu 2: there is no device 2 (devices: 0: GPU-aaaa (NVIDIA A), 1: GPU-bbbb (NVIDIA B))' });
    expect(chooseGpuKey({}, [])).toEqual({ ok: false, message: 'telemetry found no device; give --gpu-key' });
  });
});

describe('unknownKeyNote', () => {
  it('is silent for a device key or a key with a segment, and lists the known ones otherwise', () => {
    expect(unknownKeyNote('GPU-bbbb', DEVICES, [])).toBeNull();
    expect(unknownKeyNote('t-x', DEVICES, ['t-x'])).toBeNull();
    expect(unknownKeyNote('GPU-typo', DEVICES, ['GPU-aaaa', 't-x'])).toBe(
      'no device has the key GPU-typo and no registry exists for it yet; devices: 0: GPU-aaaa (NVIDIA A), 1: GPU-bbbb (NVIDIA B); other registries: t-x',
    );
  });
});
