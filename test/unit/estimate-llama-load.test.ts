/**
 * The estimator child stays up between estimates, so a failed load of llama.cpp must not be kept:
 * with it kept, every later estimate in that child failed at once, and the list of models on this
 * machine never learnt whether they fit.
 */
import { expect, it, vi } from 'vitest';

const loads = vi.hoisted(() => ({ calls: 0 }));
vi.mock('node-llama-cpp', () => ({
  LlamaLogLevel: { error: 'error' },
  readGgufFileInfo: async () => ({}),
  getLlama: async () => {
    loads.calls++;
    if (loads.calls === 1) throw new Error('the prebuilt binary did not load');
    return { dispose: async () => undefined };
  },
  GgufInsights: {
    from: async () => ({
      totalLayers: 4,
      trainContextSize: 512,
      estimateModelResourceRequirements: () => ({ gpuVram: 0, cpuRam: 1000 }),
      estimateContextResourceRequirements: ({ kvCacheKeyType }: { kvCacheKeyType: number }) => (kvCacheKeyType === 0 ? { gpuVram: 0, cpuRam: 300 } : { gpuVram: 0, cpuRam: 200 }),
    }),
  },
}));

const { estimateFromGguf } = await import('../../electron/core/planner/estimate.js');

it('loads llama.cpp again for the next estimate after a load failed', async () => {
  await expect(estimateFromGguf('/m.gguf', { contextSize: 512, gpuLayers: 0 })).rejects.toThrow('the prebuilt binary did not load');
  const estimate = await estimateFromGguf('/m.gguf', { contextSize: 512, gpuLayers: 0 });
  expect(loads.calls).toBe(2);
  expect(estimate).toMatchObject({ modelBytes: 1000, basis: 'cpuRam' });
});
