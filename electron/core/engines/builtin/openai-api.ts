/**
 * The OpenAI-compatible shapes of the built-in engine: parsing and checking request bodies
 * (`/v1/chat/completions`, `/v1/completions`) into sampling requests, and shaping the responses,
 * stream chunks and errors as OpenAI's API (and llama-server) write them. Pure: bodies in, plain
 * data out; nothing here touches a socket or the model.
 */
import type { FinishReason } from './decode.js';

export interface SamplingRequest {
  maxTokens: number;
  temperature: number;
  topP: number | null;
  topK: number | null;
  seed: number | null;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatRequest extends SamplingRequest {
  kind: 'chat';
  messages: ChatMessage[];
}

export interface CompletionRequest extends SamplingRequest {
  kind: 'completion';
  prompt: string;
}

/** A checked body, or why not: the message names the field, `param` is that field (null: the
 *  whole body), as OpenAI's errors carry it. */
export type Checked<T> = { ok: true; value: T } | { ok: false; message: string; param: string | null };

const refuse = (param: string | null, message: string): { ok: false; message: string; param: string | null } => ({ ok: false, message, param });

export const DEFAULT_MAX_TOKENS = 128;
export const DEFAULT_TEMPERATURE = 0.8;
const MAX_STOPS = 16;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const present = (value: unknown): boolean => value !== undefined && value !== null;

function parseSampling(body: Record<string, unknown>, maxTokenKeys: readonly string[]): Checked<SamplingRequest> {
  let maxTokens = DEFAULT_MAX_TOKENS;
  for (const key of maxTokenKeys) {
    const raw = body[key];
    if (!present(raw)) continue;
    if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 1 || raw > 1_000_000) return refuse(key, `${key} must be a whole number ≥ 1`);
    maxTokens = raw;
    break;
  }
  const temperature = body['temperature'];
  if (present(temperature) && (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0 || temperature > 100)) {
    return refuse('temperature', 'temperature must be a number ≥ 0');
  }
  const topP = body['top_p'];
  if (present(topP) && (typeof topP !== 'number' || !Number.isFinite(topP) || topP < 0 || topP > 1)) return refuse('top_p', 'top_p must be a number between 0 and 1');
  const topK = body['top_k'];
  if (present(topK) && (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 0)) return refuse('top_k', 'top_k must be a whole number ≥ 0');
  const seed = body['seed'];
  if (present(seed) && (typeof seed !== 'number' || !Number.isSafeInteger(seed))) return refuse('seed', 'seed must be an integer');
  const n = body['n'];
  if (present(n) && n !== 1) return refuse('n', 'n must be 1 (one choice per request)');

  const stopRaw = body['stop'];
  let stop: string[] = [];
  if (typeof stopRaw === 'string') stop = [stopRaw];
  else if (Array.isArray(stopRaw)) {
    if (!stopRaw.every((item): item is string => typeof item === 'string')) return refuse('stop', 'stop must be a string or an array of strings');
    stop = stopRaw;
  } else if (present(stopRaw)) return refuse('stop', 'stop must be a string or an array of strings');
  if (stop.length > MAX_STOPS) return refuse('stop', `stop may hold at most ${MAX_STOPS} strings`);
  stop = stop.filter((item) => item !== '');

  const stream = body['stream'];
  if (present(stream) && typeof stream !== 'boolean') return refuse('stream', 'stream must be a boolean');
  const streamOptions = body['stream_options'];
  if (present(streamOptions) && !isRecord(streamOptions)) return refuse('stream_options', 'stream_options must be an object');
  const includeUsage = isRecord(streamOptions) ? streamOptions['include_usage'] : undefined;
  if (present(includeUsage) && typeof includeUsage !== 'boolean') return refuse('stream_options.include_usage', 'stream_options.include_usage must be a boolean');

  return {
    ok: true,
    value: {
      maxTokens,
      temperature: typeof temperature === 'number' ? temperature : DEFAULT_TEMPERATURE,
      topP: typeof topP === 'number' ? topP : null,
      topK: typeof topK === 'number' ? topK : null,
      seed: typeof seed === 'number' ? seed : null,
      stop,
      stream: stream === true,
      includeUsage: includeUsage === true,
    },
  };
}

