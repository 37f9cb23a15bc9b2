/** The GGUF fixture writer against node-llama-cpp: its GGUF reader reads the metadata and tensor
 *  infos back, llama.cpp (CPU prebuilt, never built or downloaded) loads the models and generates,
 *  and GgufInsights gives sane resource estimates. */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GgmlType, GgufInsights, LlamaLogLevel, getLlama, readGgufFileInfo, type Llama, type Token } from 'node-llama-cpp';
import {
  GGUF_MIN_VOCAB,
  TINY_GGUF_SPEC,
  dequantizeQ8_0,
  f16ToF32,
  f32ToF16,
  ggufBytes,
  ggufTensors,
  ggufVocabulary,
  quantizeQ8_0,
  writeGguf,
  type GgufSpec,
  type GgufTensorType,
} from '../fixtures/gguf.js';
import { parseMakeModelArgs } from '../../electron/core/models/make-model.js';

const GGML: Record<GgufTensorType, GgmlType> = { f32: GgmlType.F32, f16: GgmlType.F16, q8_0: GgmlType.Q8_0 };

let dir = '';
const llamaLogs: string[] = [];
let llamaPromise: Promise<Llama> | undefined;

/** One CPU-only Llama for the file: the linux-x64 prebuilt, never a build from source or a download. */
function cpuLlama(): Promise<Llama> {
  llamaPromise ??= getLlama({
    gpu: false,
    build: 'never',
    skipDownload: true,
    usePrebuiltBinaries: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.warn,
    logger: (level, message) => llamaLogs.push(`${level}: ${message}`),
  });
  return llamaPromise;
}

function model(name: string, spec: Partial<GgufSpec> = {}): { path: string; spec: GgufSpec } {
  const full: GgufSpec = { ...TINY_GGUF_SPEC, ...spec };
  const path = join(dir, `${name}.gguf`);
  const { bytes } = writeGguf(path, full);
  expect(statSync(path).size).toBe(bytes);
  return { path, spec: full };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gguf-test-'));
});

