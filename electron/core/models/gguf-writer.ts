/** A GGUF v3 writer for tiny (or not so tiny) random `llama` models with an SPM vocabulary, so that
 *  tests, and anyone trying GPU Share (`npm run make-model`), can load real model files in llama.cpp
 *  without downloading any. Random weights: what such a model says is gibberish.
 *
 *  Layout (ggml docs/gguf.md): magic "GGUF", u32 version 3, u64 tensor_count, u64 kv_count, the
 *  key/value pairs, the tensor infos (name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml
 *  type, u64 offset relative to the data section), padding up to `general.alignment`, then the
 *  tensor data, each tensor starting at an aligned offset. Everything is little-endian.
 *
 *  Weights are N(0, 0.02) from a seeded PRNG (norm weights are 1.0, always f32); q8_0 follows
 *  ggml's quantize_row_q8_0_ref: blocks of 32 values, an f16 scale d = max|x| / 127 and 32 int8
 *  quants round(x / d), 34 bytes a block. `writeGguf` streams tensor by tensor (in row chunks) to
 *  the file, so a ~130 MB model takes a few seconds and little memory. */
import { closeSync, ftruncateSync, openSync, writeSync } from 'node:fs';
import { endianness } from 'node:os';
import { seededRandom } from './seeded-random.js';

export type GgufTensorType = 'f32' | 'f16' | 'q8_0';

export interface GgufSpec {
  /** n_embd; must be a multiple of `heads` (and of 32 for q8_0). */
  embedding: number;
  /** block_count. */
  layers: number;
  /** llama.context_length (the training context). */
  contextLength: number;
  /** n_ff; a multiple of 32 for q8_0. */
  feedForward: number;
  heads: number;
  /** Defaults to `heads`; must divide `heads`. */
  headsKv?: number;
  /** Number of tokens, at least GGUF_MIN_VOCAB. */
  vocab: number;
  /** Type of the 2-D weights; norm weights are always f32. */
  type: GgufTensorType;
  /** PRNG seed of the weights (default 1). */
  seed?: number;
  /** general.name (default "gguf-fixture"). */
  name?: string;
}

/** The tiny model the tests use (and make-model's defaults). */
export const TINY_GGUF_SPEC: Readonly<GgufSpec> = Object.freeze({
  embedding: 64,
  layers: 2,
  contextLength: 256,
  feedForward: 128,
  heads: 4,
  vocab: 512,
  type: 'q8_0',
});

export const GGUF_ALIGNMENT = 32;

/** ggml_type ids. */
export const GGML_TYPE: Readonly<Record<GgufTensorType, number>> = Object.freeze({ f32: 0, f16: 1, q8_0: 8 });
/** llama_ftype ids for general.file_type (LLAMA_FTYPE_ALL_F32, _MOSTLY_F16, _MOSTLY_Q8_0). */
export const GGUF_FILE_TYPE: Readonly<Record<GgufTensorType, number>> = Object.freeze({ f32: 0, f16: 1, q8_0: 7 });

/** llama.cpp's llama_token_type values (tokenizer.ggml.token_type). */
export const TOKEN_TYPE = Object.freeze({ normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 });

const QK8_0 = 32;
const Q8_0_BLOCK_BYTES = 2 + QK8_0;
const WEIGHT_STD = 0.02;

/** GGUF metadata value types (gguf_type). */
const GT = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10 } as const;

/** Pieces after <unk>, <s>, </s> and the 256 byte tokens that every vocabulary has. */
const BASIC_PIECES: readonly string[] = (() => {
  const letters = 'abcdefghijklmnopqrstuvwxyz'.split('');
  const pieces = ['▁'];
  for (const l of letters) pieces.push(`▁${l}`, l);
  for (let d = 0; d <= 9; d++) pieces.push(String(d));
  pieces.push('.', ',', '!', '?', "'", '-');
  return pieces;
})();

