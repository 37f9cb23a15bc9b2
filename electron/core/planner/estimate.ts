/**
 * The estimate of a model's peak memory before it has ever been loaded, from its GGUF file with
 * node-llama-cpp's GGUF insights (weights plus context at the asked size). Marked ESTIMATED; the
 * first real load replaces it with a measurement. On a machine whose node-llama-cpp build has no
 * GPU, the insights report no VRAM, and the RAM figure (the same weights and KV cache) stands in.
 */
import { fileURLToPath } from 'node:url';
import type { GgufInsights, Llama } from 'node-llama-cpp';
import type { SpawnRequest, SpawnedProcess } from '../engines/supervisor.js';
import { KV_CACHE_GGML_TYPE, type KvCacheType } from '../contract.js';
import { modelIdentity, type EnvelopeKey, type EnvelopeStore } from './envelopes.js';
import type { PeakParts } from './memory.js';
import { inspectModelFile, type ModelProblem } from './model-file.js';
import { describeModelCheck } from './model-problem.js';

export interface GgufEstimate {
  peakBytes: number;
  modelBytes: number;
  /** The KV cache and the compute buffers at the asked context: contextBytes is their sum. */
  contextBytes: number;
  kvCacheBytes: number;
  computeBytes: number;
  /** Which figure was used: VRAM when the build can offload, RAM otherwise. */
  basis: 'gpuVram' | 'cpuRam';
  trainContextSize: number | null;
  layers: number | null;
}

export class EstimateError extends Error {
  constructor(
    readonly file: string,
    message: string,
    /** The file's content is what failed (not llama.cpp, not the machine). */
    readonly fromFile = false,
  ) {
    super(`${file}: ${message}`);
    this.name = 'EstimateError';
  }
}

/** The model file cannot be loaded at all (missing, not GGUF, truncated): a plan says
 *  REJECT_HEALTH with the problem's code, an API call says 400 naming `modelPath`. */
export class ModelFileError extends Error {
  constructor(
    readonly file: string,
    readonly problem: ModelProblem,
    /** Which count or field was wrong (fixed words and figures), for the API's answer. */
    readonly detail?: string,
  ) {
    super(`${file}: ${describeModelCheck(problem, detail)}`);
    this.name = 'ModelFileError';
  }
}

/** The figures of a model file, or a ModelFileError. */
export async function requireUsableModel(file: string): Promise<{ trainContextSize: number | null }> {
  const check = await inspectModelFile(file);
  if (!check.ok) throw new ModelFileError(file, check.problem, check.detail);
  return { trainContextSize: check.facts.trainContextSize };
}

let llamaPromise: Promise<Llama> | null = null;

/** node-llama-cpp is large: loaded on first use only, so that commands that never estimate
 *  (join, peers, run) start fast. */
const nodeLlamaCpp = (): Promise<typeof import('node-llama-cpp')> => import('node-llama-cpp');

/** One llama instance per process, never building or downloading anything. A load that failed is
 *  not kept: the next estimate tries again (the estimator child stays up between estimates). */
function llama(): Promise<Llama> {
  llamaPromise ??= nodeLlamaCpp()
    .then(({ getLlama, LlamaLogLevel }) => getLlama({ build: 'never', skipDownload: true, usePrebuiltBinaries: true, progressLogs: false, logLevel: LlamaLogLevel.error, logger: () => undefined }))
    .catch((error: unknown) => {
      llamaPromise = null;
      throw error;
    });
  return llamaPromise;
}

/** Let go of llama.cpp after estimating: its native threads would keep the process alive. */
export async function releaseEstimator(): Promise<void> {
  const pending = llamaPromise;
  llamaPromise = null;
  if (pending !== null) await (await pending).dispose();
}

export interface EstimateOptions {
  contextSize: number;
  gpuLayers: number;
  /** The KV cache's element type (llama.cpp's --cache-type-k/-v); f16 when not given. */
  kvCacheType?: KvCacheType | undefined;
}

