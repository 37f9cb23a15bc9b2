/**
 * llama-server's own shapes on the built-in engine, so that tools written for llama.cpp's server
 * work against it: the `/completion` body, its answer (whole, or streamed as pieces and a last
 * event with `"stop":true`) and `/props`. Field names are those of llama.cpp's server README; a
 * value the engine does not know is left out, never made up. The body is checked by a valibot
 * schema (schema.ts). Pure: bodies in, plain data out.
 */
import type { GenerationResult } from './decode.js';
import * as v from 'valibot';
import { examine, got, isRecord, openRecord, pathText } from '../../schema.js';
import { DEFAULT_TEMPERATURE, type Checked, type CompletionRequest } from './openai-api.js';
import { buildPropsBlock, unpacedPropsBlock, type GpuPeersView, type GpuShareProps } from '../../registry/view.js';

const MAX_STOPS = 16;
const MAX_PREDICT = 1_000_000;

const wholeFrom = (min: number, max: number, what = `a whole number from ${min} to ${max}`) => {
  const message = got(`must be ${what}`);
  return v.nullish(v.pipe(v.number(message), v.integer(message), v.minValue(min, message), v.maxValue(max, message)));
};
const numberFrom = (min: number, max: number) => {
  const message = got(`must be a number from ${min} to ${max}`);
  return v.nullish(v.pipe(v.number(message), v.finite(message), v.minValue(min, message), v.maxValue(max, message)));
};
const nPredict = wholeFrom(-1, MAX_PREDICT, `a whole number from 0 to ${MAX_PREDICT}, or -1 (to the end of the context)`);
const stopMessage = got(`must be an array of at most ${MAX_STOPS} strings`);

/** A field of llama-server's `/completion` that changes what comes back and that this engine does
 *  not implement: refused by name unless it is at its no-op value, never silently ignored. */
const unsupported = (inert: (value: unknown) => boolean) =>
  v.nullish(v.custom<unknown>(inert, 'is not supported by the built-in engine (a llama-server profile supports it)'));
const isEmpty = (value: unknown): boolean => (Array.isArray(value) ? value.length === 0 : isRecord(value) && Object.keys(value).length === 0);

/** `POST /completion`: llama-server's fields this engine honours, and the ones it refuses. Fields
 *  not named here (llama-server has many sampler knobs) are ignored, as llama-server ignores
 *  unknown ones. */
export const LLAMA_COMPLETION_BODY = openRecord(
  {
    prompt: v.union([v.string(), v.strictTuple([v.string()])], got('must be a string (token arrays and several prompts are not supported)')),
    n_predict: nPredict,
    max_tokens: nPredict,
    temperature: numberFrom(0, 100),
    top_p: numberFrom(0, 1),
    top_k: wholeFrom(0, 1_000_000),
    seed: v.nullish(v.pipe(v.number(got('must be a whole number (-1: random)')), v.safeInteger(got('must be a whole number (-1: random)')))),
    stop: v.nullish(v.union([v.string(), v.pipe(v.array(v.string()), v.maxLength(MAX_STOPS))], stopMessage)),
    stream: v.nullish(v.boolean(got('must be true or false'))),
    grammar: unsupported((value) => value === ''),
    json_schema: unsupported(() => false),
    n_probs: unsupported((value) => value === 0),
    n_cmpl: unsupported((value) => value === 1),
    logit_bias: unsupported(isEmpty),
    // node-llama-cpp cannot bias end-of-generation tokens away (its TokenBias skips them).
    ignore_eos: unsupported((value) => value === false),
    lora: unsupported(isEmpty),
    image_data: unsupported(() => false),
    multimodal_data: unsupported(() => false),
  },
  'a JSON object',
);

/** Validate a llama-server `/completion` body: a prompt string (or an array of one string),
 *  n_predict (or max_tokens; -1 or absent: to the context's end; 0: the prompt only), the sampling
 *  fields; seed -1 is a random seed. */
export function parseLlamaCompletionRequest(body: unknown): Checked<CompletionRequest> {
  const checked = examine(LLAMA_COMPLETION_BODY, body);
  if (!checked.ok) {
    const { keys, message } = checked.problem;
    const param = keys.length === 0 ? null : pathText('', keys);
    return { ok: false, message: `${param ?? 'the body'} ${message}`, param };
  }
  const request = checked.value;
  const prompt = typeof request.prompt === 'string' ? request.prompt : request.prompt[0];
  const limit = request.n_predict ?? request.max_tokens ?? -1;
  const stop = request.stop === null || request.stop === undefined ? [] : typeof request.stop === 'string' ? [request.stop] : request.stop;
  return {
    ok: true,
    value: {
      kind: 'completion',
      prompt,
      maxTokens: limit === -1 ? Number.POSITIVE_INFINITY : limit,
      temperature: request.temperature ?? DEFAULT_TEMPERATURE,
      topP: request.top_p ?? null,
      topK: request.top_k ?? null,
      seed: request.seed === undefined || request.seed === null || request.seed === -1 ? null : request.seed,
      stop: stop.filter((item) => item !== ''),
      stream: request.stream === true,
      includeUsage: false,
    },
  };
}

