/**
 * What a model file is before anything loads it: a regular, readable GGUF file whose tensor data
 * lies inside it. Checked when a profile is added or edited, before an estimate, and before a plan
 * (a model that cannot load is REJECT_HEALTH, not a crash in the estimator).
 *
 * The file is opened non-blocking and judged by fstat before a byte is read, so a FIFO or a device
 * never blocks a file-system thread; the only content ever reported is whether the first four
 * bytes are "GGUF" (never what they are instead).
 */
import { constants as fsConstants } from 'node:fs';
import { open } from 'node:fs/promises';
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

export type ModelFileCheck = { ok: true; facts: ModelFileFacts } | { ok: false; problem: ModelProblem };

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
};

/** A tensor's data size in bytes (0 when its type is unknown here). */
export function tensorDataBytes(ggmlType: number, dimensions: readonly (number | bigint)[]): number {
  const size = GGML_TYPE_SIZE[ggmlType];
  if (size === undefined) return 0;
  const elements = dimensions.reduce<number>((product, d) => product * Number(d), 1);
  return Math.ceil(elements / size[1]) * size[0];
}

const GGUF_MAGIC = Buffer.from('GGUF', 'latin1');

/** Checks a model file without loading it. Never throws for a bad file: the problem is data. */
export async function inspectModelFile(path: string): Promise<ModelFileCheck> {
  let fileBytes: number;
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
    fileBytes = stat.size;
    const magic = Buffer.alloc(4);
    let read: number;
    try {
      ({ bytesRead: read } = await handle.read(magic, 0, 4, 0));
    } catch {
      return { ok: false, problem: { code: 'MODEL_UNREADABLE', fileBytes } };
    }
    if (read < 4 || !magic.equals(GGUF_MAGIC)) return { ok: false, problem: { code: 'MODEL_NOT_GGUF', fileBytes } };
  } finally {
    await handle.close();
  }
  const { readGgufFileInfo } = await import('node-llama-cpp');
  let info: Awaited<ReturnType<typeof readGgufFileInfo>>;
  try {
    info = await readGgufFileInfo(path, { sourceType: 'filesystem', readTensorInfo: true, logWarnings: false, spliceSplitFiles: false, ignoreKeys: ['tokenizer.ggml.tokens', 'tokenizer.ggml.scores', 'tokenizer.ggml.token_type', 'tokenizer.ggml.merges'] });
  } catch {
    // The header or the metadata runs past the end of the file, or is not GGUF's.
    return { ok: false, problem: { code: fileBytes < 64 * 1024 ? 'MODEL_TRUNCATED' : 'MODEL_NOT_GGUF', fileBytes } };
  }
  const architecture = (info.metadata as { general?: { architecture?: unknown } }).general?.architecture;
  const tensors = info.tensorInfo ?? [];
  if (typeof architecture !== 'string' || tensors.length === 0) return { ok: false, problem: { code: 'MODEL_TRUNCATED', fileBytes } };
  let end = 0;
  // Split models: only this file's part is checked here (the others are their own files).
  for (const tensor of tensors) if (tensor.filePart <= 1) end = Math.max(end, Number(tensor.fileOffset) + tensorDataBytes(tensor.ggmlType, tensor.dimensions));
  if (end > fileBytes) return { ok: false, problem: { code: 'MODEL_TRUNCATED', fileBytes, neededBytes: end } };
  const trained = (info.architectureMetadata as { context_length?: unknown } | undefined)?.context_length;
  const trainContextSize = typeof trained === 'number' && Number.isSafeInteger(trained) && trained > 0 ? trained : null;
  const fileType = (info.metadata as { general?: { file_type?: unknown } }).general?.file_type;
  return { ok: true, facts: { fileBytes, tensorDataEndBytes: end, architecture, trainContextSize, fileType: typeof fileType === 'number' && Number.isSafeInteger(fileType) ? fileType : null } };
}