const COMMON_WORDS = ['the', 'of', 'and', 'to', 'in', 'is', 'it', 'that', 'was', 'for', 'on', 'are', 'with', 'as', 'be', 'at', 'this', 'have', 'from', 'or', 'one', 'by', 'not', 'but', 'what', 'all', 'were', 'when', 'we', 'there', 'can', 'an', 'your', 'which', 'their', 'said', 'if', 'do', 'will', 'each', 'about', 'how', 'up', 'out', 'them', 'then', 'she', 'many', 'some', 'so', 'these', 'would', 'other', 'into', 'has', 'more', 'her', 'two', 'like', 'him', 'see', 'time', 'could', 'no', 'make', 'than', 'first', 'been', 'its', 'who', 'now', 'people', 'my', 'made', 'over', 'did', 'down', 'only', 'way', 'find', 'use', 'may', 'water', 'long', 'little', 'very', 'after', 'words', 'called', 'just', 'where', 'most', 'know', 'hello', 'world', 'model', 'token'];

/** <unk>, <s>, </s>, <0x00>..<0xFF> and the basic pieces: the smallest vocabulary accepted. */
export const GGUF_MIN_VOCAB = 3 + 256 + BASIC_PIECES.length;

export interface GgufVocabulary {
  tokens: string[];
  scores: number[];
  tokenTypes: number[];
}

/** The SPM vocabulary of `size` distinct tokens: control tokens, byte tokens, basic pieces, common
 *  words (with and without ▁), then every a–z string by length. Scores fall with the index. */
export function ggufVocabulary(size: number): GgufVocabulary {
  if (!Number.isInteger(size) || size < GGUF_MIN_VOCAB) throw new Error(`gguf: vocab must be an integer >= ${GGUF_MIN_VOCAB}, got ${size}`);
  const tokens = ['<unk>', '<s>', '</s>'];
  const tokenTypes: number[] = [TOKEN_TYPE.unknown, TOKEN_TYPE.control, TOKEN_TYPE.control];
  const scores = [0, 0, 0];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    tokenTypes.push(TOKEN_TYPE.byte);
    scores.push(0);
  }
  const seen = new Set<string>(tokens);
  const add = (piece: string): void => {
    if (tokens.length >= size || seen.has(piece)) return;
    seen.add(piece);
    scores.push(-(tokens.length - 258));
    tokens.push(piece);
    tokenTypes.push(TOKEN_TYPE.normal);
  };
  for (const p of BASIC_PIECES) add(p);
  for (const w of COMMON_WORDS) {
    add(`▁${w}`);
    add(w);
  }
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  for (let length = 2; tokens.length < size; length++) {
    const count = letters.length ** length;
    for (let i = 0; i < count && tokens.length < size; i++) {
      let s = '';
      for (let j = 0, n = i; j < length; j++, n = Math.floor(n / letters.length)) s = letters[n % letters.length] + s;
      add(`▁${s}`);
      add(s);
    }
  }
  return { tokens, scores, tokenTypes };
}

export interface GgufTensorPlan {
  name: string;
  /** ne0 (contiguous) first, as GGUF lists them. */
  dims: number[];
  type: GgufTensorType;
  /** 'ones' for norm weights, 'random' for N(0, 0.02). */
  fill: 'ones' | 'random';
  /** Byte offset relative to the data section (aligned). */
  offset: number;
  bytes: number;
}

export function tensorBytes(type: GgufTensorType, elements: number): number {
  switch (type) {
    case 'f32':
      return elements * 4;
    case 'f16':
      return elements * 2;
    case 'q8_0':
      return (elements / QK8_0) * Q8_0_BLOCK_BYTES;
  }
}

const alignUp = (n: number, a: number = GGUF_ALIGNMENT): number => Math.ceil(n / a) * a;

