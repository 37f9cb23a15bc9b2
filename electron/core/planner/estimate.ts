/**
 * The estimate of a model's peak memory before it has ever been loaded, from its GGUF file with
 * node-llama-cpp's GGUF insights (weights plus context at the asked size). Marked ESTIMATED; the
 * first real load replaces it with a measurement. On a machine whose node-llama-cpp build has no
 * GPU, the insights report no VRAM, and the RAM figure (the same weights and KV cache) stands in.
 */
import type { Llama } from 'node-llama-cpp';
import { modelIdentity, type EnvelopeKey, type EnvelopeStore } from './envelopes.js';

export interface GgufEstimate {
  peakBytes: number;
  modelBytes: number;
  contextBytes: number;
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

export async function estimateFromGguf(file: string, options: { contextSize: number; gpuLayers: number }): Promise<GgufEstimate> {
  const { readGgufFileInfo, GgufInsights } = await nodeLlamaCpp();
  let info: Awaited<ReturnType<typeof readGgufFileInfo>>;
  try {
    info = await readGgufFileInfo(file, { sourceType: 'filesystem' });
  } catch (error) {
    throw new EstimateError(file, `not a readable GGUF model (${error instanceof Error ? error.message : String(error)})`);
  }
  const insights = await GgufInsights.from(info, await llama());
  const layers = insights.totalLayers;
  const gpuLayers = Math.min(options.gpuLayers, layers);
  const model = insights.estimateModelResourceRequirements({ gpuLayers });
  const context = insights.estimateContextResourceRequirements({ contextSize: options.contextSize, modelGpuLayers: gpuLayers });
  const vram = model.gpuVram + context.gpuVram;
  const useVram = vram > 0;
  const modelBytes = useVram ? model.gpuVram : model.cpuRam;
  const contextBytes = useVram ? context.gpuVram : context.cpuRam;
  return { peakBytes: modelBytes + contextBytes, modelBytes, contextBytes, basis: useVram ? 'gpuVram' : 'cpuRam', trainContextSize: insights.trainContextSize ?? null, layers };
}

export interface ModelPeak {
  modelKey: string;
  sizeBytes: number;
  peakBytes: number;
  peakSource: 'MEASURED' | 'ESTIMATED';
  /** The GGUF estimate, when no measurement existed. */
  estimate: GgufEstimate | null;
}

/** A model's peak for planning: its envelope's measurement when there is one, otherwise the GGUF
 *  estimate (llama.cpp is let go of afterwards). */
export async function modelPeak(envelopes: EnvelopeStore, modelPath: string, key: Omit<EnvelopeKey, 'modelKey'>): Promise<ModelPeak> {
  const { modelKey, sizeBytes } = modelIdentity(modelPath);
  const measured = envelopes.get({ ...key, modelKey });
  if (measured !== undefined) return { modelKey, sizeBytes, peakBytes: measured.peakBytes, peakSource: 'MEASURED', estimate: null };
  const estimate = await estimateFromGguf(modelPath, { contextSize: key.contextSize, gpuLayers: key.gpuLayers });
  await releaseEstimator();
  return { modelKey, sizeBytes, peakBytes: estimate.peakBytes, peakSource: 'ESTIMATED', estimate };
}