/** The estimate of a file that inspectModelFile found usable (modelPeak checks it first). */
export async function estimateFromGguf(file: string, options: EstimateOptions): Promise<GgufEstimate> {
  const { readGgufFileInfo, GgufInsights } = await nodeLlamaCpp();
  let info: Awaited<ReturnType<typeof readGgufFileInfo>>;
  try {
    info = await readGgufFileInfo(file, { sourceType: 'filesystem' });
  } catch (error) {
    throw new EstimateError(file, `not a readable GGUF model (${error instanceof Error ? error.message : String(error)})`, true);
  }
  const instance = await llama();
  // From here on llama.cpp is loaded: whatever fails is the file's metadata (a layer count of the
  // wrong type, a context that is not a number).
  try {
    const insights = await GgufInsights.from(info, instance);
    const layers = insights.totalLayers;
    const gpuLayers = Math.min(options.gpuLayers, layers);
    const model = insights.estimateModelResourceRequirements({ gpuLayers });
    const context = contextRequirements(insights, options.contextSize, gpuLayers, options.kvCacheType ?? 'f16');
    const vram = model.gpuVram + context.gpuVram.kvCacheBytes + context.gpuVram.computeBytes;
    const useVram = vram > 0;
    const field = useVram ? 'gpuVram' : 'cpuRam';
    const modelBytes = Math.round(model[field]);
    const { kvCacheBytes, computeBytes } = context[field];
    const contextBytes = kvCacheBytes + computeBytes;
    const figures = [modelBytes, kvCacheBytes, computeBytes, modelBytes + contextBytes];
    if (!figures.every((n) => Number.isSafeInteger(n) && n >= 0)) throw new Error('its metadata gives no usable size');
    const trained = insights.trainContextSize;
    const trainContextSize = typeof trained === 'number' && Number.isSafeInteger(trained) && trained > 0 ? trained : null;
    return { peakBytes: modelBytes + contextBytes, modelBytes, contextBytes, kvCacheBytes, computeBytes, basis: useVram ? 'gpuVram' : 'cpuRam', trainContextSize, layers: Number.isSafeInteger(layers) ? layers : null };
  } catch (error) {
    throw new EstimateError(file, `not a usable GGUF model (${error instanceof Error ? error.message : String(error)})`, true);
  }
}

/** Bytes per KV cache element of each type (a quantized type's block bytes over its 32 values). */
const KV_BYTES_PER_ELEMENT: Readonly<Record<KvCacheType, number>> = { f32: 4, f16: 2, bf16: 2, q8_0: 34 / 32, q4_0: 18 / 32, q4_1: 20 / 32, q5_0: 22 / 32, q5_1: 24 / 32, iq4_nl: 18 / 32 };

interface ContextParts {
  kvCacheBytes: number;
  computeBytes: number;
}

/**
 * The context's memory, KV cache and compute buffers apart, at a KV cache type. node-llama-cpp
 * gives only their sum, and sizes a quantized KV cache by its block's bytes per element (34 bytes
 * a q8_0 "element": 17 times too much), so the cache is measured as the difference between f32
 * and f16 (exactly one f16 cache) and scaled to the type; what is left of the f16 figure is the
 * compute buffers, which do not depend on it.
 */
function contextRequirements(insights: GgufInsights, contextSize: number, modelGpuLayers: number, kvCacheType: KvCacheType): { gpuVram: ContextParts; cpuRam: ContextParts } {
  const at = (type: KvCacheType): { gpuVram: number; cpuRam: number } => {
    const ggml = KV_CACHE_GGML_TYPE[type];
    return insights.estimateContextResourceRequirements({ contextSize, modelGpuLayers, kvCacheKeyType: ggml, kvCacheValueType: ggml });
  };
  const f16 = at('f16');
  const f32 = at('f32');
  const scale = KV_BYTES_PER_ELEMENT[kvCacheType] / 2;
  const parts = (field: 'gpuVram' | 'cpuRam'): ContextParts => {
    const cache = Math.max(0, Math.min(f16[field], f32[field] - f16[field]));
    return { kvCacheBytes: Math.round(cache * scale), computeBytes: Math.round(f16[field] - cache) };
  };
  return { gpuVram: parts('gpuVram'), cpuRam: parts('cpuRam') };
}

/** How an estimate is made: in a child process by default (childEstimator). */
export type Estimator = (file: string, options: EstimateOptions) => Promise<GgufEstimate>;

/** The estimator's heap (node-llama-cpp reads a real model's metadata, vocabulary included, in
 *  well under 100 MB) and its deadline (loading llama.cpp's backends takes a few seconds on a
 *  cold machine). */
