/**
 * The built-in engine's decode steps on its one context sequence: the prompt's tokens, then one
 * generated token at a time, each step ending in a sampled token. Two ways to take them, chosen
 * once per engine (`chooseStepPath`):
 *
 * - `direct`: node-llama-cpp's native context and nothing else: fill a batch, decode it, sample.
 *   `sequence.evaluate` runs every token through the binding's general batching machinery (locks,
 *   a queue shared by all sequences, a prioritisation pass, closures, Maps and Sets, a copy of the
 *   whole context's token list): ~150 µs a token besides the decode, and ~455 µs on a window's
 *   first token, when all of that code and data are cold. Straight, a token costs four native
 *   calls (two of them trips to the worker thread) and two lines of bookkeeping: ~43 and ~115 µs,
 *   a step 18–19 % shorter (one core, the bench model; pacer NOTES.md "The decode step, straight").
 *   With the binding built here (`npm run llama-binding:build`, which adds gpu-share's
 *   `gpuShareDecodeStep`, native/llama-binding/decode-step.cpp) and one decode thread, a
 *   generated token is one synchronous call on this thread, no trip to the worker at all: a step 9–13 % shorter again,
 *   and 140–210 µs off a window's first one. The prompt's batches, and any step longer than
 *   `ONE_CALL_STEP_MAX_US`, keep the worker, so that the event loop never waits long; one-call
 *   steps give it a turn every `ONE_CALL_YIELD_US`.
 * - `evaluate`: `sequence.evaluate`, for models whose sequence needs checkpoints to reuse a prefix
 *   (hybrid, recurrent, sliding-window attention without a full cache), which only the binding
 *   takes, and for a binding whose internals are not the ones this file knows (a version other
 *   than the pinned one): then the engine is slower, never wrong.
 *
 * The direct path reaches into node-llama-cpp's internals (`_ctx`, `_sequenceId`,
 * `_nextTokenIndex`, `_contextTokens`, the addon's sampler). They are checked once, by shape, in
 * `reachInternals`, and kept consistent the way the binding keeps them after its own decodes, so
 * that its public API (`compareContextTokens`, `eraseContextTokenRanges`, `contextTokens`) goes on
 * working between requests. The engine owns its context (one sequence, one request at a time), so
 * nothing else of the binding's decodes on it meanwhile.
 */
import { randomInt } from 'node:crypto';
import { monotonicUs } from '../../clock.js';
import type { LlamaContextSequence, SequenceEvaluateOptions, Token } from 'node-llama-cpp';
import type { Engine } from './decode.js';

/** What a request asks of the sampler. null: the default (llama-server's and the binding's). */
export interface SamplingSettings {
  temperature: number;
  topP: number | null;
  topK: number | null;
  seed: number | null;
}

/** One generation's steps: each `next()` decodes what is pending (the prompt, then the last token)
 *  and samples the next token; null when the sampler gives none. `close()` once, in a finally. */
export interface TokenSteps {
  next(): Promise<Token | null>;
  close(): Promise<void>;
}

/** The path an engine takes, and why when it is not the direct one. */
export type StepPathChoice = { path: 'direct'; internals: Internals } | { path: 'evaluate'; why: string };

// ---------------------------------------------------------------------------------------------
// node-llama-cpp's internals, as far as the direct path uses them

interface NativeSampler {
  applyConfig(config: Record<string, number>): void;
  dispose(): void;
}