afterAll(async () => {
  if (llamaPromise !== undefined) await (await llamaPromise).dispose();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('gguf writer', () => {
  it('converts float to half with round-to-nearest-even', () => {
    const cases: Array<[number, number]> = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [0.1, 0x2e66],
      [65504, 0x7bff],
      [65519, 0x7bff], // just below the rounding boundary to infinity
      [65520, 0x7c00],
      [Number.POSITIVE_INFINITY, 0x7c00],
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // a tie, rounds to even (0)
      [3 * 2 ** -25, 0x0002], // a tie, rounds to even (2)
      [2 ** -14, 0x0400], // smallest normal
      [1 + 2 ** -11, 0x3c00], // a tie, rounds to even
      [1 + 3 * 2 ** -11, 0x3c02], // a tie, rounds to even (up)
    ];
    for (const [value, half] of cases) expect([value, f32ToF16(value)]).toEqual([value, half]);
    expect(f32ToF16(Number.NaN) & 0x7c00).toBe(0x7c00);
    expect(f32ToF16(Number.NaN) & 0x3ff).not.toBe(0);
    for (let h = 0; h < 0x7c00; h += 7) expect(f32ToF16(f16ToF32(h))).toBe(h);
  });

  it('quantizes q8_0 blocks within half a step', () => {
    const x = new Float32Array(64);
    for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 1.7) * (i < 32 ? 0.05 : 3);
    const out = Buffer.alloc(68);
    quantizeQ8_0(x, out);
    const back = dequantizeQ8_0(out, 64);
    for (let i = 0; i < x.length; i++) {
      const d = f16ToF32(out.readUInt16LE(i < 32 ? 0 : 34));
      expect(Math.abs((back[i] ?? 0) - (x[i] ?? 0))).toBeLessThanOrEqual(d * 0.5 + 1e-3 * d + Math.abs(x[i] ?? 0) * 1e-3);
    }
    expect(() => quantizeQ8_0(new Float32Array(48), Buffer.alloc(100))).toThrow(/multiple of 32/);
  });

  it('builds a distinct SPM vocabulary and rejects bad specs', () => {
    const vocab = ggufVocabulary(TINY_GGUF_SPEC.vocab);
    expect(vocab.tokens).toHaveLength(512);
    expect(new Set(vocab.tokens).size).toBe(512);
    expect(vocab.tokens.slice(0, 5)).toEqual(['<unk>', '<s>', '</s>', '<0x00>', '<0x01>']);
    expect(vocab.tokens[258]).toBe('<0xFF>');
    expect(vocab.tokens).toContain('▁the');
    expect(vocab.tokenTypes.slice(0, 4)).toEqual([2, 3, 3, 6]);
    expect(vocab.scores).toHaveLength(512);
    expect(() => ggufBytes({ ...TINY_GGUF_SPEC, embedding: 48 })).toThrow(/q8_0 needs ne0 to be a multiple of 32, but embedding is 48/);
    expect(() => ggufBytes({ ...TINY_GGUF_SPEC, feedForward: 100 })).toThrow(/feedForward is 100/);
    expect(() => ggufBytes({ ...TINY_GGUF_SPEC, embedding: 66, type: 'f16' })).toThrow(/multiple of heads/);
    expect(() => ggufBytes({ ...TINY_GGUF_SPEC, headsKv: 3 })).toThrow(/headsKv/);
    expect(() => ggufBytes({ ...TINY_GGUF_SPEC, vocab: GGUF_MIN_VOCAB - 1 })).toThrow(/vocab must be >=/);
    expect(() => writeGguf(join(dir, 'never.gguf'), { ...TINY_GGUF_SPEC, layers: 0 })).toThrow(/layers must be a positive integer/);
    expect(() => statSync(join(dir, 'never.gguf'))).toThrow();
  });

  it('parses make-model arguments with the tiny model as defaults', () => {
    expect(parseMakeModelArgs(['/tmp/x.gguf'])).toEqual({ out: '/tmp/x.gguf', spec: { ...TINY_GGUF_SPEC } });
    // `npm run make-model -- x.gguf` writes where the user was (npm's INIT_CWD), not in the clone.
    expect(parseMakeModelArgs(['x.gguf'], '/home/me/models').out).toBe('/home/me/models/x.gguf');
    const { spec } = parseMakeModelArgs(['m.gguf', '--embedding', '1024', '--layers', '12', '--ctx', '4096', '--ff', '2816', '--heads', '16', '--heads-kv', '4', '--vocab', '32000', '--type', 'f16', '--seed', '3']);
    expect(spec).toEqual({ embedding: 1024, layers: 12, contextLength: 4096, feedForward: 2816, heads: 16, headsKv: 4, vocab: 32000, type: 'f16', seed: 3 });
    expect(() => parseMakeModelArgs(['m.gguf', '--type', 'q4_0'])).toThrow(/--type/);
    expect(() => parseMakeModelArgs([])).toThrow(/usage/);
  });

  it('streams the same bytes it builds in memory, deterministically per seed', () => {
    const { path, spec } = model('same', { seed: 7 });
    const file = readFileSync(path);
    expect(file.equals(ggufBytes(spec))).toBe(true);
    expect(file.subarray(0, 4).toString('latin1')).toBe('GGUF');
    expect(file.readUInt32LE(4)).toBe(3);
    expect(ggufBytes({ ...spec, seed: 8 }).equals(file)).toBe(false);
  });
});

