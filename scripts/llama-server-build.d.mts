export const BUNDLE: string;
export function cacheBase(env?: NodeJS.ProcessEnv): string;
export function cacheRoot(env?: NodeJS.ProcessEnv): string;
export function bundleCommit(how?: string): string;
export class Missing extends Error {}
export function log(text: string): void;
export function run(command: string, args: string[], options?: object): unknown;
export function onPath(name: string, env?: NodeJS.ProcessEnv): string | null;
export function variantName(commit: string, cudaArchs: string[] | null): string;
export function cudaArchsFromComputeCaps(text: string): string[];
export function commitOfTarHeader(head: Uint8Array): string | null;
export function cmakeFlags(cudaArchs: string[] | null, nvcc: string | null): string[];
export function findNvcc(env?: NodeJS.ProcessEnv, standard?: string[]): string | null;
export const PACK_EXCLUDES: string[];
