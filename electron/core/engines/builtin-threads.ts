/**
 * How many threads the built-in engine decodes with when neither its profile nor `--threads` says.
 *
 * node-llama-cpp's prebuilt CPU backend is built without OpenMP and attaches no ggml threadpool, so
 * every graph computation (every token) creates and joins `threads − 1` helper threads, and they
 * meet at a barrier after each of the graph's operations by spinning, never sleeping. When one of
 * them is off its core (the engine's own JavaScript thread streams each token, another engine or
 * any other process runs), every other thread spins until it comes back: on a 2-core machine
 * node-llama-cpp's default (`cpuMathCores`, 2 there) decoded 3–141 tok/s where one thread decoded
 * 377–1342 (pacer NOTES.md, "The built-in engine's default threads"). So the default leaves one
 * physical core to the engine's JavaScript thread and to the other engines on the device, and an
 * engine whose layers all run on a GPU keeps one thread: its CPU part of a token is a row lookup
 * and the graph's bookkeeping, which more threads would only slow down with their start-ups and
 * barriers. Pure.
 */

export interface ThreadFacts {
  /** Physical cores worth decoding on (node-llama-cpp's `cpuMathCores`; at least 1). */
  mathCores: number;
  /** Layers on a GPU, of the model's total (0 on the CPU). */
  offloadedLayers: number;
  totalLayers: number;
}

export function defaultThreads(facts: ThreadFacts): number {
  const spare = Math.max(1, Math.floor(facts.mathCores) - 1);
  const allOnGpu = facts.totalLayers > 0 && facts.offloadedLayers >= facts.totalLayers;
  return allOnGpu ? 1 : spare;
}
