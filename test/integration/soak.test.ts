/**
 * Two minutes of mixed requests against `gpu-share serve` (launch, stream, stop, kill, weight,
 * dry-run, state), on working profiles beside a broken one and one whose engine crashes as it
 * starts: capacity answers are counted apart from internal errors, which must be 0, and
 * nothing is left at the end. Longer runs: `npm run soak -- --minutes N`.
 */
import { expect, it } from 'vitest';
import { runSoak } from '../bench/soak.js';

it('soaks for 2 minutes with no internal error and nothing leaked', async () => {
  const result = await runSoak({ minutes: Number(process.env['GPU_SHARE_SOAK_MINUTES'] ?? '2'), seed: 1 });
  expect(result.errorSamples).toEqual([]);
  expect(result.internalErrors).toBe(0);
  expect(result.leaked).toEqual({ engines: 0, leaseBytes: 0, peers: 0, processes: 0 });
  // It did real work, and the device said no at least once.
  expect(result.ok).toBeGreaterThan(50);
  expect(result.capacity).toBeGreaterThan(0);
  expect(result.tokensStreamed).toBeGreaterThan(100);
}, 200_000);