export type StopType = 'eos' | 'word' | 'limit';

/** Why a generation ended, as llama-server says it: its token limit, a stop string, or the end of
 *  the sequence (an end-of-generation token). */
export function stopTypeOf(result: Pick<GenerationResult, 'finishReason' | 'stopWord'>): StopType {
  if (result.finishReason === 'length') return 'limit';
  return result.stopWord !== null ? 'word' : 'eos';
}

/** n_predict as llama-server writes it: -1 for "to the end of the context". */
const nPredictOf = (maxTokens: number): number => (Number.isFinite(maxTokens) ? maxTokens : -1);

/** The settings a generation ran with (what the request set, or our defaults). */
export function generationSettings(request: CompletionRequest, nCtx: number, model: string): Record<string, unknown> {
  const settings: Record<string, unknown> = { n_ctx: nCtx, n_predict: nPredictOf(request.maxTokens), model, temperature: request.temperature };
  if (request.topK !== null) settings['top_k'] = request.topK;
  if (request.topP !== null) settings['top_p'] = request.topP;
  if (request.seed !== null) settings['seed'] = request.seed;
  settings['stop'] = request.stop;
  settings['stream'] = request.stream;
  return settings;
}

/** llama-server's `timings`; a rate is left out when its time or count is 0. */
export function timingsOf(result: Pick<GenerationResult, 'promptTokens' | 'cachedTokens' | 'completionTokens' | 'promptUs' | 'predictUs'>): Record<string, number> {
  const timings: Record<string, number> = {};
  const add = (prefix: 'prompt' | 'predicted', n: number, us: number): void => {
    const ms = us / 1000;
    timings[`${prefix}_n`] = n;
    timings[`${prefix}_ms`] = ms;
    if (n > 0 && ms > 0) {
      timings[`${prefix}_per_token_ms`] = ms / n;
      timings[`${prefix}_per_second`] = (1000 * n) / ms;
    }
  };
  add('prompt', result.promptTokens - result.cachedTokens, result.promptUs);
  add('predicted', result.completionTokens, result.predictUs);
  return timings;
}

/** Where a generation stands when a piece of it is streamed: the prompt's tokens and the tokens
 *  generated so far. */
export interface PieceCounts {
  evaluated: number;
  predicted: number;
}

/** One event of a streamed `/completion` while it runs, with the running counts llama-server puts
 *  in each (clients count tokens by them: a piece of text can hold several tokens, or none while
 *  a character's bytes are incomplete). */
export function completionPiece(content: string, counts: PieceCounts): { index: 0; content: string; stop: false; id_slot: 0; tokens_predicted: number; tokens_evaluated: number } {
  return { index: 0, content, stop: false, id_slot: 0, tokens_predicted: counts.predicted, tokens_evaluated: counts.evaluated };
}

/** The whole answer of a `/completion` (stream false), or the last event of a stream (its text
 *  went out in the pieces, so `content` is empty there). */
export function completionFinal(content: string, request: CompletionRequest, result: GenerationResult, nCtx: number, model: string): Record<string, unknown> {
  return {
    index: 0,
    content,
    id_slot: 0,
    stop: true,
    model,
    tokens_predicted: result.completionTokens,
    tokens_evaluated: result.promptTokens,
    tokens_cached: result.cachedTokens,
    generation_settings: generationSettings(request, nCtx, model),
    truncated: result.contextFull,
    stop_type: stopTypeOf(result),
    stopping_word: result.stopWord ?? '',
    timings: timingsOf(result),
  };
}

export interface PropsFacts {
  alias: string;
  modelPath: string;
  /** The sequence's context size; null while the model loads. */
  nCtx: number | null;
  isProcessing: boolean;
  /** The model's Jinja chat template from its GGUF metadata; null when it has none (or not loaded). */
  chatTemplate: string | null;
  /** Our registry peers, or why the engine runs unpaced (no registry; refused, full, broken). */
  peers: GpuPeersView | { gpuKey: string | null; unpacedBecause: string };
}

/** `/props`: llama-server's fields this engine knows, plus the gpu_share block `serve`'s `/props`
 *  carries: the peers when the engine is paced, `enabled: false` and the reason when it is not. */
export function propsBody(facts: PropsFacts): Record<string, unknown> & GpuShareProps {
  const slot: Record<string, unknown> = { id: 0 };
  if (facts.nCtx !== null) slot['n_ctx'] = facts.nCtx;
  slot['is_processing'] = facts.isProcessing;
  slot['params'] = { n_predict: -1, temperature: DEFAULT_TEMPERATURE, stop: [] };
  const props: Record<string, unknown> = { default_generation_settings: slot, total_slots: 1, model_path: facts.modelPath, model_alias: facts.alias };
  if (facts.chatTemplate !== null) props['chat_template'] = facts.chatTemplate;
  props['modalities'] = { vision: false, audio: false };
  const block = 'unpacedBecause' in facts.peers ? unpacedPropsBlock(facts.peers.gpuKey, facts.peers.unpacedBecause) : buildPropsBlock(facts.peers, true);
  return { ...props, ...block };
}
