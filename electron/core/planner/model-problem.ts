/** Why a model file cannot be loaded: a code a plan's reason carries, and its words. Pure (the
 *  dashboard explains plans with it); model-file.ts finds the problems. */

/** Why a model file cannot be used, as a code a plan's reason carries. */
/** MODEL_TRUNCATED: its header or tensor data claims more bytes than the file has (a cut copy, or
 *  a count a hostile file inflated); MODEL_MALFORMED: its header breaks GGUF's rules otherwise
 *  (nested arrays, an unknown value type, more than 4 dimensions, a header over 64 MiB). */
export type ModelProblemCode = 'MODEL_MISSING' | 'MODEL_NOT_A_FILE' | 'MODEL_UNREADABLE' | 'MODEL_NOT_GGUF' | 'MODEL_TRUNCATED' | 'MODEL_MALFORMED';

export interface ModelProblem {
  code: ModelProblemCode;
  /** Its size on disk, when it could be read. */
  fileBytes?: number;
  /** How long the file must be to hold what its header says it holds (MODEL_TRUNCATED; for a
   *  hostile count, up to 2^53 − 1). */
  neededBytes?: number;
}

/** A model problem in words, with the count or field that was wrong when one is known. */
export function describeModelCheck(problem: Parameters<typeof describeModelProblem>[0], detail?: string): string {
  return `${describeModelProblem(problem)}${detail === undefined ? '' : ` (${detail})`}`;
}

/** A model problem in words (no file contents, only what is wrong). */
export function describeModelProblem(problem: { code: ModelProblemCode; fileBytes?: number | undefined; neededBytes?: number | undefined }): string {
  switch (problem.code) {
    case 'MODEL_MISSING':
      return 'no such file';
    case 'MODEL_NOT_A_FILE':
      return 'not a regular file';
    case 'MODEL_UNREADABLE':
      return 'not readable by this user';
    case 'MODEL_NOT_GGUF':
      return 'not a GGUF model';
    case 'MODEL_TRUNCATED':
      return `truncated: its contents need ${problem.neededBytes ?? '?'} bytes, the file has ${problem.fileBytes ?? '?'}`;
    case 'MODEL_MALFORMED':
      return 'not a valid GGUF model (its header breaks the format)';
  }
}

