export const BUNDLE: string;
export function cacheRoot(env?: NodeJS.ProcessEnv): string;
export function variantName(commit: string, cudaArchs: string[] | null): string;
export function cudaArchsFromComputeCaps(text: string): string[];
export function commitOfTarHeader(head: Uint8Array): string | null;
export function cmakeFlags(cudaArchs: string[] | null, nvcc: string | null): string[];
export function findNvcc(env?: NodeJS.ProcessEnv, standard?: string[]): string | null;
export const PACK_EXCLUDES: string[];
