/** The bounded GGUF header reader (issue 32, item 3): every count and length is checked against
 *  the file before anything is read or allocated, so the files are refused at once. */
import { describe, expect, it } from 'vitest';
import { bufferSource, GGUF_HEADER_MAX_BYTES, readGgufHeader } from '../../electron/core/planner/gguf-header.js';
import { ggufBytes, TINY_GGUF_SPEC } from '../fixtures/gguf.js';
import { hostileGgufFiles, mapHeader, mutateGguf } from '../fixtures/hostile-gguf.js';

describe('bounded GGUF header reader', () => {
  it('reads the fixture model: architecture, trained context, alignment, every tensor', async () => {
    const bytes = ggufBytes(TINY_GGUF_SPEC);
    const result = await readGgufHeader(bufferSource(bytes));
    if (!result.ok) throw new Error(result.problem.detail);
    expect(result.facts).toMatchObject({ version: 3, architecture: 'llama', trainContextSize: 256, alignment: 32 });
    expect(result.tensors).toHaveLength(result.facts.tensorCount);
    expect(result.facts.dataStartBytes % 32).toBe(0);
    expect(result.facts.headerBytes).toBe(mapHeader(bytes).end);
  });

  it.each(hostileGgufFiles().map((f) => [f.name, f.bytes] as const))('refuses %s with figures, without reading past the file', async (name, bytes) => {
    let readBytes = 0;
    const source = bufferSource(bytes);
    const read = async (buffer: Buffer, position: number): Promise<number> => {
      const n = await source.read(buffer, position);
      readBytes += n;
      return n;
    };
    const result = await readGgufHeader({ size: source.size, read });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problem.kind).toBe(name === 'nested-arrays' ? 'malformed' : 'truncated');
    if (name !== 'nested-arrays') expect(result.problem.neededBytes).toBeGreaterThan(bytes.length);
    expect(readBytes).toBeLessThanOrEqual(bytes.length);
    expect(result.problem.detail).not.toMatch(/hostile/); // figures and fixed words, not content
  });

  it('refuses a header that runs past 64 MiB without stepping through it', async () => {
    // A claimed string array that fits the (sparse, 100 MB) file but not the header cap.
    const head = Buffer.alloc(64);
    head.write('GGUF', 0, 'latin1');
    head.writeUInt32LE(3, 4);
    head.writeBigUInt64LE(0n, 8);
    head.writeBigUInt64LE(1n, 16);
    head.writeBigUInt64LE(1n, 24);
    head.write('k', 32, 'latin1');
    head.writeUInt32LE(9, 33);
    head.writeUInt32LE(8, 37);
    head.writeBigUInt64LE(BigInt(GGUF_HEADER_MAX_BYTES / 8), 41);
    const size = 100 * 1024 * 1024;
    const result = await readGgufHeader({ size, read: async (buffer, position) => (position < head.length ? head.copy(buffer, 0, position) : Math.min(buffer.length, size - position)) });
    expect(result).toMatchObject({ ok: false, problem: { kind: 'malformed' } });
    if (!result.ok) expect(result.problem.detail).toMatch(/past 67108864 bytes/);
  });

  it('2,000 seeded mutations of a real header: each is read or refused with a problem, never thrown', async () => {
    const valid = ggufBytes(TINY_GGUF_SPEC);
    const map = mapHeader(valid);
    const seen = { ok: 0, 'not-gguf': 0, truncated: 0, malformed: 0 };
    for (let seed = 1; seed <= 2000; seed++) {
      const { bytes } = mutateGguf(valid, map, seed);
      const result = await readGgufHeader(bufferSource(bytes));
      seen[result.ok ? 'ok' : result.problem.kind]++;
    }
    expect(seen.truncated).toBeGreaterThan(0);
    expect(seen.malformed).toBeGreaterThan(0);
    expect(seen.ok + seen['not-gguf'] + seen.truncated + seen.malformed).toBe(2000);
  }, 60_000);
});