function validateSpec(spec: GgufSpec): Required<GgufSpec> {
  const positive = ['embedding', 'layers', 'contextLength', 'feedForward', 'heads', 'vocab'] as const;
  for (const key of positive) {
    const v = spec[key];
    if (!Number.isInteger(v) || v <= 0) throw new Error(`gguf: ${key} must be a positive integer, got ${v}`);
  }
  const headsKv = spec.headsKv ?? spec.heads;
  if (!Number.isInteger(headsKv) || headsKv <= 0 || spec.heads % headsKv !== 0) throw new Error(`gguf: headsKv must be a positive integer dividing heads (${spec.heads}), got ${headsKv}`);
  if (spec.embedding % spec.heads !== 0) throw new Error(`gguf: embedding (${spec.embedding}) must be a multiple of heads (${spec.heads})`);
  if (!(spec.type in GGML_TYPE)) throw new Error(`gguf: type must be f32, f16 or q8_0, got ${String(spec.type)}`);
  if (spec.type === 'q8_0') {
    for (const key of ['embedding', 'feedForward'] as const) {
      if (spec[key] % QK8_0 !== 0) throw new Error(`gguf: q8_0 needs ne0 to be a multiple of ${QK8_0}, but ${key} is ${spec[key]}`);
    }
  }
  if (spec.vocab < GGUF_MIN_VOCAB) throw new Error(`gguf: vocab must be >= ${GGUF_MIN_VOCAB} (3 control + 256 byte tokens + ${BASIC_PIECES.length} basic pieces), got ${spec.vocab}`);
  const seed = spec.seed ?? 1;
  if (!Number.isInteger(seed)) throw new Error(`gguf: seed must be an integer, got ${seed}`);
  return { ...spec, headsKv, seed, name: spec.name ?? 'gguf-fixture' };
}

/** The tensors of `spec`, llama naming, with their aligned offsets in the data section. */
export function ggufTensors(spec: GgufSpec): GgufTensorPlan[] {
  const s = validateSpec(spec);
  const kvDim = (s.embedding / s.heads) * s.headsKv;
  const E = s.embedding;
  const raw: Array<Omit<GgufTensorPlan, 'offset' | 'bytes'>> = [
    { name: 'token_embd.weight', dims: [E, s.vocab], type: s.type, fill: 'random' },
    { name: 'output_norm.weight', dims: [E], type: 'f32', fill: 'ones' },
    { name: 'output.weight', dims: [E, s.vocab], type: s.type, fill: 'random' },
  ];
  for (let i = 0; i < s.layers; i++) {
    const b = `blk.${i}.`;
    raw.push(
      { name: `${b}attn_norm.weight`, dims: [E], type: 'f32', fill: 'ones' },
      { name: `${b}attn_q.weight`, dims: [E, E], type: s.type, fill: 'random' },
      { name: `${b}attn_k.weight`, dims: [E, kvDim], type: s.type, fill: 'random' },
      { name: `${b}attn_v.weight`, dims: [E, kvDim], type: s.type, fill: 'random' },
      { name: `${b}attn_output.weight`, dims: [E, E], type: s.type, fill: 'random' },
      { name: `${b}ffn_norm.weight`, dims: [E], type: 'f32', fill: 'ones' },
      { name: `${b}ffn_gate.weight`, dims: [E, s.feedForward], type: s.type, fill: 'random' },
      { name: `${b}ffn_down.weight`, dims: [s.feedForward, E], type: s.type, fill: 'random' },
      { name: `${b}ffn_up.weight`, dims: [E, s.feedForward], type: s.type, fill: 'random' },
    );
  }
  let offset = 0;
  return raw.map((t) => {
    const bytes = tensorBytes(t.type, t.dims.reduce((a, b) => a * b, 1));
    const plan = { ...t, offset, bytes };
    offset = alignUp(offset + bytes);
    return plan;
  });
}

/** A growable little-endian byte writer for the header. */
class HeaderWriter {
  private buf = Buffer.alloc(1 << 16);
  length = 0;

