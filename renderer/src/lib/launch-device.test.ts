import { describe, expect, it } from 'vitest';
import { defaultLaunchDevice, deviceOptions, planDeviceName } from './launch-device.js';
import { deviceView, GiB, vramView } from '../test/fixtures.js';

const a = deviceView({ key: 'GPU-a', name: 'Sim A', vram: vramView({ totalBytes: 24 * GiB, freeBytes: 1 * GiB }) });
const b = deviceView({ key: 'GPU-b', name: 'Sim B', vram: vramView({ totalBytes: 24 * GiB, freeBytes: 20 * GiB }) });

describe('the launch device', () => {
  it("defaults to the profile's device while present, then the header's choice, then the core's choice", () => {
    const defaults = [
      { profileId: 'pinned', gpuKey: 'GPU-a', why: 'preferred' as const },
      { profileId: 'free', gpuKey: 'GPU-b', why: 'most-free' as const },
    ];
    expect(defaultLaunchDevice('pinned', 'GPU-b', defaults, [a, b])).toBe('GPU-a');
    expect(defaultLaunchDevice('free', 'GPU-a', defaults, [a, b])).toBe('GPU-a');
    expect(defaultLaunchDevice('free', null, defaults, [a, b])).toBe('GPU-b');
    // A header choice that is gone (its device left) does not count.
    expect(defaultLaunchDevice('free', 'GPU-gone', defaults, [a, b])).toBe('GPU-b');
    expect(defaultLaunchDevice('unknown', null, defaults, [a, b])).toBeNull();
    expect(defaultLaunchDevice('free', null, [], [])).toBeNull();
  });

  it('lists every device with its place, name and free memory, and names the one planned for', () => {
    expect(deviceOptions([a, b, deviceView({ key: 'GPU-c', name: 'Sim C', vram: null })]).map((o) => o.label)).toEqual(['GPU 0 "Sim A" · 1.00 GiB free', 'GPU 1 "Sim B" · 20.00 GiB free', 'GPU 2 "Sim C" · free memory not known']);
    expect(planDeviceName('GPU-b', [a, b])).toBe('GPU 1 "Sim B" [GPU-b]');
    expect(planDeviceName('GPU-x', [a, b])).toBe('GPU-x');
  });
});
