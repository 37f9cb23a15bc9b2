/**
 * A bounded reader of a GGUF file's header (ggml's docs/gguf.md, versions 2 and 3): the key/value
 * pairs and the tensor infos, read in small chunks, with every count and length the file states
 * checked against the bytes it still has before anything is read, skipped or allocated. A model
 * file is untrusted (DESIGN.md, "Trust boundaries"): a 198-byte file may claim an array of 2^33
 * values, a 69-byte one 2^62 keys; such a file is refused here in microseconds, so that no parser
 * behind this one (node-llama-cpp's, llama.cpp's) ever sees it.
 *
 * Only what the planner needs is kept (the architecture, its trained context, the alignment and
 * where the tensor data ends); every other value is skipped. What it refuses, llama.cpp's own
 * loader refuses too (gguf.cpp: nested arrays, more than 4 dimensions, a name of 64 bytes or more,
 * a misaligned tensor offset); a problem is reported with figures and fixed words, never the
 * file's bytes.
 */

/** The part of a file its header may take (key/value pairs and tensor infos together). Real
 *  headers are a few MB (a 262k-token vocabulary with its scores and types is under 10 MB); the
 *  cap bounds the work on a hostile one: at most 8 M strings to step over. */
export const GGUF_HEADER_MAX_BYTES = 64 * 1024 * 1024;
/** ggml's GGML_MAX_DIMS and GGML_MAX_NAME (a tensor name must be shorter). */
const MAX_DIMS = 4;
const MAX_TENSOR_NAME = 64;
/** Longer keys are not GGUF's (its keys are dotted ASCII names); this keeps each key read small. */
const MAX_KEY_BYTES = 65_535;
/** Longer values of the keys we keep are not real (an architecture is a short name). */
const MAX_KEPT_STRING_BYTES = 256;
/** How many `*.context_length` keys are remembered until the architecture is known. */
const MAX_CONTEXT_KEYS = 16;
/** The smallest key/value pair (8-byte key length, a 1-byte key, a 4-byte type, a 1-byte value)
 *  and the smallest tensor info (8-byte name length, 4-byte n_dims, 4-byte type, 8-byte offset). */
const MIN_KV_BYTES = 14;
const MIN_TENSOR_INFO_BYTES = 24;

/** GGUF value types → the size of one value (0: a string, 8 bytes at least, read one by one). */
const VALUE_BYTES: Readonly<Record<number, number>> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 0, 10: 8, 11: 8, 12: 8 };
const TYPE_STRING = 8;
const TYPE_ARRAY = 9;

export interface GgufTensorExtent {
  ggmlType: number;
  dimensions: readonly number[];
  /** Relative to the data section. */
  offset: number;
}

export interface GgufHeaderFacts {
  version: number;
  tensorCount: number;
  kvCount: number;
  architecture: string | null;
  /** `<architecture>.context_length`, when it is a positive integer. */
  trainContextSize: number | null;
  /** `general.file_type` (llama.cpp's LLAMA_FTYPE: the quantization), when it is an integer. */
  fileType: number | null;
  alignment: number;
  /** Where the header ends and (after alignment) where the tensor data starts. */
  headerBytes: number;
  dataStartBytes: number;
}

/** What was wrong, in figures and fixed words (never the file's content). `neededBytes`: what a
 *  count or length in the header claims, when it is more than the file holds. */
export interface GgufHeaderProblem {
  kind: 'not-gguf' | 'truncated' | 'malformed';
  detail: string;
  neededBytes?: number;
}

export type GgufHeaderResult = { ok: true; facts: GgufHeaderFacts; tensors: GgufTensorExtent[] } | { ok: false; problem: GgufHeaderProblem };

/** Positional reads of the file: `read(buffer, position)` fills as much of `buffer` as it can and
 *  returns how many bytes it read (fewer only at the end of the file). */
export interface ByteSource {
  readonly size: number;
  read(buffer: Buffer, position: number): Promise<number>;
}