describe('readGgufFileInfo', () => {
  for (const type of ['f32', 'q8_0'] as const) {
    it(`reads a tiny ${type} model back`, async () => {
      const { path, spec } = model(`tiny-${type}`, { type });
      const info = await readGgufFileInfo(path, { sourceType: 'filesystem' });
      expect(info.version).toBe(3);
      expect(info.metadata.general.architecture).toBe('llama');
      expect(info.metadata.general.name).toBe('gguf-fixture');
      expect(info.metadata.general.alignment).toBe(32);
      expect(info.metadata.general.file_type).toBe(type === 'f32' ? 0 : 7);
      const arch = info.architectureMetadata;
      expect(arch.block_count).toBe(2);
      expect(arch.embedding_length).toBe(64);
      expect(arch.context_length).toBe(256);
      expect(arch.feed_forward_length).toBe(128);
      expect(arch.attention?.head_count).toBe(4);
      expect(arch.attention?.head_count_kv).toBe(4);
      expect(arch.attention?.layer_norm_rms_epsilon).toBeCloseTo(1e-5, 9);
      expect(arch.rope?.dimension_count).toBe(16);
      expect(info.metadata.tokenizer.ggml.model).toBe('llama');
      expect(info.metadata.tokenizer.ggml.tokens).toHaveLength(spec.vocab);
      expect(info.metadata.tokenizer.ggml.bos_token_id).toBe(1);
      expect(info.metadata.tokenizer.ggml.eos_token_id).toBe(2);

      const plan = ggufTensors(spec);
      expect(Number(info.tensorCount)).toBe(3 + 9 * spec.layers);
      const tensors = info.tensorInfo ?? [];
      expect(tensors.map((t) => ({ name: t.name, dims: t.dimensions.map(Number), type: t.ggmlType, offset: Number(t.offset) }))).toEqual(
        plan.map((t) => ({ name: t.name, dims: t.dims, type: GGML[t.type], offset: t.offset })),
      );
      expect(tensors.find((t) => t.name === 'blk.1.ffn_down.weight')?.dimensions.map(Number)).toEqual([128, 64]);
      expect(tensors.find((t) => t.name === 'blk.0.attn_norm.weight')?.ggmlType).toBe(GgmlType.F32);
      for (const t of tensors) expect(Number(t.fileOffset) % 32).toBe(0);
      const last = plan[plan.length - 1];
      expect(statSync(path).size).toBe((info.infoEndOffset ?? 0) + (last?.offset ?? 0) + (last?.bytes ?? 0));
    });
  }
});

describe('node-llama-cpp on the CPU', () => {
  for (const [type, extra] of [
    ['q8_0', {}],
    ['f16', { headsKv: 2 }],
  ] as const) {
    it(`loads a tiny ${type} model and generates`, async () => {
      const { path } = model(`gen-${type}`, { type, ...extra });
      const llama = await cpuLlama();
      expect(llama.gpu).toBe(false);
      const loaded = await llama.loadModel({ modelPath: path });
      try {
        expect(loaded.trainContextSize).toBe(256);
        const context = await loaded.createContext({ contextSize: 128, threads: 1 });
        try {
          const sequence = context.getSequence();
          const prompt = loaded.tokenize('the model');
          expect(prompt.length).toBeGreaterThan(0);
          const generated: Token[] = [];
          for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
            generated.push(token);
            if (generated.length >= 4) break;
          }
          expect(generated.length).toBeGreaterThanOrEqual(1);
          for (const token of generated) expect(token).toBeLessThan(512);
          expect(llamaLogs.filter((line) => line.startsWith(`${LlamaLogLevel.error}:`))).toEqual([]);
        } finally {
          await context.dispose();
        }
      } finally {
        await loaded.dispose();
      }
    });
  }
});

describe('GgufInsights', () => {
  it('estimates finite positive resources that grow with the context size', async () => {
    const { path } = model('insights');
    const llama = await cpuLlama();
    const info = await readGgufFileInfo(path, { sourceType: 'filesystem' });
    const insights = await GgufInsights.from(info, llama);
    expect(insights.totalLayers).toBe(3); // block_count + 1 (the output layer)
    expect(insights.trainContextSize).toBe(256);
    const weights = insights.estimateModelResourceRequirements({ gpuLayers: 0 });
    expect(Number.isFinite(weights.cpuRam) && weights.cpuRam > 0).toBe(true);
    expect(weights.gpuVram).toBe(0);
    const sizes = [128, 256, 1024].map((contextSize) => insights.estimateContextResourceRequirements({ contextSize, modelGpuLayers: 0 }));
    for (const r of sizes) {
      expect(Number.isFinite(r.cpuRam) && r.cpuRam > 0).toBe(true);
      expect(Number.isFinite(r.gpuVram) && r.gpuVram >= 0).toBe(true);
    }
    const [small, medium, large] = sizes.map((r) => r.cpuRam + r.gpuVram);
    expect(medium).toBeGreaterThan(small ?? Number.POSITIVE_INFINITY);
    expect(large).toBeGreaterThan(medium ?? Number.POSITIVE_INFINITY);
  });
});
