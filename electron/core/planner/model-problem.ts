/** Why a model file cannot be loaded: a code a plan's reason carries, and its words. Pure (the
 *  dashboard explains plans with it); model-file.ts finds the problems. */

/** Why a model file cannot be used, as a code a plan's reason carries. */
export type ModelProblemCode = 'MODEL_MISSING' | 'MODEL_NOT_A_FILE' | 'MODEL_UNREADABLE' | 'MODEL_NOT_GGUF' | 'MODEL_TRUNCATED';

export interface ModelProblem {
  code: ModelProblemCode;
  /** Its size on disk, when it could be read. */
  fileBytes?: number;
  /** How long the file must be to hold its tensor data (MODEL_TRUNCATED). */
  neededBytes?: number;
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
      return `truncated: its tensor data needs ${problem.neededBytes ?? '?'} bytes, the file has ${problem.fileBytes ?? '?'}`;
  }
}

