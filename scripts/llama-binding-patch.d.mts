export const STEP_SOURCE: string;
/** A short hash of the step's source, for the build cache's key. */
export function patchId(stepSource?: string): string;
/** One addon file's text with the step in it (unchanged when it is already there), or an Error naming the anchor that is missing or repeated. */
export function patchText(file: string, text: string, stepSource: string): string | Error;
/** Patches node-llama-cpp's addon folder in place; throws naming what did not fit. */
export function patchAddon(addonDir: string, stepSource?: string): void;