export const ESTIMATOR_HEAP_MB = 512;
export const ESTIMATOR_TIMEOUT_MS = 30_000;
/** The most of the child's output that is kept (its one JSON line is a few hundred bytes). */
const ESTIMATOR_OUTPUT_MAX = 64 * 1024;

export interface ChildEstimatorOptions {
  /** How the child starts (the app's spawn runs `nodePath script` as a utility process). */
  spawn: (request: SpawnRequest) => SpawnedProcess;
  nodePath: string;
  /** The child's script (default: estimate-host.js beside this module, in dist). */
  hostPath?: string;
  heapMb?: number;
  timeoutMs?: number;
}

/** estimate-host.js beside this file (dist/electron/core/planner/). */
export const ESTIMATE_HOST_PATH = fileURLToPath(new URL('./estimate-host.js', import.meta.url));

/**
 * node-llama-cpp's parser and insights in a child process with a heap limit and a deadline: a file
 * that makes them allocate without bound, throw a fatal error or spin ends the child, and the
 * estimate is a ModelFileError (MODEL_MALFORMED) or an EstimateError (deadline), never a crash
 * or a hang of this process. The child stays up between estimates (llama.cpp's backends load once:
 * an estimate then takes milliseconds, not the seconds of a fresh start) and leaves by itself
 * when idle (estimate-host.ts); one estimate at a time, the others wait their turn.
 */
export function childEstimator(options: ChildEstimatorOptions): Estimator & { close(): void } {
  const heapMb = options.heapMb ?? ESTIMATOR_HEAP_MB;
  const timeoutMs = options.timeoutMs ?? ESTIMATOR_TIMEOUT_MS;
  interface Child {
    process: SpawnedProcess;
    /** The request in flight: settled by its answer, or by the child's exit. */
    current: ((answer: HostAnswer | null, exit: string | null) => void) | null;
    gone: boolean;
  }
  let child: Child | null = null;
  let line: Promise<void> = Promise.resolve();
  let nextId = 0;
  const start = (): Child => {
    const started: Child = {
      // The heap limit as V8's own flag: packaged apps ignore NODE_OPTIONS (a fuse turns it off).
      process: options.spawn({ command: options.nodePath, args: [`--max-old-space-size=${heapMb}`, options.hostPath ?? ESTIMATE_HOST_PATH, '--serve'], env: {} }),
      current: null,
      gone: false,
    };
    started.process.onLine((stream, text) => {
      if (stream !== 'stdout' || text.length > ESTIMATOR_OUTPUT_MAX || !text.startsWith('{')) return;
      started.current?.(parseAnswer(text), null);
    });
    started.process.onExit((code, signal) => {
      started.gone = true;
      if (child === started) child = null;
      started.current?.(null, signal !== null ? `was ended by ${signal}` : `exited with code ${String(code)}`);
    });
    return started;
  };
  const once = (file: string, estimateOptions: EstimateOptions): Promise<GgufEstimate> =>
    new Promise<GgufEstimate>((resolve, reject) => {
      let current: Child;
      try {
        if (child === null || child.gone) child = start();
        current = child;
      } catch (error) {
        reject(new EstimateError(file, `the estimator could not start (${error instanceof Error ? error.message : String(error)})`));
        return;
      }
      const id = ++nextId;
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        current.process.signalGroup('SIGKILL');
      }, timeoutMs);
      current.current = (answer, exit) => {
        if (answer !== null && answer.id !== id) return; // a late answer to an earlier request
        clearTimeout(timer);
        current.current = null;
        if (timedOut) return reject(new EstimateError(file, `the estimate took longer than ${timeoutMs / 1000} s and was stopped`));
        if (answer?.ok === true && answer.estimate !== undefined) return resolve(answer.estimate);
        if (answer !== null && typeof answer.error === 'string') {
          const why = answer.error.replace(`${file}: `, '').slice(0, 300);
          // The parser refused the file: llama.cpp's reader would not load it as it is. Anything
          // else (llama.cpp's binaries would not load) says nothing about the file.
          return reject(answer.fromFile === true ? new ModelFileError(file, { code: 'MODEL_MALFORMED' }, why) : new EstimateError(file, why));
        }
        // Killed by a signal while on the file: out of its heap or a fatal error in the parser
        // (V8 aborts). An exit code without an answer is the estimator's own failure (it could
        // not load its modules): nothing is known of the file.
        if (exit !== null && exit.startsWith('was ended')) return reject(new ModelFileError(file, { code: 'MODEL_MALFORMED' }, `the GGUF parser ${exit} (heap limit ${heapMb} MB)`));
        reject(new EstimateError(file, `the estimator ${exit ?? 'did not answer'}`));
      };
      if (!current.process.send(JSON.stringify({ id, file, options: estimateOptions }))) current.current(null, 'did not take the request');
    });
  const estimate = (file: string, estimateOptions: EstimateOptions): Promise<GgufEstimate> => {
    const result = line.then(() => once(file, estimateOptions));
    line = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  };
  /** Ends the child now (a one-shot command would otherwise wait for its idle exit). */
  const close = (): void => {
    if (child !== null && !child.gone) child.process.signalGroup('SIGKILL');
    child = null;
  };
  return Object.assign(estimate, { close });
}