interface NativeContext {
  initBatch(size: number): void;
  addToBatch(sequenceId: number, firstTokenSequenceIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  sampleToken(batchLogitIndex: number, sampler: NativeSampler): Promise<Token | -1>;
  getSequenceKvCacheMaxPosition(sequenceId: number): number;
  /** Ours, in a binding built here (native/llama-binding/decode-step.cpp): one token decoded and
   *  the next sampled and accepted on this thread, in one call. */
  gpuShareDecodeStep?: (sequenceId: number, position: number, token: Token, sampler: NativeSampler) => Token | -1;
}

/** The sequence's own bookkeeping, which its public API reads. */
interface SequenceState {
  _sequenceId: number;
  _nextTokenIndex: number;
  _contextTokens: Token[];
}

export interface Internals {
  native: NativeContext;
  sequence: SequenceState;
  newSampler: () => NativeSampler;
  batchSize: number;
  contextSize: number;
  /** Generated tokens take gpu-share's one-call step: the binding has it (`gpuShareDecodeStep`)
   *  and the context decodes on one thread (`ONE_CALL_MAX_THREADS`). */
  oneCallStep: boolean;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;
const hasMethods = (value: unknown, names: readonly string[]): boolean => isObject(value) && names.every((name) => typeof value[name] === 'function');

/**
 * One-call steps only for a decode on one thread. With an OpenMP team the calling thread becomes
 * its master, and through `serve` (two 2-thread engines at 2:1, unpinned) a step took 959 µs in the
 * weight-2 engine's windows against 835 through the worker calls (the engine's step trace, load
 * 1.4–1.7): the token's socket write, which the worker's trip had overlapped with the decode,
 * lands before it, and the master's core also serves the engine's JavaScript. With one thread the
 * same trace read 643 against 750 µs (pacer NOTES.md, "One call a token").
 */
export const ONE_CALL_MAX_THREADS = 1;

/** node-llama-cpp's internals the direct path needs, or what is missing. Checked by shape. */
export function reachInternals(engine: Pick<Engine, 'llama' | 'model' | 'context' | 'sequence'>): Internals | string {
  const context: unknown = engine.context;
  const sequence: unknown = engine.sequence;
  const model: unknown = engine.model;
  const llama: unknown = engine.llama;
  const native = isObject(context) ? context._ctx : undefined;
  if (!hasMethods(native, ['initBatch', 'addToBatch', 'decodeBatch', 'sampleToken', 'getSequenceKvCacheMaxPosition'])) return "the context's native _ctx (initBatch, addToBatch, decodeBatch, sampleToken, getSequenceKvCacheMaxPosition)";
  if (!isObject(sequence) || !Number.isInteger(sequence._sequenceId) || !Number.isInteger(sequence._nextTokenIndex) || !Array.isArray(sequence._contextTokens)) return "the sequence's _sequenceId, _nextTokenIndex and _contextTokens";
  const bindings = isObject(llama) ? llama._bindings : undefined;
  const Sampler = isObject(bindings) ? bindings.AddonSampler : undefined;
  const nativeModel = isObject(model) ? model._model : undefined;
  if (typeof Sampler !== 'function' || !isObject(nativeModel)) return "the binding's AddonSampler and the model's native _model";
  const batchSize = engine.context.batchSize;
  if (!Number.isInteger(batchSize) || batchSize < 1) return `a batch size (${String(batchSize)})`;
  const SamplerClass = Sampler as new (model: unknown) => NativeSampler;
  return {
    native: native as unknown as NativeContext,
    sequence: sequence as unknown as SequenceState,
    newSampler: () => new SamplerClass(nativeModel),
    batchSize,
    contextSize: engine.context.contextSize,
    oneCallStep: hasMethods(native, ['gpuShareDecodeStep']) && engine.context.currentThreads <= ONE_CALL_MAX_THREADS,
  };
}

/** The path for an engine: direct unless its sequence needs checkpoints or the internals differ. */
export function chooseStepPath(engine: Pick<Engine, 'llama' | 'model' | 'context' | 'sequence'>): StepPathChoice {
  if (engine.sequence.needsCheckpoints) return { path: 'evaluate', why: "the model's sequence needs checkpoints (hybrid, recurrent or sliding-window attention), which the binding's own evaluation takes" };
  const internals = reachInternals(engine);
  if (typeof internals === 'string') return { path: 'evaluate', why: `node-llama-cpp lacks ${internals} (not the pinned version)` };
  return { path: 'direct', internals };
}

// ---------------------------------------------------------------------------------------------
// The steps

/** The sampler's settings as the binding resolves a request's (its defaults: top-k 40, top-p 0.95,
 *  no min-p); a request without a seed gets a random one, as llama-server's does. */
export function samplerConfig(settings: SamplingSettings, random: () => number = () => randomInt(0, 2 ** 31)): Record<string, number> {
  return {
    temperature: Math.max(0, settings.temperature),
    minP: 0,
    topK: settings.topK ?? 40,
    topP: settings.topP ?? 0.95,
    seed: settings.seed !== null && Number.isFinite(settings.seed) ? Math.max(0, Math.floor(settings.seed)) : random(),
  };
}

const NO_LOGITS = new Uint32Array(0);

/** A generated token's step runs on the JavaScript thread in one native call while steps take at
 *  most this long (µs); a longer one (a large model on the CPU) goes back to the binding's worker
 *  thread, so that the engine's HTTP server and heartbeat never wait longer than this for a step. */
export const ONE_CALL_STEP_MAX_US = 20_000;
/** One-call steps give the event loop a turn at least this often (µs): requests, aborts and
 *  timers are served between tokens while a generation runs unpaced. */
export const ONE_CALL_YIELD_US = 4_000;
/** A pause this long (µs) before a step was the caller's own wait (the gate's, between windows),
 *  which gave the event loop its turn: a window's first step then takes none of its own. */
const CALLER_WAITED_US = 1_000;

const eventLoopTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** Runs what waits in process.nextTick. Node's HTTP response corks its socket at a write and
 *  uncorks it in a nextTick callback, and those run only once the microtask queue is empty: a run
 *  of one-call steps keeps it busy, so the last token would sit in the socket until the next turn
 *  (4.9 ms for a window's first token in `--resume-cost`, against 2.0 under SIGSTOP). */
const pendingTicks = (): Promise<void> => new Promise((resolve) => process.nextTick(resolve));

class DirectSteps implements TokenSteps {
  private readonly sampler: NativeSampler;
  private pending: readonly Token[];
  private readonly one = new Uint32Array(1);
  private readonly lastLogit = new Uint32Array(1);
  /** The last generated token's step, µs (0 before the first): whether the next takes one call. */
  private lastTokenStepUs = 0;
  private batchReady = false;
  private lastTurnUs = monotonicUs();
  private lastStepEndUs = this.lastTurnUs;

  constructor(
    private readonly internals: Internals,
    input: readonly Token[],
    settings: SamplingSettings,
  ) {
    this.pending = input;
    this.sampler = internals.newSampler();
    this.sampler.applyConfig(samplerConfig(settings));
  }

  async next(): Promise<Token | null> {
    const { sequence, contextSize } = this.internals;
    const input = this.pending;
    if (input.length === 0) return null;
    // The binding's own limit: one slot of the context stays free (it would shift the context).
    if (sequence._nextTokenIndex + input.length > contextSize - 1) throw new Error(`the context is full (${sequence._nextTokenIndex} of ${contextSize} tokens, ${input.length} more to decode)`);
    const [only] = input;
    this.pending = [];
    let token: Token | -1 | null;
    const started = monotonicUs();
    if (started - this.lastStepEndUs >= CALLER_WAITED_US) this.lastTurnUs = started;
    if (input.length === 1 && only !== undefined && this.internals.oneCallStep && this.lastTokenStepUs <= ONE_CALL_STEP_MAX_US) {
      // The last token's write goes out before this step holds the thread.
      await pendingTicks();
      token = this.oneCallStep(input, only);
      let now = monotonicUs();
      this.lastTokenStepUs = now - started;
      if (now - this.lastTurnUs >= ONE_CALL_YIELD_US) {
        await eventLoopTurn();
        now = monotonicUs();
        this.lastTurnUs = now;
      }
      this.lastStepEndUs = now;
    } else {
      token = await this.workerSteps(input);
      const now = monotonicUs();
      if (input.length === 1) this.lastTokenStepUs = now - started;
      this.lastTurnUs = now;
      this.lastStepEndUs = now;
    }
    if (token === null) return null;
    if (token === -1) throw new Error('the sampler gave no token');
    this.pending = [token];
    return token;
  }

  /** One token decoded, the next sampled, on this thread (gpu-share's call in the binding).
   *  `input` is that one token as the pending list, recorded as it is (no array a token). */
  private oneCallStep(input: readonly Token[], token: Token): Token | -1 {
    const { native, sequence } = this.internals;
    const position = sequence._nextTokenIndex;
    if (!this.batchReady) {
      native.initBatch(1);
      this.batchReady = true;
    }
    try {
      const next = native.gpuShareDecodeStep?.(sequence._sequenceId, position, token, this.sampler);
      if (next === undefined) throw new Error("the binding's gpuShareDecodeStep is gone");
      this.recordDecoded(input);
      return next;
    } catch (error) {
      // A sampler that failed after the decode: the token is in the cache, so it is recorded.
      if (native.getSequenceKvCacheMaxPosition(sequence._sequenceId) >= position) this.recordDecoded(input);
      throw error;
    }
  }

  /** The binding's own calls, on its worker thread: the prompt's batches, then a sample. */
  private async workerSteps(input: readonly Token[]): Promise<Token | -1 | null> {
    const { native, sequence, batchSize } = this.internals;
    let logitIndex = -1;
    for (let start = 0; start < input.length; start += batchSize) {
      const count = Math.min(batchSize, input.length - start);
      const last = start + count === input.length;
      let tokens: Uint32Array;
      if (count === 1) {
        this.one[0] = input[start] ?? 0;
        tokens = this.one;
      } else tokens = Uint32Array.from(input.slice(start, start + count));
      this.lastLogit[0] = count - 1;
      native.initBatch(count);
      this.batchReady = true;
      const logitIndexes = native.addToBatch(sequence._sequenceId, sequence._nextTokenIndex, tokens, last ? this.lastLogit : NO_LOGITS);
      await native.decodeBatch();
      this.recordDecoded(input.slice(start, start + count));
      if (last) logitIndex = logitIndexes[0] ?? -1;
    }
    if (logitIndex < 0) return null;
    return native.sampleToken(logitIndex, this.sampler);
  }

  /** What the binding records after a decode of its own (its `_decodeTokens`). */
  private recordDecoded(tokens: readonly Token[]): void {
    const { sequence } = this.internals;
    sequence._nextTokenIndex += tokens.length;
    sequence._contextTokens.push(...tokens);
  }

  async close(): Promise<void> {
    this.sampler.dispose();
  }
}

function evaluateSteps(sequence: LlamaContextSequence, input: readonly Token[], settings: SamplingSettings): TokenSteps {
  const options: SequenceEvaluateOptions = { temperature: settings.temperature, yieldEogToken: true };
  if (settings.topP !== null) options.topP = settings.topP;
  if (settings.topK !== null) options.topK = settings.topK;
  if (settings.seed !== null) options.seed = settings.seed;
  const iterator = sequence.evaluate([...input], options);
  return {
    next: async () => {
      const next = await iterator.next();
      return next.done === true ? null : next.value;
    },
    close: async () => {
      await iterator.return();
    },
  };
}

/** The steps of one generation, from `input` (the prompt's tokens not in the sequence yet). */
export function openSteps(engine: Pick<Engine, 'sequence' | 'stepPath'>, input: readonly Token[], settings: SamplingSettings): TokenSteps {
  return engine.stepPath.path === 'direct' ? new DirectSteps(engine.stepPath.internals, input, settings) : evaluateSteps(engine.sequence, input, settings);
}
