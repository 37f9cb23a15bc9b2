/** NVML on a real NVIDIA GPU: our device key and memory against nvidia-smi, a foreign CUDA
 *  llama-server in the planner's breakdown, REJECT_CAPACITY while a foreign process holds the
 *  memory and ADMIT after (test/fixtures/gpu-checks.ts, which scripts/gpu-check.sh runs too).
 *  Only where `nvidia-smi -L` lists a GPU; skipped with one line elsewhere, CI included. */
import { describe, expect, it } from 'vitest';
import { GPU_SKIP_LINE, realGpuPresent, runGpuChecks } from '../fixtures/gpu-checks.js';
import { findLlamaServer } from '../fixtures/llama-server.js';

const present = realGpuPresent();
if (!present) console.log(GPU_SKIP_LINE);

describe.skipIf(!present)('NVML on a real NVIDIA GPU', () => {
  it('agrees with nvidia-smi and plans on what the GPU holds', async () => {
    const checks = await runGpuChecks({ server: await findLlamaServer({ cuda: true }), log: (line) => console.log(line) });
    expect(checks.filter((c) => c.ok === false)).toEqual([]);
    expect(checks.filter((c) => c.ok === true).length).toBeGreaterThanOrEqual(3);
  }, 300_000);
});
