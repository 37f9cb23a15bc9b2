import { describe, expect, it } from 'vitest';
import { defaultLaunchDevice, deviceOptions, planDeviceName } from './launch-device.js';
import { deviceView, GiB, vramView } from '../test/fixtures.js';

const a = deviceView({ key: 'GPU-a', name: 'Sim A', vram: vramView({ totalBytes: 24 * GiB, freeBytes: 1 * GiB }) });
const b = deviceView({ key: 'GPU-b', name: 'Sim B', vram: vramView({ totalBytes: 24 * GiB, freeBytes: 20 * GiB }) });

describe('the launch device', () => {
  it("defaults to the profile's device while present, then the header's choice, then the most free memory", () => {
    expect(defaultLaunchDevice({ gpuKey: 'GPU-a' }, 'GPU-b', [a, b])).toBe('GPU-a');
    expect(defaultLaunchDevice({ gpuKey: 'GPU-gone' }, 'GPU-a', [a, b])).toBe('GPU-a');
    expect(defaultLaunchDevice({ gpuKey: null }, null, [a, b])).toBe('GPU-b');
    expect(defaultLaunchDevice({ gpuKey: null }, null, [])).toBeNull();
  });

  it('lists every device with its place, name and free memory, and names the one planned for', () => {
    expect(deviceOptions([a, b, deviceView({ key: 'GPU-c', name: 'Sim C', vram: null })]).map((o) => o.label)).toEqual(['GPU 0 "Sim A" · 1.00 GiB free', 'GPU 1 "Sim B" · 20.00 GiB free', 'GPU 2 "Sim C" · free memory not known']);
    expect(planDeviceName('GPU-b', [a, b])).toBe('GPU 1 "Sim B" [GPU-b]');
    expect(planDeviceName('GPU-x', [a, b])).toBe('GPU-x');
  });
});
