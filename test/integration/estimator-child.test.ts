/** node-llama-cpp's GGUF parser runs in a child with a heap limit and a deadline (issue 32, item
 *  3): when it dies or hangs, the estimate is an error and this process goes on. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnEngineProcess } from '../../electron/core/engines/spawn.js';
import { childEstimator, EstimateError, ModelFileError } from '../../electron/core/planner/estimate.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { ROOT } from '../fixtures/procs.js';

/** The built script (vitest runs this module from its source). */
const hostPath = join(ROOT, 'dist', 'electron', 'core', 'planner', 'estimate-host.js');

let dir = '';
let tiny = '';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-estimator-'));
  tiny = join(dir, 'tiny.gguf');
  writeGguf(tiny, TINY_GGUF_SPEC);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('estimator child', () => {
  it('estimates in a child that stays up between estimates, one at a time', async () => {
    const estimator = childEstimator({ spawn: spawnEngineProcess, nodePath: process.execPath, hostPath });
    try {
      const [a, b] = await Promise.all([estimator(tiny, { contextSize: 256, gpuLayers: 0 }), estimator(tiny, { contextSize: 4096, gpuLayers: 0 })]);
      expect(a.peakBytes).toBeGreaterThan(0);
      expect(b.contextBytes).toBeGreaterThan(a.contextBytes);
    } finally {
      estimator.close();
    }
  }, 60_000);

  it('a child that runs out of its heap is MODEL_MALFORMED naming the limit, and this process goes on', async () => {
    // 8 MB cannot even hold node-llama-cpp's modules: the child dies the way a parser would on a
    // file that makes it allocate without bound.
    const starved = childEstimator({ spawn: spawnEngineProcess, nodePath: process.execPath, hostPath, heapMb: 8 });
    const error = await starved(tiny, { contextSize: 256, gpuLayers: 0 }).catch((e: unknown) => e);
    starved.close();
    expect(error).toBeInstanceOf(ModelFileError);
    expect((error as ModelFileError).problem.code).toBe('MODEL_MALFORMED');
    expect((error as Error).message).toMatch(/heap limit 8 MB/);
  }, 60_000);

  it('a child past its deadline is killed and the estimate says so', async () => {
    const hurried = childEstimator({ spawn: spawnEngineProcess, nodePath: process.execPath, hostPath, timeoutMs: 1 });
    const error = await hurried(tiny, { contextSize: 256, gpuLayers: 0 }).catch((e: unknown) => e);
    hurried.close();
    expect(error).toBeInstanceOf(EstimateError);
    expect((error as Error).message).toMatch(/took longer than 0.001 s and was stopped/);
  }, 60_000);
});
