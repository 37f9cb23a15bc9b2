import { describe, expect, it } from 'vitest';
import { engineTreesOf, foldEngineTrees, treeMemberPids } from '../../electron/core/telemetry/engine-trees.js';
import { TelemetrySampler } from '../../electron/core/telemetry/sampler.js';
import type { DeviceSample, TelemetryProvider } from '../../electron/core/telemetry/types.js';

const GiB = 1024 ** 3;
const sample = (processes: DeviceSample['processes']): DeviceSample => ({
  key: 'GPU-a',
  name: 'GPU a',
  totalBytes: 24 * GiB,
  usedBytes: 10 * GiB,
  processes,
  utilizationPct: null,
  temperatureC: null,
  powerW: null,
  health: 'OK',
  sampledAtUs: 1,
  source: 'simulated',
});

describe('foldEngineTrees', () => {
  // Engine 100 is `gpu-share run` (no memory of its own) over a llama-server, 101; engine 200
  // holds memory itself and in a worker, 202; 300 is someone else's.
  const trees = new Map([
    [100, [100, 101]],
    [200, [200, 202]],
  ]);

  it("counts a child's memory as its engine's, sums a tree, and leaves other processes alone", () => {
    const folded = foldEngineTrees(sample([{ pid: 101, usedBytes: 3 * GiB }, { pid: 200, usedBytes: 1 * GiB }, { pid: 202, usedBytes: 2 * GiB }, { pid: 300, usedBytes: 4 * GiB }]), trees);
    expect(folded.processes).toEqual([{ pid: 300, usedBytes: 4 * GiB }, { pid: 100, usedBytes: 3 * GiB }, { pid: 200, usedBytes: 3 * GiB }]);
    expect(folded.usedBytes).toBe(10 * GiB);
  });

  it('changes nothing where the driver attributes no memory, or no engine runs', () => {
    const none = sample(null);
    expect(foldEngineTrees(none, trees)).toBe(none);
    const foreign = sample([{ pid: 300, usedBytes: 4 * GiB }]);
    expect(foldEngineTrees(foreign, trees)).toBe(foreign);
    expect(foldEngineTrees(foreign, new Map())).toBe(foreign);
  });

  it('counts a process in two trees once, for the first engine', () => {
    const folded = foldEngineTrees(sample([{ pid: 5, usedBytes: 1 * GiB }]), new Map([[1, [1, 5]], [2, [2, 5]]]));
    expect(folded.processes).toEqual([{ pid: 1, usedBytes: 1 * GiB }]);
  });

  it('reads the trees through the given walk and lists every member once', () => {
    const trees = engineTreesOf([7, 8], (pid) => (pid === 7 ? [7, 70, 71] : [8]));
    expect([...trees]).toEqual([[7, [7, 70, 71]], [8, [8]]]);
    expect(treeMemberPids(trees).sort((a, b) => a - b)).toEqual([7, 8, 70, 71]);
  });
});

describe('TelemetrySampler with engine trees', () => {
  it("keeps samples whose engines' trees are folded in, read before each sample", () => {
    let calls = 0;
    const provider: TelemetryProvider = { source: 'simulated', sample: () => [sample([{ pid: 101, usedBytes: 3 * GiB }])], close: () => undefined };
    const sampler = new TelemetrySampler({
      provider,
      wallUs: () => 1,
      engineTrees: () => {
        calls++;
        return new Map([[100, [100, 101]]]);
      },
    });
    sampler.tick();
    expect(calls).toBe(1);
    expect(sampler.latest('GPU-a')?.processes).toEqual([{ pid: 100, usedBytes: 3 * GiB }]);
  });
});