  private ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u8(v: number): void {
    this.ensure(1);
    this.length = this.buf.writeUInt8(v, this.length);
  }
  u32(v: number): void {
    this.ensure(4);
    this.length = this.buf.writeUInt32LE(v, this.length);
  }
  i32(v: number): void {
    this.ensure(4);
    this.length = this.buf.writeInt32LE(v, this.length);
  }
  f32(v: number): void {
    this.ensure(4);
    this.length = this.buf.writeFloatLE(v, this.length);
  }
  u64(v: number | bigint): void {
    this.ensure(8);
    this.length = this.buf.writeBigUInt64LE(BigInt(v), this.length);
  }
  string(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(bytes.length);
    this.ensure(bytes.length);
    this.length += bytes.copy(this.buf, this.length);
  }
  pad(alignment: number): void {
    const to = alignUp(this.length, alignment);
    this.ensure(to - this.length);
    this.buf.fill(0, this.length, to);
    this.length = to;
  }
  result(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

type KvValue =
  | { t: 'u32' | 'i32' | 'f32'; v: number }
  | { t: 'u64'; v: number | bigint }
  | { t: 'bool'; v: boolean }
  | { t: 'string'; v: string }
  | { t: 'string[]'; v: readonly string[] }
  | { t: 'f32[]' | 'i32[]'; v: readonly number[] };

function writeKv(w: HeaderWriter, key: string, value: KvValue): void {
  w.string(key);
  switch (value.t) {
    case 'u32':
      w.u32(GT.u32);
      w.u32(value.v);
      return;
    case 'i32':
      w.u32(GT.i32);
      w.i32(value.v);
      return;
    case 'f32':
      w.u32(GT.f32);
      w.f32(value.v);
      return;
    case 'u64':
      w.u32(GT.u64);
      w.u64(value.v);
      return;
    case 'bool':
      w.u32(GT.bool);
      w.u8(value.v ? 1 : 0);
      return;
    case 'string':
      w.u32(GT.string);
      w.string(value.v);
      return;
    case 'string[]':
      w.u32(GT.array);
      w.u32(GT.string);
      w.u64(value.v.length);
      for (const s of value.v) w.string(s);
      return;
    case 'f32[]':
      w.u32(GT.array);
      w.u32(GT.f32);
      w.u64(value.v.length);
      for (const x of value.v) w.f32(x);
      return;
    case 'i32[]':
      w.u32(GT.array);
      w.u32(GT.i32);
      w.u64(value.v.length);
      for (const x of value.v) w.i32(x);
      return;
  }
}

/** Header, KVs and tensor infos, padded to the alignment: the data section starts right after. */
function ggufHeader(s: Required<GgufSpec>, tensors: readonly GgufTensorPlan[]): Buffer {
  const vocab = ggufVocabulary(s.vocab);
  const kvs: Array<[string, KvValue]> = [
    ['general.architecture', { t: 'string', v: 'llama' }],
    ['general.name', { t: 'string', v: s.name }],
    ['general.alignment', { t: 'u32', v: GGUF_ALIGNMENT }],
    ['general.file_type', { t: 'u32', v: GGUF_FILE_TYPE[s.type] }],
    ['llama.context_length', { t: 'u32', v: s.contextLength }],
    ['llama.embedding_length', { t: 'u32', v: s.embedding }],
    ['llama.block_count', { t: 'u32', v: s.layers }],
    ['llama.feed_forward_length', { t: 'u32', v: s.feedForward }],
    ['llama.attention.head_count', { t: 'u32', v: s.heads }],
    ['llama.attention.head_count_kv', { t: 'u32', v: s.headsKv }],
    ['llama.attention.layer_norm_rms_epsilon', { t: 'f32', v: 1e-5 }],
    ['llama.rope.dimension_count', { t: 'u32', v: s.embedding / s.heads }],
    ['tokenizer.ggml.model', { t: 'string', v: 'llama' }],
    ['tokenizer.ggml.tokens', { t: 'string[]', v: vocab.tokens }],
    ['tokenizer.ggml.scores', { t: 'f32[]', v: vocab.scores }],
    ['tokenizer.ggml.token_type', { t: 'i32[]', v: vocab.tokenTypes }],
    ['tokenizer.ggml.bos_token_id', { t: 'u32', v: 1 }],
    ['tokenizer.ggml.eos_token_id', { t: 'u32', v: 2 }],
    ['tokenizer.ggml.unknown_token_id', { t: 'u32', v: 0 }],
  ];
  const w = new HeaderWriter();
  w.u32(0x46554747); // "GGUF" read as a little-endian u32
  w.u32(3);
  w.u64(tensors.length);
  w.u64(kvs.length);
  for (const [key, value] of kvs) writeKv(w, key, value);
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(GGML_TYPE[t.type]);
    w.u64(t.offset);
  }
  w.pad(GGUF_ALIGNMENT);
  return w.result();
}

// ---------------------------------------------------------------------------------------------
// Numbers

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE 754 binary32 → binary16 bits, round to nearest even (subnormals, overflow to ±inf, NaN). */
export function f32ToF16(value: number): number {
  f32Scratch[0] = value;
  const x = u32Scratch[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign; // below half the smallest subnormal: ±0
    mant |= 0x800000;
    const shift = 14 - e; // 14..24
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) !== 0)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) !== 0)) half++; // a carry rounds up to the next exponent / inf
  return sign | half;
}

