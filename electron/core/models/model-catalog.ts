/**
 * The "On this machine" list: the scan (local-models.ts), each file's header facts through the
 * project's model-file reader, and whether each fits now (the planner's verdict at its default
 * context). Headers cost milliseconds each, so a call reads what fits in its time budget and
 * remembers it (by path, size and mtime): a long list answers at once with the rest marked
 * pending, and is complete after a few calls. Estimates (node-llama-cpp's, seconds for the first
 * as llama.cpp loads) run after the answer, one at a time, for the next call to use. The verdict
 * itself is planned anew on every call (it depends on the device now; a plan takes microseconds).
 *
 * An estimate that fails for a reason outside the file (the estimator child could not start, was
 * ended, timed out on a busy machine) is tried again on a later call, up to ESTIMATE_TRIES times a
 * second apart and counted pending meanwhile; after that the model says why its fit is unknown
 * and is tried once a minute. A file the estimator refuses is unusable, as a bad header is.
 */
import { defaultContextSize, type LocalModelFit, type LocalModelList, type LocalModelView } from '../contract.js';
import { ModelFileError } from '../planner/estimate.js';
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
  /** Where a failed estimate is told (the serve log, the app's log). */
  log?: (line: string) => void;
}

type Facts = { ok: true; quantization: string | null; trainContextSize: number | null; architecture: string } | { ok: false; problem: string };

/** Entries remembered at most (a cache of a few KB each; cleared when past it). */
const CACHE_MAX = 10_000;
/** Tries of an estimate that failed outside the file before the list stops waiting for it, and
 *  how long after a failure it is tried again (while those last, and then). */
export const ESTIMATE_TRIES = 3;
export const ESTIMATE_RETRY_MS = 1_000;
export const ESTIMATE_RETRY_LATER_MS = 60_000;

/** What the estimates came to: a peak, the file refused (final), or a failure tried again. */
type Estimated = { peak: CatalogPeak } | { unusable: string } | { failed: string; tries: number; atMs: number };

export class ModelCatalog {
  private readonly facts = new Map<string, Facts>();
  private readonly peaks = new Map<string, Estimated>();
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
      const base: LocalModelView = { name: model.name, source: model.source, path: model.path, sizeBytes: model.sizeBytes, quantization: null, trainContextSize: null, architecture: null, read: facts !== undefined, problem: null, fit: null, fitProblem: null };
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
      const estimated = this.peaks.get(peakKey);
      if (estimated !== undefined && 'unusable' in estimated) {
        views.push({ ...described, problem: estimated.unusable });
        continue;
      }
      if (estimated !== undefined && 'peak' in estimated) {
        views.push({ ...described, fit: fit(model, estimated.peak, contextSize) });
        continue;
      }
      // Not estimated yet, or failed: due for a try, and pending while tries are left.
      if (estimated === undefined || this.deps.nowMs() - estimated.atMs >= retryAfterMs(estimated.tries)) toEstimate.push({ path: model.path, contextSize, key: peakKey });
      const triesLeft = estimated === undefined || estimated.tries < ESTIMATE_TRIES;
      if (triesLeft) pending++;
      views.push(triesLeft ? described : { ...described, fitProblem: estimated.failed });
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
          const before = this.peaks.get(model.key);
          if (before !== undefined && !('failed' in before)) continue;
          const tries = (before?.tries ?? 0) + 1;
          this.remember(this.peaks, model.key, await estimate(model.path, model.contextSize).then(
            (peak): Estimated => ({ peak }),
            (error: unknown): Estimated => {
              const why = error instanceof Error ? error.message.replace(`${model.path}: `, '') : String(error);
              if (error instanceof ModelFileError) return { unusable: why };
              this.deps.log?.(`local models: estimating ${model.path} failed (try ${tries}${tries < ESTIMATE_TRIES ? ` of ${ESTIMATE_TRIES}` : ', tried again in a minute'}): ${why}`);
              return { failed: why, tries, atMs: this.deps.nowMs() };
            },
          ));
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

function retryAfterMs(tries: number): number {
  return tries < ESTIMATE_TRIES ? ESTIMATE_RETRY_MS : ESTIMATE_RETRY_LATER_MS;
}

function describeCheck(check: ModelFileCheck): Facts {
  if (!check.ok) return { ok: false, problem: describeModelProblem(check.problem) };
  return { ok: true, quantization: quantizationName(check.facts.fileType), trainContextSize: check.facts.trainContextSize, architecture: check.facts.architecture };
}
