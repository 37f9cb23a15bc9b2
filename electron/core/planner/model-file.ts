/**
 * What a model file is before anything loads it: a regular, readable GGUF file whose tensor data
 * lies inside it. Checked when a profile is added or edited, before an estimate, and before a plan
 * (a model that cannot load is REJECT_HEALTH, not a crash in the estimator).
 *
 * The file is opened non-blocking and judged by fstat before a byte is read, so a FIFO or a device
 * never blocks a file-system thread. Its header is read by our own bounded reader (gguf-header.ts),
 * which checks every count and length against the file before using it: no third-party parser
 * runs in this process on a file that has not passed it. Problems are reported in figures and
 * fixed words, never with the file's content.
 */
import { constants as fsConstants } from 'node:fs';
import { open } from 'node:fs/promises';
import { readGgufHeader } from './gguf-header.js';
import type { ModelProblem } from './model-problem.js';

export { describeModelProblem, type ModelProblem, type ModelProblemCode } from './model-problem.js';

export interface ModelFileFacts {
  fileBytes: number;
  /** Where the last tensor's data ends (≤ fileBytes). */
  tensorDataEndBytes: number;
  architecture: string;
  /** `<arch>.context_length`, the context it was trained with; null when the file does not say. */
  trainContextSize: number | null;
  /** `general.file_type`, llama.cpp's llama_ftype (15 = Q4_K_M); null when the file does not say. */
  fileType: number | null;
}

export type ModelFileCheck = { ok: true; facts: ModelFileFacts } | { ok: false; problem: ModelProblem; detail?: string };

/** Bytes per block and values per block of the ggml types (ggml.c's type traits). A type not
 *  listed here is sized as nothing: only its start offset is checked against the file. */
const GGML_TYPE_SIZE: Readonly<Record<number, readonly [bytes: number, block: number]>> = {
  0: [4, 1], // F32
  1: [2, 1], // F16
  2: [18, 32], // Q4_0
  3: [20, 32], // Q4_1
  6: [22, 32], // Q5_0
  7: [24, 32], // Q5_1
  8: [34, 32], // Q8_0
  9: [36, 32], // Q8_1
  10: [84, 256], // Q2_K
  11: [110, 256], // Q3_K
  12: [144, 256], // Q4_K
  13: [176, 256], // Q5_K
  14: [210, 256], // Q6_K
  15: [292, 256], // Q8_K
  16: [66, 256], // IQ2_XXS
  17: [74, 256], // IQ2_XS
  18: [98, 256], // IQ3_XXS
  19: [50, 256], // IQ1_S
  20: [18, 32], // IQ4_NL
  21: [110, 256], // IQ3_S
  22: [82, 256], // IQ2_S
  23: [136, 256], // IQ4_XS
  24: [1, 1], // I8
  25: [2, 1], // I16
  26: [4, 1], // I32
  27: [8, 1], // I64
  28: [8, 1], // F64
  29: [56, 256], // IQ1_M
  30: [2, 1], // BF16
  34: [54, 256], // TQ1_0
  35: [66, 256], // TQ2_0
  39: [17, 32], // MXFP4
};

/** A tensor's data size in bytes (0 when its type is unknown here). */
export function tensorDataBytes(ggmlType: number, dimensions: readonly (number | bigint)[]): number {
  const size = GGML_TYPE_SIZE[ggmlType];
  if (size === undefined) return 0;
  const elements = dimensions.reduce<number>((product, d) => product * Number(d), 1);
  return Math.ceil(elements / size[1]) * size[0];
}

/** Checks a model file without loading it. Never throws for a bad file: the problem is data
 *  (with `detail`: which count or field was wrong, in fixed words and figures, for an API's 400). */
export async function inspectModelFile(path: string): Promise<ModelFileCheck> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { ok: false, problem: { code: 'MODEL_MISSING' } };
    if (code === 'EISDIR') return { ok: false, problem: { code: 'MODEL_NOT_A_FILE' } };
    return { ok: false, problem: { code: 'MODEL_UNREADABLE' } };
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return { ok: false, problem: { code: 'MODEL_NOT_A_FILE' } };
    const fileBytes = stat.size;
    let header: Awaited<ReturnType<typeof readGgufHeader>>;
    try {
      // Every count and length is checked against the file before it is used (gguf-header.ts).
      header = await readGgufHeader({ size: fileBytes, read: async (buffer, position) => (await handle.read(buffer, 0, buffer.length, position)).bytesRead });
    } catch {
      return { ok: false, problem: { code: 'MODEL_UNREADABLE', fileBytes } };
    }
    if (!header.ok) {
      const { kind, detail, neededBytes } = header.problem;
      const code = kind === 'not-gguf' ? 'MODEL_NOT_GGUF' : kind === 'truncated' ? 'MODEL_TRUNCATED' : 'MODEL_MALFORMED';
      return { ok: false, problem: { code, fileBytes, ...(neededBytes === undefined ? {} : { neededBytes }) }, detail };
    }
    const { architecture, trainContextSize, fileType, dataStartBytes } = header.facts;
    if (architecture === null || header.tensors.length === 0) return { ok: false, problem: { code: 'MODEL_TRUNCATED', fileBytes }, detail: architecture === null ? 'it names no general.architecture' : 'it has no tensors' };
    let end = 0;
    // Split models: each part is its own file, whose tensor offsets are its own.
    for (const tensor of header.tensors) end = Math.max(end, dataStartBytes + tensor.offset + tensorDataBytes(tensor.ggmlType, tensor.dimensions));
    if (end > fileBytes) return { ok: false, problem: { code: 'MODEL_TRUNCATED', fileBytes, neededBytes: end }, detail: 'its tensor data runs past the end of the file' };
    return { ok: true, facts: { fileBytes, tensorDataEndBytes: end, architecture, trainContextSize, fileType: fileType !== null && Number.isSafeInteger(fileType) ? fileType : null } };
  } finally {
    await handle.close();
  }
}