/** binary16 bits → number (for tests). */
export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant !== 0 ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** 65536 N(0, 1) samples (Box–Muller on a fixed mulberry32 stream): weights are drawn from this
 *  table by 16-bit random indices, which is ~10x faster than Box–Muller per value and plenty random
 *  for test weights. */
const GAUSSIAN_TABLE: Float32Array = (() => {
  const table = new Float32Array(1 << 16);
  const uniform = seededRandom(0x9e3779b9);
  for (let i = 0; i < table.length; i += 2) {
    const r = Math.sqrt(-2 * Math.log(1 - uniform()));
    const theta = 2 * Math.PI * uniform();
    table[i] = r * Math.cos(theta);
    table[i + 1] = r * Math.sin(theta);
  }
  return table;
})();

/** Seeded N(0, std) source: each mulberry32 output picks two samples of GAUSSIAN_TABLE. */
function gaussianSource(seed: number, std: number): (out: Float32Array) => void {
  let a = seed | 0;
  const table = GAUSSIAN_TABLE;
  return (out) => {
    const n = out.length;
    for (let i = 0; i < n; i += 2) {
      a = (a + 0x6d2b79f5) | 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      t ^= t >>> 14;
      out[i] = std * (table[t & 0xffff] ?? 0);
      if (i + 1 < n) out[i + 1] = std * (table[(t >>> 16) & 0xffff] ?? 0);
    }
  };
}

/** Quantizes x[from .. from+32) as one q8_0 block at out[o .. o+34) (q views out's bytes as int8). */
function quantizeBlock(x: Float32Array, from: number, out: Uint8Array, q: Int8Array, o: number): void {
  let amax = 0;
  for (let j = 0; j < QK8_0; j++) {
    const v = Math.abs(x[from + j] ?? 0);
    amax = v > amax ? v : amax;
  }
  const d = Math.fround(amax / 127);
  const id = d !== 0 ? Math.fround(1 / d) : 0;
  const h = f32ToF16(d);
  out[o] = h & 0xff;
  out[o + 1] = h >>> 8;
  for (let j = 0; j < QK8_0; j++) q[o + 2 + j] = (((x[from + j] ?? 0) * id + 128.5) | 0) - 128;
}

/** ggml's quantize_row_q8_0_ref on `x` (length a multiple of 32) into `out` from byte `at`:
 *  d = max|x| / 127 stored as f16, then round(x / d) as int8. Rounding is floor(v + 0.5) (roundf
 *  differs only on exact negative ties), computed with integer ops because Math.round is slow. */
export function quantizeQ8_0(x: Float32Array, out: Uint8Array, at = 0): void {
  if (x.length % QK8_0 !== 0) throw new Error(`q8_0: row length ${x.length} is not a multiple of ${QK8_0}`);
  if (at + tensorBytes('q8_0', x.length) > out.length) throw new Error('q8_0: output buffer too small');
  const q = new Int8Array(out.buffer, out.byteOffset, out.length);
  for (let b = 0, o = at; b < x.length; b += QK8_0, o += Q8_0_BLOCK_BYTES) quantizeBlock(x, b, out, q, o);
}

/** `count` values from `random`, quantized to q8_0 block by block (the same bytes as filling a
 *  Float32Array and calling quantizeQ8_0, but about twice as fast: the values stay in cache). */
function randomQ8_0(random: (out: Float32Array) => void, count: number): Buffer {
  const out = Buffer.allocUnsafe(tensorBytes('q8_0', count));
  const q = new Int8Array(out.buffer, out.byteOffset, out.length);
  const block = new Float32Array(QK8_0);
  for (let b = 0, o = 0; b < count; b += QK8_0, o += Q8_0_BLOCK_BYTES) {
    random(block);
    quantizeBlock(block, 0, out, q, o);
  }
  return out;
}

/** Dequantizes q8_0 blocks (for tests). */
export function dequantizeQ8_0(data: Buffer, elements: number): Float32Array {
  const out = new Float32Array(elements);
  for (let b = 0, o = 0; b < elements; b += QK8_0) {
    const d = f16ToF32(data.readUInt16LE(o));
    o += 2;
    for (let j = 0; j < QK8_0; j++) out[b + j] = d * data.readInt8(o++);
  }
  return out;
}

