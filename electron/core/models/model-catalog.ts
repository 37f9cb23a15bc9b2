/**
 * The "On this machine" list: the scan (local-models.ts), each file's header facts through the
 * project's model-file reader, and whether each fits now (the planner's verdict at its default
 * context). Headers cost milliseconds each, so a call reads what fits in its time budget and
 * remembers it (by path, size and mtime): a long list answers at once with the rest marked
 * pending, and is complete after a few calls. Estimates (node-llama-cpp's, seconds for the first
 * as llama.cpp loads) run after the answer, one at a time, for the next call to use. The verdict
 * itself is planned anew on every call (it depends on the device now; a plan takes microseconds).
 */
import { defaultContextSize, type LocalModelFit, type LocalModelList, type LocalModelView } from '../contract.js';
import { describeModelProblem, type ModelFileCheck } from '../planner/model-file.js';
import type { PeakParts } from '../planner/memory.js';
import { quantizationName, scanModels, type FoundModel, type ModelPlace } from './local-models.js';

export interface CatalogPeak {
  modelKey: string;
  peakBytes: number;
  peakSource: 'MEASURED' | 'ESTIMATED';
  parts: PeakParts | null;
}

export interface ModelCatalogDeps {
  places(): ModelPlace[];
  /** The model-file reader (header only, bounded). */
  inspect(path: string): Promise<ModelFileCheck>;
  /** The model's peak at a context (a measured envelope, else the GGUF estimate). */
  peak?: (path: string, contextSize: number) => Promise<CatalogPeak>;
  /** The planner's verdict for a model with this peak now (absent with `peak`: no fits, as in
   *  the CLI's list, which plans nothing). */
  fit?: (model: FoundModel, peak: CatalogPeak, contextSize: number) => LocalModelFit;
  nowMs(): number;
  /** How long a call may spend reading headers (the walk itself is not cut short). */
  budgetMs: number;
}

type Facts = { ok: true; quantization: string | null; trainContextSize: number | null; architecture: string } | { ok: false; problem: string };

/** Entries remembered at most (a cache of a few KB each; cleared when past it). */
const CACHE_MAX = 10_000;

export class ModelCatalog {
  private readonly facts = new Map<string, Facts>();
  private readonly peaks = new Map<string, CatalogPeak | null>();
  /** The estimates running after an answer; null when none are. */
  private estimating: Promise<void> | null = null;

  constructor(private readonly deps: ModelCatalogDeps) {}

  async list(): Promise<LocalModelList> {
    const started = this.deps.nowMs();
    const scan = await scanModels(this.deps.places());
    const deadline = Math.max(this.deps.nowMs(), started) + this.deps.budgetMs;
    const views: LocalModelView[] = [];
    let pending = 0;
    const toEstimate: { path: string; contextSize: number; key: string }[] = [];
    for (const model of scan.models) {
      const key = `${model.path}\u0000${model.sizeBytes}\u0000${model.mtimeMs}`;
      let facts = this.facts.get(key);
      if (facts === undefined && this.deps.nowMs() < deadline) {
        facts = describeCheck(await this.deps.inspect(model.path));
        this.remember(this.facts, key, facts);
      }
      const base: LocalModelView = { name: model.name, source: model.source, path: model.path, sizeBytes: model.sizeBytes, quantization: null, trainContextSize: null, architecture: null, read: facts !== undefined, problem: null, fit: null };
      if (facts === undefined) {
        pending++;
        views.push(base);
        continue;
      }
      if (!facts.ok) {
        views.push({ ...base, problem: facts.problem });
        continue;
      }
      const contextSize = defaultContextSize(facts.trainContextSize);
      const peakKey = `${key}\u0000${contextSize}`;
      const described = { ...base, quantization: facts.quantization, trainContextSize: facts.trainContextSize, architecture: facts.architecture };
      const { peak: estimate, fit } = this.deps;
      if (estimate === undefined || fit === undefined) {
        views.push(described);
        continue;
      }
      const peak = this.peaks.get(peakKey);
      if (peak === undefined) {
        pending++;
        toEstimate.push({ path: model.path, contextSize, key: peakKey });
      }
      views.push(peak === undefined || peak === null ? described : { ...described, fit: fit(model, peak, contextSize) });
    }
    if (toEstimate.length > 0) this.estimateLater(toEstimate);
    return { models: views, places: scan.places, truncated: scan.truncated, pending, elapsedMs: Math.round(this.deps.nowMs() - started) };
  }

  /** Estimates the models in the background, one at a time; a call while they run starts none. */
  private estimateLater(models: { path: string; contextSize: number; key: string }[]): void {
    const estimate = this.deps.peak;
    if (estimate === undefined || this.estimating !== null) return;
    this.estimating = (async () => {
      try {
        for (const model of models) {
          if (this.peaks.has(model.key)) continue;
          this.remember(this.peaks, model.key, await estimate(model.path, model.contextSize).catch(() => null));
        }
      } finally {
        this.estimating = null;
      }
    })();
  }

  /** Resolves once the estimates running now are done (tests; a caller that wants every fit). */
  async settled(): Promise<void> {
    await this.estimating;
  }

  private remember<T>(map: Map<string, T>, key: string, value: T): void {
    if (map.size >= CACHE_MAX) map.clear();
    map.set(key, value);
  }
}

function describeCheck(check: ModelFileCheck): Facts {
  if (!check.ok) return { ok: false, problem: describeModelProblem(check.problem) };
  return { ok: true, quantization: quantizationName(check.facts.fileType), trainContextSize: check.facts.trainContextSize, architecture: check.facts.architecture };
}
