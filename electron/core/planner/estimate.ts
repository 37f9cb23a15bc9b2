/**
 * The estimate of a model's peak memory before it has ever been loaded, from its GGUF file with
 * node-llama-cpp's GGUF insights (weights plus context at the asked size). Marked ESTIMATED; the
 * first real load replaces it with a measurement. On a machine whose node-llama-cpp build has no
 * GPU, the insights report no VRAM, and the RAM figure (the same weights and KV cache) stands in.
 */
import type { GgufInsights, Llama } from 'node-llama-cpp';
import { KV_CACHE_GGML_TYPE, type KvCacheType } from '../contract.js';
import { modelIdentity, type EnvelopeKey, type EnvelopeStore } from './envelopes.js';
import type { PeakParts } from './memory.js';
import { describeModelProblem, inspectModelFile, type ModelProblem } from './model-file.js';

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
  ) {
    super(`${file}: ${describeModelProblem(problem)}`);
    this.name = 'ModelFileError';
  }
}

/** The figures of a model file, or a ModelFileError. */
export async function requireUsableModel(file: string): Promise<void> {
  const check = await inspectModelFile(file);
  if (!check.ok) throw new ModelFileError(file, check.problem);
}

let llamaPromise: Promise<Llama> | null = null;

/** node-llama-cpp is large: loaded on first use only, so that commands that never estimate
 *  (join, peers, run) start fast. */
const nodeLlamaCpp = (): Promise<typeof import('node-llama-cpp')> => import('node-llama-cpp');

/** One llama instance per process, never building or downloading anything. */
function llama(): Promise<Llama> {
  llamaPromise ??= nodeLlamaCpp().then(({ getLlama, LlamaLogLevel }) =>
    getLlama({ build: 'never', skipDownload: true, usePrebuiltBinaries: true, progressLogs: false, logLevel: LlamaLogLevel.error, logger: () => undefined }),
  );
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
    throw new EstimateError(file, `not a readable GGUF model (${error instanceof Error ? error.message : String(error)})`);
  }
  let insights: Awaited<ReturnType<typeof GgufInsights.from>>;
  try {
    insights = await GgufInsights.from(info, await llama());
  } catch (error) {
    throw new EstimateError(file, `not a usable GGUF model (${error instanceof Error ? error.message : String(error)})`);
  }
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
  return { peakBytes: modelBytes + contextBytes, modelBytes, contextBytes, kvCacheBytes, computeBytes, basis: useVram ? 'gpuVram' : 'cpuRam', trainContextSize: insights.trainContextSize ?? null, layers };
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

export interface ModelPeak {
  modelKey: string;
  sizeBytes: number;
  peakBytes: number;
  peakSource: 'MEASURED' | 'ESTIMATED';
  /** The GGUF estimate, when no measurement existed. */
  estimate: GgufEstimate | null;
  /** The estimate's parts of the peak; null for a measured peak (it has none). */
  parts: PeakParts | null;
}

/** A model's peak for planning: its envelope's measurement when there is one, otherwise the GGUF
 *  estimate (llama.cpp is let go of afterwards unless `keepEstimator`: a caller estimating many
 *  models in a row calls releaseEstimator once at the end). */
export async function modelPeak(envelopes: EnvelopeStore, modelPath: string, key: Omit<EnvelopeKey, 'modelKey'>, kvCacheType?: KvCacheType, keepEstimator = false): Promise<ModelPeak> {
  // A file that changed since it was measured (truncated by a failed copy) is checked anew.
  await requireUsableModel(modelPath);
  const { modelKey, sizeBytes } = modelIdentity(modelPath);
  const measured = kvCacheType === undefined || kvCacheType === 'f16' ? envelopes.get({ ...key, modelKey }) : undefined;
  if (measured !== undefined) return { modelKey, sizeBytes, peakBytes: measured.peakBytes, peakSource: 'MEASURED', estimate: null, parts: null };
  const estimate = await estimateFromGguf(modelPath, { contextSize: key.contextSize, gpuLayers: key.gpuLayers, kvCacheType });
  if (!keepEstimator) await releaseEstimator();
  return { modelKey, sizeBytes, peakBytes: estimate.peakBytes, peakSource: 'ESTIMATED', estimate, parts: { weightsBytes: estimate.modelBytes, kvCacheBytes: estimate.kvCacheBytes, computeBytes: estimate.computeBytes } };
}