function messageContent(content: unknown, index: number): Checked<string> {
  if (typeof content === 'string') return { ok: true, value: content };
  if (Array.isArray(content)) {
    const parts: string[] = [];
    for (const part of content) {
      if (!isRecord(part) || part['type'] !== 'text' || typeof part['text'] !== 'string') {
        return refuse(`messages[${index}].content`, `messages[${index}].content parts must be {"type":"text","text":"…"}`);
      }
      parts.push(part['text']);
    }
    return { ok: true, value: parts.join('') };
  }
  return refuse(`messages[${index}].content`, `messages[${index}].content must be a string or an array of text parts`);
}

/** Validate a /v1/chat/completions body. Pure. */
export function parseChatRequest(body: unknown): Checked<ChatRequest> {
  if (!isRecord(body)) return refuse(null, 'the body must be a JSON object');
  const messagesRaw = body['messages'];
  if (!Array.isArray(messagesRaw) || messagesRaw.length === 0) return refuse('messages', 'messages must be a non-empty array');
  const messages: ChatMessage[] = [];
  for (const [index, message] of messagesRaw.entries()) {
    if (!isRecord(message)) return refuse(`messages[${index}]`, `messages[${index}] must be an object`);
    const role = message['role'];
    const mapped = role === 'system' || role === 'developer' ? 'system' : role === 'user' ? 'user' : role === 'assistant' ? 'assistant' : null;
    if (mapped === null) return refuse(`messages[${index}].role`, `messages[${index}].role must be "system", "user" or "assistant"`);
    if (mapped === 'assistant' && message['content'] === null) {
      messages.push({ role: mapped, content: '' });
      continue;
    }
    const content = messageContent(message['content'], index);
    if (!content.ok) return content;
    messages.push({ role: mapped, content: content.value });
  }
  const sampling = parseSampling(body, ['max_tokens', 'max_completion_tokens', 'n_predict']);
  if (!sampling.ok) return sampling;
  return { ok: true, value: { kind: 'chat', messages, ...sampling.value } };
}

/** Validate a /v1/completions body. Pure. */
export function parseCompletionRequest(body: unknown): Checked<CompletionRequest> {
  if (!isRecord(body)) return refuse(null, 'the body must be a JSON object');
  let prompt = body['prompt'];
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0];
  if (typeof prompt !== 'string') return refuse('prompt', 'prompt must be a string (or an array of one string)');
  const sampling = parseSampling(body, ['max_tokens', 'n_predict']);
  if (!sampling.ok) return sampling;
  return { ok: true, value: { kind: 'completion', prompt, ...sampling.value } };
}

// ---------------------------------------------------------------------------------------------
// Responses

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usageOf(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/** What every response and chunk of one generation repeats. */
export interface ResponseMeta {
  kind: 'chat' | 'completion';
  id: string;
  created: number;
  /** The model as the client named it, else the engine's alias. */
  model: string;
}

/** The whole response of a generation that was not streamed. */
export function completionBody(meta: ResponseMeta, content: string, finishReason: FinishReason, usage: Usage): Record<string, unknown> {
  const choice =
    meta.kind === 'chat'
      ? { index: 0, message: { role: 'assistant', content }, finish_reason: finishReason }
      : { index: 0, text: content, logprobs: null, finish_reason: finishReason };
  return { id: meta.id, object: meta.kind === 'chat' ? 'chat.completion' : 'text_completion', created: meta.created, model: meta.model, choices: [choice], usage };
}

const chunkObject = (meta: ResponseMeta): string => (meta.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion');

/** One SSE chunk: a chat delta ({role}, {content} or {} at the end) or a piece of completion text. */
export function streamChunk(meta: ResponseMeta, delta: Record<string, string> | string, finishReason: FinishReason | null): Record<string, unknown> {
  const choice = typeof delta === 'string' ? { index: 0, text: delta, logprobs: null, finish_reason: finishReason } : { index: 0, delta, finish_reason: finishReason };
  return { id: meta.id, object: chunkObject(meta), created: meta.created, model: meta.model, choices: [choice] };
}

/** The last chunk before [DONE] when the client asked for stream_options.include_usage. */
export function usageChunk(meta: ResponseMeta, usage: Usage): Record<string, unknown> {
  return { id: meta.id, object: chunkObject(meta), created: meta.created, model: meta.model, choices: [], usage };
}

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

/** Errors as OpenAI's API shapes them (llama-server's shape too); `param` names the field of the
 *  body that was refused. */
export function errorBody(status: number, code: string, message: string, param: string | null = null): OpenAiErrorBody {
  return { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param, code } };
}