/** A source over bytes in memory (tests, and small files read at once). */
export function bufferSource(bytes: Buffer): ByteSource {
  return {
    size: bytes.length,
    read: async (buffer, position) => (position >= bytes.length ? 0 : bytes.copy(buffer, 0, position, Math.min(bytes.length, position + buffer.length))),
  };
}

class HeaderError extends Error {
  constructor(readonly problem: GgufHeaderProblem) {
    super(problem.detail);
  }
}

const CHUNK = 1 << 16;

/** Reads forward through the header with one 64 KiB window; never past `limit`. */
class Cursor {
  private window = Buffer.alloc(CHUNK);
  private windowStart = 0;
  private windowEnd = 0;
  pos = 0;

  constructor(
    private readonly source: ByteSource,
    /** Where the header must end by: the file's end or the header cap, whichever is first. */
    readonly limit: number,
  ) {}

  get remaining(): number {
    return this.limit - this.pos;
  }

  /** Refuses a claim of `bytes` more bytes than are left, before anything is read. */
  need(bytes: number | bigint, what: string): void {
    const wanted = typeof bytes === 'bigint' ? bytes : BigInt(bytes);
    if (wanted <= BigInt(this.remaining)) return;
    const needed = BigInt(this.pos) + wanted;
    const claimed = needed > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(needed);
    if (this.limit < this.source.size) throw new HeaderError({ kind: 'malformed', detail: `${what} at byte ${this.pos} takes the header past ${GGUF_HEADER_MAX_BYTES} bytes`, neededBytes: claimed });
    throw new HeaderError({ kind: 'truncated', detail: `${what} at byte ${this.pos} needs ${wanted} bytes, ${this.remaining} are left`, neededBytes: claimed });
  }

  async fill(bytes: number): Promise<void> {
    if (this.pos >= this.windowStart && this.pos + bytes <= this.windowEnd) return;
    const read = await this.source.read(this.window, this.pos);
    this.windowStart = this.pos;
    this.windowEnd = this.pos + read;
    if (this.pos + bytes > this.windowEnd) throw new HeaderError({ kind: 'truncated', detail: `the file ended at byte ${this.windowEnd} inside its header` });
  }

  private async take(bytes: number, what: string): Promise<number> {
    this.need(bytes, what);
    await this.fill(bytes);
    const at = this.pos - this.windowStart;
    this.pos += bytes;
    return at;
  }

  async u32(what: string): Promise<number> {
    const at = await this.take(4, what);
    return this.window.readUInt32LE(at);
  }

  async u64(what: string): Promise<bigint> {
    const at = await this.take(8, what);
    return this.window.readBigUInt64LE(at);
  }

  async i64(what: string): Promise<bigint> {
    const at = await this.take(8, what);
    return this.window.readBigInt64LE(at);
  }

  /** Any integer value type (u8 … i64) as a number; null for other types or an unsafe value. */
  async integer(type: number, what: string): Promise<number | null> {
    const size = VALUE_BYTES[type] ?? 0;
    if (type === 6 || type === 7 || type === 12 || size === 0) {
      this.skip(BigInt(size), what);
      return null;
    }
    const at = await this.take(size, what);
    const w = this.window;
    const value = [w.readUInt8, w.readInt8, w.readUInt16LE, w.readInt16LE, w.readUInt32LE, w.readInt32LE][type]?.call(w, at);
    if (value !== undefined) return value;
    const big = type === 10 ? w.readBigUInt64LE(at) : w.readBigInt64LE(at);
    return big >= 0n && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : null;
  }

  /** Moves past `bytes` (checked first). */
  skip(bytes: bigint, what: string): void {
    this.need(bytes, what);
    this.pos += Number(bytes);
  }

  /** A string's length, checked against what is left (and against `max` when it is kept). */
  async stringLength(what: string): Promise<number> {
    const length = await this.u64(`${what}'s length`);
    this.need(length, what);
    return Number(length);
  }