/** Encodes float values as `type` (row length must suit q8_0). */
function encode(values: Float32Array, type: GgufTensorType): Buffer {
  switch (type) {
    case 'f32':
      return Buffer.from(values.buffer, values.byteOffset, values.byteLength);
    case 'f16': {
      const half = new Uint16Array(values.length);
      for (let i = 0; i < values.length; i++) half[i] = f32ToF16(values[i] ?? 0);
      return Buffer.from(half.buffer, half.byteOffset, half.byteLength);
    }
    case 'q8_0': {
      const out = Buffer.allocUnsafe(tensorBytes('q8_0', values.length));
      quantizeQ8_0(values, out);
      return out;
    }
  }
}

/** Rows per chunk so that one chunk holds about a million values. */
const CHUNK_VALUES = 1 << 20;

/** Emits the whole file as a sequence of buffers, in order; returns the total length. */
function emitGguf(spec: GgufSpec, sink: (chunk: Buffer) => void): number {
  if (endianness() !== 'LE') throw new Error('gguf: the fixture writer assumes a little-endian host');
  const s = validateSpec(spec);
  const tensors = ggufTensors(s);
  const header = ggufHeader(s, tensors);
  sink(header);
  let written = 0; // relative to the data section
  const random = gaussianSource(s.seed, WEIGHT_STD);
  for (const t of tensors) {
    if (t.offset > written) {
      sink(Buffer.alloc(t.offset - written));
      written = t.offset;
    }
    const [rowLength = 1, ...rest] = t.dims;
    const rows = rest.reduce((a, b) => a * b, 1);
    const rowsPerChunk = Math.max(1, Math.floor(CHUNK_VALUES / rowLength));
    for (let row = 0; row < rows; row += rowsPerChunk) {
      const count = Math.min(rowsPerChunk, rows - row) * rowLength;
      let chunk: Buffer;
      if (t.fill === 'random' && t.type === 'q8_0') chunk = randomQ8_0(random, count);
      else {
        const values = new Float32Array(count);
        if (t.fill === 'ones') values.fill(1);
        else random(values);
        chunk = encode(values, t.type);
      }
      sink(chunk);
      written += chunk.length;
    }
    if (written !== t.offset + t.bytes) throw new Error(`gguf: ${t.name} wrote ${written - t.offset} bytes, expected ${t.bytes}`);
  }
  return header.length + written;
}

/** The whole model file in memory (for small specs). */
export function ggufBytes(spec: GgufSpec): Buffer {
  const chunks: Buffer[] = [];
  const total = emitGguf(spec, (c) => chunks.push(c));
  return Buffer.concat(chunks, total);
}

export interface WriteGgufOptions {
  /** Leave the 2-D weights as holes (zeros) instead of random values: a file of any claimed size
   *  in a moment and no disk, for what reads a model's size or streams its weights (a GPU decoding
   *  a memory-bound model) rather than what it computes. Norm weights are still written (1.0). */
  sparse?: boolean;
}

function writeAll(fd: number, chunk: Buffer, position: number | null): void {
  let off = 0;
  while (off < chunk.length) off += writeSync(fd, chunk, off, chunk.length - off, position === null ? null : position + off);
}

/** Streams the model file to `path` (created or truncated); returns its size. */
export function writeGguf(path: string, spec: GgufSpec, options: WriteGgufOptions = {}): { bytes: number } {
  const s = validateSpec(spec); // throw before creating the file
  const fd = openSync(path, 'w');
  try {
    if (options.sparse === true) {
      if (endianness() !== 'LE') throw new Error('gguf: the fixture writer assumes a little-endian host');
      const tensors = ggufTensors(s);
      const header = ggufHeader(s, tensors);
      writeAll(fd, header, 0);
      for (const t of tensors) if (t.fill === 'ones') writeAll(fd, encode(new Float32Array(t.bytes / 4).fill(1), t.type), header.length + t.offset);
      const last = tensors[tensors.length - 1];
      const bytes = header.length + (last === undefined ? 0 : last.offset + last.bytes);
      ftruncateSync(fd, bytes);
      return { bytes };
    }
    const bytes = emitGguf(spec, (chunk) => writeAll(fd, chunk, null));
    return { bytes };
  } finally {
    closeSync(fd);
  }
}
