/**
 * The built-in engine's token loop: the prompt as tokens (chat template or plain text), generation
 * on the one context sequence with the cooperative gate passed after every decode step, the text
 * that comes out (incremental detokenization, stop strings held back), the decode counters, and the
 * FIFO of requests waiting for the sequence. Knows nothing about HTTP.
 */
import type { ChatHistoryItem, ChatWrapper, Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';
import { monotonicUs } from '../../clock.js';
import type { DecodeCounters } from './metrics.js';
import type { ChatRequest, CompletionRequest, SamplingRequest } from './openai-api.js';
import { openSteps, type StepPathChoice } from './steps.js';

// ---------------------------------------------------------------------------------------------
// Text: incremental detokenization and stop strings

/**
 * Turns generated tokens into text pieces as they arrive. A token that ends in the middle of a
 * UTF-8 character (byte-fallback tokens) is held until the character completes, for at most a few
 * tokens; the previous tokens are passed as context so that SPM leading spaces come out right.
 */
export class TokenTextStream<T> {
  private pending: T[] = [];
  private previous: T[] = [];

  constructor(private readonly detokenize: (tokens: readonly T[], lastTokens: readonly T[]) => string) {}

  push(token: T): string {
    this.pending.push(token);
    const text = this.detokenize(this.pending, this.previous);
    if (text.endsWith('\uFFFD') && this.pending.length < 4) return '';
    this.commit();
    return text;
  }

  flush(): string {
    if (this.pending.length === 0) return '';
    const text = this.detokenize(this.pending, this.previous);
    this.commit();
    return text;
  }

  private commit(): void {
    this.previous = [...this.previous, ...this.pending].slice(-8);
    this.pending = [];
  }
}

/**
 * Stop strings over a stream of text pieces: text that might be the start of a stop string is
 * held back until it is known not to be, so that a stop string is never sent to the client.
 */
export class StopMatcher {
  private held = '';
  private readonly longest: number;
  /** The stop string that ended the generation, once one has. */
  matched: string | null = null;

  constructor(private readonly stops: readonly string[]) {
    this.longest = stops.reduce((max, stop) => Math.max(max, stop.length), 0);
  }

  /** The text that is safe to send, and whether a stop string ended the generation. */
  push(piece: string): { text: string; stopped: boolean } {
    const buffer = this.held + piece;
    let cut = -1;
    for (const stop of this.stops) {
      const at = buffer.indexOf(stop);
      if (at !== -1 && (cut === -1 || at < cut)) {
        cut = at;
        this.matched = stop;
      }
    }
    if (cut !== -1) {
      this.held = '';
      return { text: buffer.slice(0, cut), stopped: true };
    }
    let keep = 0;
    for (let k = Math.min(buffer.length, this.longest - 1); k > 0; k--) {
      const tail = buffer.slice(buffer.length - k);
      if (this.stops.some((stop) => stop.startsWith(tail))) {
        keep = k;
        break;
      }
    }
    this.held = buffer.slice(buffer.length - keep);
    return { text: buffer.slice(0, buffer.length - keep), stopped: false };
  }

  /** What was held back, at the end of a generation that no stop string ended. */
  flush(): string {
    const text = this.held;
    this.held = '';
    return text;
  }
}

// ---------------------------------------------------------------------------------------------
// The FIFO of requests waiting for the context sequence

class AbortedWhileQueued extends Error {
  constructor() {
    super('aborted while queued');
  }
}

interface Waiter {
  resolve: (release: () => void) => void;
  reject: (error: Error) => void;
  signal: AbortSignal;
  onAbort: () => void;
}

export class FifoLock {
  private held = false;
  private readonly waiters: Waiter[] = [];

  get busy(): boolean {
    return this.held;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  acquire(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(new AbortedWhileQueued());
    if (!this.held) {
      this.held = true;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const at = this.waiters.indexOf(waiter);
          if (at !== -1) this.waiters.splice(at, 1);
          reject(new AbortedWhileQueued());
        },
      };
      signal.addEventListener('abort', waiter.onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Turn away everyone still waiting (shutdown). */
  rejectWaiting(error: Error): void {
    for (const waiter of this.waiters.splice(0)) {
      waiter.signal.removeEventListener('abort', waiter.onAbort);
      waiter.reject(error);
    }
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next === undefined) {
        this.held = false;
        return;
      }
      next.signal.removeEventListener('abort', next.onAbort);
      next.resolve(this.releaser());
    };
  }
}

// ---------------------------------------------------------------------------------------------
// Generation

export type FinishReason = 'stop' | 'length';

export interface Engine {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  sequence: LlamaContextSequence;
  chatWrapper: ChatWrapper;
  /** How its decode steps are taken (steps.ts, chooseStepPath). */
  stepPath: StepPathChoice;
}

export interface Prompt {
  tokens: Token[];
  /** Text stops of the chat template (on top of the request's). */
  stops: string[];
  /** Single tokens that end a turn in the chat template (besides the model's EOG tokens). */
  stopTokens: ReadonlySet<Token>;
}

export interface GenerationResult {
  promptTokens: number;
  /** Prompt tokens reused from the sequence's cache (not evaluated again). */
  cachedTokens: number;
  completionTokens: number;
  finishReason: FinishReason;
  /** The stop string (the request's or the template's) that ended it; null otherwise. */
  stopWord: string | null;
  /** The context's end, not the request's token limit, cut it short. */
  contextFull: boolean;
  /** Time in the prompt's evaluation and in the generated tokens' steps, µs. */
  promptUs: number;
  predictUs: number;
  aborted: boolean;
}

/** A stepping gate: the cooperative gate when we joined a registry, nothing otherwise. */
export type AfterStep = (stepUs: number) => Promise<unknown>;

/** Told of every decode step: when it started (monotonic µs) and how long it took. */
export type StepLog = (startMonoUs: number, stepUs: number) => void;

export function buildPrompt(engine: Engine, request: ChatRequest | CompletionRequest): Prompt {
  const { model } = engine;
  if (request.kind === 'completion') {
    const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
    const tokens = model.tokenize(request.prompt, false, bos !== null ? 'trimLeadingSpace' : undefined);
    return { tokens: bos !== null ? [bos, ...tokens] : tokens, stops: [], stopTokens: new Set() };
  }
  const history: ChatHistoryItem[] = request.messages.map((message): ChatHistoryItem => {
    if (message.role === 'system') return { type: 'system', text: message.content };
    if (message.role === 'user') return { type: 'user', text: message.content };
    return { type: 'model', response: [message.content] };
  });
  history.push({ type: 'model', response: [] });
  const state = engine.chatWrapper.generateContextState({ chatHistory: history });
  const stops: string[] = [];
  const stopTokens = new Set<Token>();
  for (const trigger of state.stopGenerationTriggers) {
    if (trigger.values.every((value) => typeof value === 'string')) {
      const text = trigger.values.join('');
      if (text !== '') stops.push(text);
      continue;
    }
    const triggerTokens = trigger.tokenize(model.tokenizer);
    const [only] = triggerTokens;
    if (triggerTokens.length === 1 && only !== undefined) stopTokens.add(only);
  }
  return { tokens: state.contextText.tokenize(model.tokenizer), stops, stopTokens };
}

export async function generate(
  engine: Engine,
  prompt: Prompt,
  request: SamplingRequest,
  signal: AbortSignal,
  /** Each piece of text as it is decoded, with the tokens generated so far (llama-server's streamed
   *  `tokens_predicted`). */
  onText: (text: string, completionTokens: number) => void,
  steps: { afterStep: AfterStep | null; counters: DecodeCounters; /** When the request arrived (monotonic µs), for the time to first token. */ arrivedUs: number; stepLog?: StepLog | null },
): Promise<GenerationResult> {
  const { model, sequence } = engine;
  const tokens = prompt.tokens;
  // Reuse the cached prefix; at least one token is evaluated so that there is a next token.
  const { firstDifferentIndex } = sequence.compareContextTokens(tokens);
  const keep = Math.min(firstDifferentIndex, tokens.length - 1);
  if (keep < sequence.nextTokenIndex) await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
  const limit = Math.min(request.maxTokens, sequence.contextSize - tokens.length);

  const text = new TokenTextStream<Token>((pending, last) => model.detokenize(pending, false, last));
  const stops = new StopMatcher([...request.stop, ...prompt.stops]);
  let completionTokens = 0;
  let finishReason: FinishReason = 'length';
  let stopped = false;
  let aborted = false;
  let firstStep = true;
  let firstTokenCounted = false;
  let promptUs = 0;
  let predictUs = 0;
  // The prompt's evaluation is device work too: it starts inside our window, not someone else's.
  if (steps.afterStep !== null) await steps.afterStep(0);
  const decodeSteps = openSteps(engine, tokens.slice(keep), request);
  // The step just taken, for the gate to weigh before the next one starts.
  let lastStepUs: number | null = null;
  try {
    while (completionTokens < limit) {
      // The gate sits between the steps: after a step's token has gone out, right before the next
      // decode. A window then starts with a decode rather than with sending a token decoded in the
      // last one, and a request that ends (end of sequence, stop string, its limit) is answered at
      // once instead of after a wait for the next window.
      if (lastStepUs !== null && steps.afterStep !== null) await steps.afterStep(lastStepUs);
      if (signal.aborted) {
        aborted = true;
        break;
      }
      const stepStart = monotonicUs();
      const token = await decodeSteps.next();
      const stepUs = monotonicUs() - stepStart;
      lastStepUs = stepUs;
      steps.stepLog?.(stepStart, stepUs);
      steps.counters.decodeTotal++;
      if (firstStep) {
        steps.counters.promptTokensTotal += tokens.length - keep;
        steps.counters.promptSecondsTotal += stepUs / 1e6;
        promptUs = stepUs;
        firstStep = false;
      } else {
        steps.counters.tokensPredictedSecondsTotal += stepUs / 1e6;
        predictUs += stepUs;
      }
      if (token === null) {
        finishReason = 'stop';
        break;
      }
      if (!firstTokenCounted) {
        // When its step ends: when the client can have it.
        firstTokenCounted = true;
        steps.counters.firstTokenSecondsTotal += (monotonicUs() - steps.arrivedUs) / 1e6;
        steps.counters.firstTokensTotal++;
      }
      if (model.isEogToken(token) || prompt.stopTokens.has(token)) {
        finishReason = 'stop';
        break;
      }
      completionTokens++;
      steps.counters.tokensPredictedTotal++;
      const piece = text.push(token);
      if (piece === '') continue;
      const out = stops.push(piece);
      if (out.text !== '' && !signal.aborted) onText(out.text, completionTokens);
      if (out.stopped) {
        stopped = true;
        finishReason = 'stop';
        break;
      }
    }
  } finally {
    await decodeSteps.close();
  }
  if (!stopped && !aborted) {
    const tail = stops.push(text.flush());
    const rest = tail.stopped ? tail.text : tail.text + stops.flush();
    if (tail.stopped) finishReason = 'stop';
    if (rest !== '') onText(rest, completionTokens);
  }
  const contextFull = finishReason === 'length' && limit < request.maxTokens;
  return { promptTokens: tokens.length, cachedTokens: keep, completionTokens, finishReason, stopWord: stops.matched, contextFull, promptUs, predictUs, aborted };
}