  /** Steps over `count` strings (their total was checked: 8 bytes each at least); lengths are
   *  read from the window without a promise each (a vocabulary has 10^5 of them). */
  async skipStrings(count: number, what: string): Promise<void> {
    for (let j = 0; j < count; j++) {
      this.need(8, `string ${j} of ${what}`);
      if (this.pos < this.windowStart || this.pos + 8 > this.windowEnd) await this.fill(8);
      const at = this.pos - this.windowStart;
      const length = this.window.readBigUInt64LE(at);
      this.pos += 8;
      this.skip(length, `string ${j} of ${what}`);
    }
  }

  async text(length: number, what: string): Promise<string> {
    if (length > CHUNK) throw new HeaderError({ kind: 'malformed', detail: `${what} at byte ${this.pos} is ${length} bytes long` });
    const at = await this.take(length, what);
    return this.window.toString('utf8', at, at + length);
  }
}

/** Reads and checks a GGUF header from `source`. Never throws for a bad file: the problem is data. */
export async function readGgufHeader(source: ByteSource): Promise<GgufHeaderResult> {
  try {
    return await readHeader(source);
  } catch (error) {
    if (error instanceof HeaderError) return { ok: false, problem: error.problem };
    throw error;
  }
}

async function readHeader(source: ByteSource): Promise<GgufHeaderResult> {
  const cursor = new Cursor(source, Math.min(source.size, GGUF_HEADER_MAX_BYTES));
  if (source.size < 4) return { ok: false, problem: { kind: 'not-gguf', detail: `the file has ${source.size} bytes` } };
  const magic = await cursor.u32('the magic');
  if (magic !== 0x46554747) return { ok: false, problem: { kind: 'not-gguf', detail: 'it does not start with "GGUF"' } };
  if (source.size < 24) return { ok: false, problem: { kind: 'truncated', detail: `the file has ${source.size} bytes, a GGUF header at least 24`, neededBytes: 24 } };
  const version = await cursor.u32('the version');
  if (version !== 2 && version !== 3) return { ok: false, problem: { kind: 'not-gguf', detail: `GGUF version ${version} (2 and 3 are read)` } };
  const tensorCount = await cursor.u64('the tensor count');
  const kvCount = await cursor.u64('the key/value count');
  // Both lists must fit in what is left, at their smallest, before either is read.
  cursor.need(tensorCount * BigInt(MIN_TENSOR_INFO_BYTES) + kvCount * BigInt(MIN_KV_BYTES), `${tensorCount} tensor infos and ${kvCount} key/value pairs`);
  let architecture: string | null = null;
  let alignment = 32;
  let fileType: number | null = null;
  const contextLengths = new Map<string, number>();
  for (let i = 0n; i < kvCount; i++) {
    const keyLength = await cursor.stringLength(`key ${i}`);
    if (keyLength === 0 || keyLength > MAX_KEY_BYTES) throw new HeaderError({ kind: 'malformed', detail: `key ${i} at byte ${cursor.pos - 8} is ${keyLength} bytes long` });
    const kept = keyLength <= MAX_KEPT_STRING_BYTES;
    const key = kept ? await cursor.text(keyLength, `key ${i}`) : (cursor.skip(BigInt(keyLength), `key ${i}`), '');
    const type = await cursor.u32(`the type of key ${i}`);
    if (type === TYPE_ARRAY) {
      const elementType = await cursor.u32(`the element type of key ${i}`);
      if (elementType === TYPE_ARRAY) throw new HeaderError({ kind: 'malformed', detail: `key ${i} is an array of arrays (llama.cpp loads none)` });
      const elementBytes = VALUE_BYTES[elementType];
      if (elementBytes === undefined) throw new HeaderError({ kind: 'malformed', detail: `key ${i} has an array of unknown type ${elementType}` });
      const count = await cursor.u64(`the array count of key ${i}`);
      if (elementBytes > 0) {
        cursor.skip(count * BigInt(elementBytes), `an array of ${count} values (key ${i})`);
        continue;
      }
      // Strings: 8 bytes each at least, checked as a whole, then stepped over one by one.
      cursor.need(count * 8n, `an array of ${count} strings (key ${i})`);
      await cursor.skipStrings(Number(count), `key ${i}`);
      continue;
    }
    const valueBytes = VALUE_BYTES[type];
    if (valueBytes === undefined) throw new HeaderError({ kind: 'malformed', detail: `key ${i} has unknown type ${type}` });
    if (type === TYPE_STRING) {
      const length = await cursor.stringLength(`the value of key ${i}`);
      if (key === 'general.architecture' && length <= MAX_KEPT_STRING_BYTES) architecture = await cursor.text(length, `the value of key ${i}`);
      else cursor.skip(BigInt(length), `the value of key ${i}`);
      continue;
    }
    if (key === 'general.alignment' || key === 'general.file_type' || (key.endsWith('.context_length') && contextLengths.size < MAX_CONTEXT_KEYS)) {
      const value = await cursor.integer(type, `the value of key ${i}`);
      if (key === 'general.file_type') fileType = value;
      else if (key === 'general.alignment') {
        // ggml: a power of two; 0 or anything else is refused by llama.cpp too.
        if (value === null || value === 0 || (value & (value - 1)) !== 0 || value > 1 << 30) throw new HeaderError({ kind: 'malformed', detail: `general.alignment is ${String(value)}, not a power of two` });
        alignment = value;
      } else if (value !== null && value > 0) contextLengths.set(key, value);
      continue;
    }
    cursor.skip(BigInt(valueBytes), `the value of key ${i}`);
  }
  // Each tensor info, then its extent; the extents are checked once the data section is known.
  const tensors: GgufTensorExtent[] = [];
  for (let i = 0n; i < tensorCount; i++) {
    const nameLength = await cursor.stringLength(`the name of tensor ${i}`);
    if (nameLength >= MAX_TENSOR_NAME) throw new HeaderError({ kind: 'malformed', detail: `the name of tensor ${i} is ${nameLength} bytes long (under ${MAX_TENSOR_NAME})` });
    cursor.skip(BigInt(nameLength), `the name of tensor ${i}`);
    const dims = await cursor.u32(`the dimension count of tensor ${i}`);
    if (dims > MAX_DIMS) throw new HeaderError({ kind: 'malformed', detail: `tensor ${i} has ${dims} dimensions (at most ${MAX_DIMS})` });
    const dimensions: number[] = [];
    let elements = 1n;
    for (let d = 0; d < dims; d++) {
      const size = await cursor.i64(`dimension ${d} of tensor ${i}`);
      if (size < 0n) throw new HeaderError({ kind: 'malformed', detail: `dimension ${d} of tensor ${i} is negative` });
      elements *= size;
      // No tensor holds more values than the file has bytes times 8 (a 1-bit type at the most).
      if (elements > BigInt(source.size) * 8n) throw new HeaderError({ kind: 'malformed', detail: `tensor ${i} claims ${elements} values, more than a ${source.size}-byte file can hold`, neededBytes: Number(elements / 8n > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : elements / 8n) });
      dimensions.push(Number(size));
    }
    const ggmlType = await cursor.u32(`the type of tensor ${i}`);
    if (ggmlType > 255) throw new HeaderError({ kind: 'malformed', detail: `tensor ${i} has type ${ggmlType}` });
    const offset = await cursor.u64(`the offset of tensor ${i}`);
    if (offset > BigInt(source.size)) throw new HeaderError({ kind: 'truncated', detail: `tensor ${i} starts past the end of the file`, neededBytes: offset > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(offset) });
    if (offset % BigInt(alignment) !== 0n) throw new HeaderError({ kind: 'malformed', detail: `tensor ${i}'s offset is not a multiple of the alignment (${alignment})` });
    tensors.push({ ggmlType, dimensions, offset: Number(offset) });
  }
  const headerBytes = cursor.pos;
  const dataStartBytes = Math.ceil(headerBytes / alignment) * alignment;
  const trainContextSize = architecture === null ? null : (contextLengths.get(`${architecture}.context_length`) ?? null);
  return { ok: true, facts: { version, tensorCount: Number(tensorCount), kvCount: Number(kvCount), architecture, trainContextSize, fileType, alignment, headerBytes, dataStartBytes }, tensors };
}