type HostAnswer = { id?: unknown; ok?: unknown; estimate?: GgufEstimate; error?: unknown; fromFile?: unknown };

function parseAnswer(line: string | null): HostAnswer | null {
  if (line === null) return null;
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null ? (value as HostAnswer) : null;
  } catch {
    return null;
  }
}

/** A command's estimator for one estimate: `node estimate-host.js` through the engines' spawn,
 *  ended once it answered. */
async function oneShotEstimate(file: string, options: EstimateOptions): Promise<GgufEstimate> {
  const { spawnEngineProcess } = await import('../engines/spawn.js');
  const estimator = childEstimator({ spawn: spawnEngineProcess, nodePath: process.execPath });
  try {
    return await estimator(file, options);
  } finally {
    estimator.close();
  }
}

export interface ModelPeak {
  modelKey: string;
  sizeBytes: number;
  peakBytes: number;
  peakSource: 'MEASURED' | 'ESTIMATED';
  /** The GGUF estimate, when no measurement existed. */
  estimate: GgufEstimate | null;
  /** The estimate's parts of the peak; null for a measured peak (it has none). */
  parts: PeakParts | null;
  /** The context the model was trained for (from its GGUF header); null when it does not say. */
  trainContextSize: number | null;
}

/** How modelPeak estimates: the K/V cache type (f16 unless said), the estimator (a one-shot child
 *  unless given), and `checked`: the caller's own check of the file a moment ago
 *  (inspectModelFile, its header walked once), so it is not read again. */
export interface ModelPeakOptions {
  kvCacheType?: KvCacheType | undefined;
  estimator?: Estimator | undefined;
  checked?: { trainContextSize: number | null } | undefined;
}

/** A model's peak for planning: its envelope's measurement when there is one, otherwise the GGUF
 *  estimate, made in a child process (childEstimator). */
export async function modelPeak(envelopes: EnvelopeStore, modelPath: string, key: Omit<EnvelopeKey, 'modelKey'>, { kvCacheType, estimator, checked }: ModelPeakOptions = {}): Promise<ModelPeak> {
  // A file that changed since it was measured (truncated by a failed copy) is checked anew.
  const { trainContextSize } = checked ?? (await requireUsableModel(modelPath));
  const { modelKey, sizeBytes } = modelIdentity(modelPath);
  const measured = kvCacheType === undefined || kvCacheType === 'f16' ? envelopes.get({ ...key, modelKey }) : undefined;
  if (measured !== undefined) return { modelKey, sizeBytes, peakBytes: measured.peakBytes, peakSource: 'MEASURED', estimate: null, parts: null, trainContextSize };
  const estimate = await (estimator ?? oneShotEstimate)(modelPath, { contextSize: key.contextSize, gpuLayers: key.gpuLayers, ...(kvCacheType === undefined ? {} : { kvCacheType }) });
  return { modelKey, sizeBytes, trainContextSize, peakBytes: estimate.peakBytes, peakSource: 'ESTIMATED', estimate, parts: { weightsBytes: estimate.modelBytes, kvCacheBytes: estimate.kvCacheBytes, computeBytes: estimate.computeBytes } };
}
