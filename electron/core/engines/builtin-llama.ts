/**
 * llama-server's own shapes on the built-in engine, so that tools written for llama.cpp's server
 * work against it: the `/completion` body, its answer (whole, or streamed as pieces and a last
 * event with `"stop":true`) and `/props`. Field names are those of llama.cpp's server README; a
 * value the engine does not know is left out, never made up. Pure: bodies in, plain data out.
 */
import type { GenerationResult } from './builtin-decode.js';
import { DEFAULT_TEMPERATURE, parseSampling, type Checked, type CompletionRequest } from './builtin-openai.js';
import { buildPropsBlock, type GpuPeersView, type GpuShareProps } from '../registry/view.js';

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Fields of llama-server's `/completion` that change what comes back and that this engine does
 *  not implement: refused by name rather than silently ignored. */
function unsupportedField(body: Record<string, unknown>): string | null {
  const set = (key: string): boolean => body[key] !== undefined && body[key] !== null;
  if (set('grammar') && body['grammar'] !== '') return 'grammar';
  if (set('json_schema')) return 'json_schema';
  if (set('n_probs') && body['n_probs'] !== 0) return 'n_probs';
  if (set('n_cmpl') && body['n_cmpl'] !== 1) return 'n_cmpl';
  const logitBias = body['logit_bias'];
  if (set('logit_bias') && !(Array.isArray(logitBias) && logitBias.length === 0) && !(isRecord(logitBias) && Object.keys(logitBias).length === 0)) return 'logit_bias';
  const lora = body['lora'];
  if (set('lora') && !(Array.isArray(lora) && lora.length === 0)) return 'lora';
  if (set('multimodal_data') || set('image_data')) return set('image_data') ? 'image_data' : 'multimodal_data';
  return null;
}

/** Validate a llama-server `/completion` body: a prompt string (or an array of one string),
 *  n_predict (or max_tokens; -1 or absent: to the context's end), the shared sampling fields. */
export function parseLlamaCompletionRequest(body: unknown): Checked<CompletionRequest> {
  if (!isRecord(body)) return { ok: false, message: 'the body must be a JSON object', param: null };
  const unsupported = unsupportedField(body);
  if (unsupported !== null) return { ok: false, message: `${unsupported} is not supported by the built-in engine (a llama-server profile supports it)`, param: unsupported };
  let prompt = body['prompt'];
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0];
  if (typeof prompt !== 'string') return { ok: false, message: 'prompt must be a string (token arrays and several prompts are not supported)', param: 'prompt' };
  const sampling = parseSampling(body, ['n_predict', 'max_tokens'], 'llama-server');
  if (!sampling.ok) return sampling;
  return { ok: true, value: { kind: 'completion', prompt, ...sampling.value, includeUsage: false } };
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

/** One event of a streamed `/completion` while it runs. */
export function completionPiece(content: string): { index: 0; content: string; stop: false; id_slot: 0 } {
  return { index: 0, content, stop: false, id_slot: 0 };
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
  /** Our registry peers; null when the engine did not join a registry. */
  peers: GpuPeersView | null;
}

/** `/props`: llama-server's fields this engine knows, plus the gpu_share block `serve`'s `/props`
 *  carries when the engine is a registry peer. */
export function propsBody(facts: PropsFacts): Record<string, unknown> & Partial<GpuShareProps> {
  const slot: Record<string, unknown> = { id: 0 };
  if (facts.nCtx !== null) slot['n_ctx'] = facts.nCtx;
  slot['is_processing'] = facts.isProcessing;
  slot['params'] = { n_predict: -1, temperature: DEFAULT_TEMPERATURE, stop: [] };
  const props: Record<string, unknown> = { default_generation_settings: slot, total_slots: 1, model_path: facts.modelPath, model_alias: facts.alias };
  if (facts.chatTemplate !== null) props['chat_template'] = facts.chatTemplate;
  props['modalities'] = { vision: false, audio: false };
  return facts.peers === null ? props : { ...props, ...buildPropsBlock(facts.peers, true) };
}
