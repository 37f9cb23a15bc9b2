export const NODE_LLAMA_CPP: string;
export function folderName(platform?: NodeJS.Platform, arch?: string): string;
export function bindingCacheDir(base: string, version: string, commit: string, folder: string, patch: string): string;
export const KEPT: string[];
/** Why `--optional` (npm install) does not build here; null when it does. */
export function optionalSkip(platform: NodeJS.Platform, env: Readonly<Record<string, string | undefined>>): string | null;
