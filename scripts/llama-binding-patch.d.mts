export const STEP_SOURCE: string;
/** A short hash of the step's source, for the build cache's key. */
export function patchId(stepSource?: string): string;
/** One addon file's text with the step in it (unchanged when it is already there), or an Error naming the anchor that is missing or repeated. */
export function patchText(file: string, text: string, stepSource: string): string | Error;
/** Beside each patched file, the file as node-llama-cpp shipped it. */
export const ORIGINAL_SUFFIX: string;
/** Patches node-llama-cpp's addon folder in place, from the files as shipped (kept beside them the first time); throws naming what did not fit, or a patched file without its original. */
export function patchAddon(addonDir: string, stepSource?: string): void;
