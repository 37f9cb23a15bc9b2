import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ggufBytes, ggufTensors, writeGguf, type GgufSpec } from '../fixtures/gguf.js';

const dir = mkdtempSync(join(tmpdir(), 'gguf-sparse-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sparse GGUF', () => {
  const spec: GgufSpec = { embedding: 64, layers: 2, contextLength: 256, feedForward: 128, heads: 4, vocab: 512, type: 'f16' };

  it('is the dense file with zeros for weights: same header, same norms, same size', () => {
    const path = join(dir, 'small.gguf');
    const { bytes } = writeGguf(path, spec, { sparse: true });
    const dense = ggufBytes(spec);
    const sparse = readFileSync(path);
    expect(bytes).toBe(dense.length);
    expect(sparse.length).toBe(dense.length);
    const tensors = ggufTensors(spec);
    const dataStart = dense.length - ((tensors.at(-1)?.offset ?? 0) + (tensors.at(-1)?.bytes ?? 0));
    expect(sparse.subarray(0, dataStart).equals(dense.subarray(0, dataStart))).toBe(true);
    for (const t of tensors) {
      const at = dataStart + t.offset;
      const got = sparse.subarray(at, at + t.bytes);
      if (t.fill === 'ones') expect(got.equals(dense.subarray(at, at + t.bytes))).toBe(true);
      else expect(got.every((b) => b === 0)).toBe(true);
    }
  });

  it('claims gigabytes in a moment and takes almost no disk', () => {
    const path = join(dir, 'big.gguf');
    const started = performance.now();
    const { bytes } = writeGguf(path, { embedding: 4096, layers: 6, contextLength: 4096, feedForward: 11008, heads: 32, vocab: 512, type: 'f16' }, { sparse: true });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(bytes).toBeGreaterThan(2e9);
    const stat = statSync(path);
    expect(stat.size).toBe(bytes);
    expect(stat.blocks * 512).toBeLessThan(bytes / 100);
  });
});
