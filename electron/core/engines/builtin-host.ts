/**
 * The built-in engine host: one process per model, serving a GGUF through node-llama-cpp with the
 * HTTP API of llama.cpp's llama-server (the OpenAI-compatible subset the app uses), so that the
 * supervisor and the gateway treat it like any other engine.
 *
 *   node dist/electron/core/engines/builtin-host.js --model FILE --ctx N [--gpu-layers N|auto|max]
 *     [--threads N] [--port 0] [--host 127.0.0.1] [--gpu-key K [--weight W] [--name N]] [--alias NAME]
 *
 * - stdout carries the host protocol only (host-protocol.ts): progress while loading, ready with the
 *   real port, log lines, fatal. Bad flags: one line on stderr naming the flag, exit 2.
 * - With --gpu-key it joins the registry as its own peer (pid = owner = this process), heartbeats,
 *   re-judges activity every 100 ms, and passes the cooperative gate after every decode step.
 * - HTTP (node:http): GET /health, GET /v1/models, GET /metrics (Prometheus, llama-server's names),
 *   POST /v1/chat/completions and /v1/completions, streaming (SSE) or not. One context sequence;
 *   requests are served one at a time, the others wait in FIFO order.
 * - Prompts and generated text are never logged: only counts, lengths and durations.
 * - It exits when its parent goes away (ppid changes, or stdin, when a pipe, ends), and on
 *   SIGTERM/SIGINT: stop accepting, let in-flight requests finish (briefly), leave the registry, exit 0.
 */
import { randomBytes } from 'node:crypto';
import { accessSync, constants as fsConstants, fstatSync, realpathSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ChatHistoryItem, ChatWrapper, Llama, LlamaContext, LlamaContextSequence, LlamaModel, SequenceEvaluateOptions, Token } from 'node-llama-cpp';
import { loadRegistryHelper, RegistryError } from '../../../native/helper.js';
import { monotonicUs } from '../clock.js';
import { checkGpuKey, checkName, checkWeight, parseWholeNumber } from '../registry/validate.js';
import { formatHostEvent, type HostEvent, type HostLogLevel } from './host-protocol.js';
import { joinAsPacedPeer } from '../pacer/paced-peer.js';
import { OVERSHOOT_REPORT_INTERVAL_MS } from '../pacer/overshoot.js';
import { readControlLines } from './control-protocol.js';
import { stdinIsPipe } from '../parent-watch.js';
import { allowedHosts, hostAllowed, matchToken } from '../api/http.js';
import { ENGINE_SECRET_ENV } from './engine-secret.js';

// ---------------------------------------------------------------------------------------------
// Flags

export interface HostRegistryOptions {
  gpuKey: string;
  weight: number;
  name: string;
}

export interface HostOptions {
  model: string;
  ctx: number;
  /** 0 = CPU only (no GPU backend is even probed). */
  gpuLayers: number | 'auto' | 'max';
  /** null = the number of physical cores node-llama-cpp finds useful for math. */
  threads: number | null;
  port: number;
  host: string;
  alias: string;
  registry: HostRegistryOptions | null;
}

export type ParsedHostArgs = { ok: true; options: HostOptions } | { ok: false; message: string };

const MIN_CTX = 16;
const MAX_CTX = 1 << 24;


/** Parse the host's flags (node:util parseArgs, strict). Pure: argv in, options or a one-line
 *  message that names the flag out. */
export function parseHostArgs(argv: readonly string[]): ParsedHostArgs {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        model: { type: 'string' },
        ctx: { type: 'string' },
        'gpu-layers': { type: 'string' },
        threads: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'gpu-key': { type: 'string' },
        weight: { type: 'string' },
        name: { type: 'string' },
        alias: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, message: message.split('\n')[0] ?? message };
  }
  const fail = (flag: string, what: string, raw?: string): ParsedHostArgs => ({
    ok: false,
    message: `--${flag} ${what}${raw === undefined ? '' : ` (got ${JSON.stringify(raw)})`}`,
  });

  const model = values['model'];
  if (model === undefined || model.trim() === '') return fail('model', 'is required: the GGUF file to serve');
  const ctxRaw = values['ctx'];
  if (ctxRaw === undefined) return fail('ctx', 'is required: the context size in tokens');
  const ctx = parseWholeNumber(ctxRaw, MIN_CTX, MAX_CTX);
  if (ctx === null) return fail('ctx', `must be a whole number of tokens between ${MIN_CTX} and ${MAX_CTX}`, ctxRaw);

  let gpuLayers: HostOptions['gpuLayers'] = 'auto';
  const gpuLayersRaw = values['gpu-layers'];
  if (gpuLayersRaw !== undefined) {
    if (gpuLayersRaw === 'auto' || gpuLayersRaw === 'max') gpuLayers = gpuLayersRaw;
    else {
      const layers = parseWholeNumber(gpuLayersRaw, 0, 100_000);
      if (layers === null) return fail('gpu-layers', 'must be a whole number ≥ 0, "auto" or "max"', gpuLayersRaw);
      gpuLayers = layers;
    }
  }

  let threads: number | null = null;
  const threadsRaw = values['threads'];
  if (threadsRaw !== undefined) {
    threads = parseWholeNumber(threadsRaw, 1, 1024);
    if (threads === null) return fail('threads', 'must be a whole number between 1 and 1024', threadsRaw);
  }

  const portRaw = values['port'] ?? '0';
  const port = parseWholeNumber(portRaw, 0, 65_535);
  if (port === null) return fail('port', 'must be a whole number between 0 and 65535 (0: any free port)', portRaw);

  const host = values['host'] ?? '127.0.0.1';
  if (host.trim() === '' || /\s/.test(host)) return fail('host', 'must be an address to listen on', host);

  const alias = values['alias'] ?? (basename(model).replace(/\.gguf$/i, '') || 'model');
  if (alias.trim() === '' || alias.length > 256 || /[\u0000-\u001f\u007f]/.test(alias)) return fail('alias', 'must be 1 to 256 printable characters', alias);

  const gpuKeyRaw = values['gpu-key'];
  const weightRaw = values['weight'];
  const nameRaw = values['name'];
  let registry: HostRegistryOptions | null = null;
  if (gpuKeyRaw === undefined) {
    if (weightRaw !== undefined) return fail('weight', 'needs --gpu-key (the registry to join)');
    if (nameRaw !== undefined) return fail('name', 'needs --gpu-key (the registry to join)');
  } else {
    const gpuKey = checkGpuKey(gpuKeyRaw);
    if (!gpuKey.ok) return fail('gpu-key', gpuKey.message, gpuKeyRaw);
    const weight = checkWeight(weightRaw ?? '1');
    if (!weight.ok) return fail('weight', weight.message);
    const name = checkName(nameRaw ?? truncateUtf8(alias, 47));
    if (!name.ok) return fail('name', name.message, nameRaw);
    registry = { gpuKey: gpuKey.value, weight: weight.value, name: name.value };
  }
  return { ok: true, options: { model, ctx, gpuLayers, threads, port, host, alias, registry } };
}

function truncateUtf8(text: string, maxBytes: number): string {
  let out = '';
  for (const char of text) {
    if (Buffer.byteLength(out + char, 'utf8') > maxBytes) break;
    out += char;
  }
  return out.replace(/[\u0000-\u001f\u007f]/g, '_') || 'model';
}

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

  constructor(private readonly stops: readonly string[]) {
    this.longest = stops.reduce((max, stop) => Math.max(max, stop.length), 0);
  }

  /** The text that is safe to send, and whether a stop string ended the generation. */
  push(piece: string): { text: string; stopped: boolean } {
    const buffer = this.held + piece;
    let cut = -1;
    for (const stop of this.stops) {
      const at = buffer.indexOf(stop);
      if (at !== -1 && (cut === -1 || at < cut)) cut = at;
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
// Requests

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

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

export const DEFAULT_MAX_TOKENS = 128;
export const DEFAULT_TEMPERATURE = 0.8;
const MAX_STOPS = 16;
const MAX_BODY_BYTES = 8 * 1024 * 1024;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const present = (value: unknown): boolean => value !== undefined && value !== null;

function parseSampling(body: Record<string, unknown>, maxTokenKeys: readonly string[]): Checked<SamplingRequest> {
  let maxTokens = DEFAULT_MAX_TOKENS;
  for (const key of maxTokenKeys) {
    const raw = body[key];
    if (!present(raw)) continue;
    if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 1 || raw > 1_000_000) return { ok: false, message: `${key} must be a whole number ≥ 1` };
    maxTokens = raw;
    break;
  }
  const temperature = body['temperature'];
  if (present(temperature) && (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0 || temperature > 100)) {
    return { ok: false, message: 'temperature must be a number ≥ 0' };
  }
  const topP = body['top_p'];
  if (present(topP) && (typeof topP !== 'number' || !Number.isFinite(topP) || topP < 0 || topP > 1)) return { ok: false, message: 'top_p must be a number between 0 and 1' };
  const topK = body['top_k'];
  if (present(topK) && (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 0)) return { ok: false, message: 'top_k must be a whole number ≥ 0' };
  const seed = body['seed'];
  if (present(seed) && (typeof seed !== 'number' || !Number.isSafeInteger(seed))) return { ok: false, message: 'seed must be an integer' };
  const n = body['n'];
  if (present(n) && n !== 1) return { ok: false, message: 'n must be 1 (one choice per request)' };

  const stopRaw = body['stop'];
  let stop: string[] = [];
  if (typeof stopRaw === 'string') stop = [stopRaw];
  else if (Array.isArray(stopRaw)) {
    if (!stopRaw.every((item): item is string => typeof item === 'string')) return { ok: false, message: 'stop must be a string or an array of strings' };
    stop = stopRaw;
  } else if (present(stopRaw)) return { ok: false, message: 'stop must be a string or an array of strings' };
  if (stop.length > MAX_STOPS) return { ok: false, message: `stop may hold at most ${MAX_STOPS} strings` };
  stop = stop.filter((item) => item !== '');

  const stream = body['stream'];
  if (present(stream) && typeof stream !== 'boolean') return { ok: false, message: 'stream must be a boolean' };
  const streamOptions = body['stream_options'];
  if (present(streamOptions) && !isRecord(streamOptions)) return { ok: false, message: 'stream_options must be an object' };
  const includeUsage = isRecord(streamOptions) ? streamOptions['include_usage'] : undefined;
  if (present(includeUsage) && typeof includeUsage !== 'boolean') return { ok: false, message: 'stream_options.include_usage must be a boolean' };

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
        return { ok: false, message: `messages[${index}].content parts must be {"type":"text","text":"…"}` };
      }
      parts.push(part['text']);
    }
    return { ok: true, value: parts.join('') };
  }
  return { ok: false, message: `messages[${index}].content must be a string or an array of text parts` };
}

/** Validate a /v1/chat/completions body. Pure. */
export function parseChatRequest(body: unknown): Checked<ChatRequest> {
  if (!isRecord(body)) return { ok: false, message: 'the body must be a JSON object' };
  const messagesRaw = body['messages'];
  if (!Array.isArray(messagesRaw) || messagesRaw.length === 0) return { ok: false, message: 'messages must be a non-empty array' };
  const messages: ChatMessage[] = [];
  for (const [index, message] of messagesRaw.entries()) {
    if (!isRecord(message)) return { ok: false, message: `messages[${index}] must be an object` };
    const role = message['role'];
    const mapped = role === 'system' || role === 'developer' ? 'system' : role === 'user' ? 'user' : role === 'assistant' ? 'assistant' : null;
    if (mapped === null) return { ok: false, message: `messages[${index}].role must be "system", "user" or "assistant"` };
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
  if (!isRecord(body)) return { ok: false, message: 'the body must be a JSON object' };
  let prompt = body['prompt'];
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') prompt = prompt[0];
  if (typeof prompt !== 'string') return { ok: false, message: 'prompt must be a string (or an array of one string)' };
  const sampling = parseSampling(body, ['max_tokens', 'n_predict']);
  if (!sampling.ok) return sampling;
  return { ok: true, value: { kind: 'completion', prompt, ...sampling.value } };
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
// Metrics (llama-server's names, so that one activity source serves both engines)

export interface HostMetrics {
  promptTokensTotal: number;
  promptSecondsTotal: number;
  tokensPredictedTotal: number;
  tokensPredictedSecondsTotal: number;
  decodeTotal: number;
  requestsProcessing: number;
  requestsDeferred: number;
}

export function formatMetrics(m: HostMetrics): string {
  const lines: string[] = [];
  const metric = (name: string, type: 'counter' | 'gauge', help: string, value: number): void => {
    lines.push(`# HELP llamacpp:${name} ${help}`, `# TYPE llamacpp:${name} ${type}`, `llamacpp:${name} ${Number.isFinite(value) ? value : 0}`);
  };
  metric('prompt_tokens_total', 'counter', 'Number of prompt tokens processed.', m.promptTokensTotal);
  metric('prompt_seconds_total', 'counter', 'Prompt process time', m.promptSecondsTotal);
  metric('tokens_predicted_total', 'counter', 'Number of generation tokens processed.', m.tokensPredictedTotal);
  metric('tokens_predicted_seconds_total', 'counter', 'Predict process time', m.tokensPredictedSecondsTotal);
  metric('n_decode_total', 'counter', 'Total number of llama_decode() calls', m.decodeTotal);
  metric('requests_processing', 'gauge', 'Number of requests processing.', m.requestsProcessing);
  metric('requests_deferred', 'gauge', 'Number of requests deferred.', m.requestsDeferred);
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------
// The host

type FinishReason = 'stop' | 'length';

interface Engine {
  llama: Llama;
  model: LlamaModel;
  context: LlamaContext;
  sequence: LlamaContextSequence;
  chatWrapper: ChatWrapper;
}

interface Prompt {
  tokens: Token[];
  /** Text stops of the chat template (on top of the request's). */
  stops: string[];
  /** Single tokens that end a turn in the chat template (besides the model's EOG tokens). */
  stopTokens: ReadonlySet<Token>;
}

interface GenerationResult {
  promptTokens: number;
  completionTokens: number;
  finishReason: FinishReason;
  aborted: boolean;
}

/** A stepping gate: the cooperative gate when we joined a registry, nothing otherwise. */
type AfterStep = (stepUs: number) => Promise<unknown>;

class ShuttingDown extends Error {
  constructor() {
    super('the engine is shutting down');
  }
}

function emit(event: HostEvent): void {
  try {
    process.stdout.write(`${formatHostEvent(event)}\n`);
  } catch {
    // stdout is gone (the supervisor died): nothing to tell.
  }
}

function log(level: HostLogLevel, message: string): void {
  emit({ event: 'log', level, message });
}

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error: { code, message } }, headers);
}

class BodyTooLarge extends Error {}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new BodyTooLarge(`the body is larger than ${MAX_BODY_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
    // A client that goes away mid-body may end the request without 'end' or 'error'.
    req.on('close', () => reject(new Error('the client closed the request before its body ended')));
  });
}

/**
 * Who may use the engine's port: a request must name a loopback Host with this port (a web page
 * on another name that resolves here — DNS rebinding — is refused), and a request that runs the
 * model (a POST) must be JSON (a cross-site form or `text/plain` POST is refused) and, when the
 * supervisor gave the engine a secret, carry it as `Authorization: Bearer SECRET` (the gateway
 * adds it). Reading /health, /v1/models, /metrics, /props and /gpu/peers needs no secret.
 */
export interface HostDoor {
  /** Host headers allowed (filled in once the port is known). */
  allowedHosts: ReadonlySet<string>;
  /** The engine's secret; null: none asked (started by hand). */
  secret: string | null;
}

export function doorCheck(req: IncomingMessage, door: HostDoor): { status: number; code: string; message: string } | null {
  if (!hostAllowed(req.headers.host, door.allowedHosts)) return { status: 403, code: 'forbidden', message: `Host ${JSON.stringify(req.headers.host ?? '')} is not this engine's loopback address` };
  if (req.method !== 'POST') return null;
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') return { status: 415, code: 'unsupported_media_type', message: 'the body must be sent as Content-Type: application/json' };
  if (door.secret !== null && matchToken(req.headers.authorization, new Map([[door.secret, true]])) === null) {
    return { status: 401, code: 'invalid_api_key', message: "this engine's port needs its secret (send requests to GPU Share's gateway instead)" };
  }
  return null;
}

class Host {
  private engine: Engine | null = null;
  readonly door: HostDoor = { allowedHosts: new Set(), secret: null };
  private readonly lock = new FifoLock();
  private readonly inflight = new Set<AbortController>();
  private readonly metrics = { promptTokensTotal: 0, promptSecondsTotal: 0, tokensPredictedTotal: 0, tokensPredictedSecondsTotal: 0, decodeTotal: 0 };
  private stopping = false;
  readonly loadAbort = new AbortController();
  private idle: (() => void) | null = null;

  constructor(
    private readonly options: HostOptions,
    private readonly afterStep: AfterStep | null,
  ) {}

  get isStopping(): boolean {
    return this.stopping;
  }

  setEngine(engine: Engine): void {
    this.engine = engine;
  }

  get ready(): boolean {
    return this.engine !== null && !this.stopping;
  }

  /** Stop taking requests: queued ones get 503, in-flight ones finish within graceMs or are aborted. */
  async drain(graceMs: number): Promise<void> {
    this.stopping = true;
    this.loadAbort.abort();
    this.lock.rejectWaiting(new ShuttingDown());
    const drained = (): Promise<void> =>
      this.inflight.size === 0 ? Promise.resolve() : new Promise((resolve) => (this.idle = resolve));
    const within = (ms: number): Promise<void> => Promise.race([drained(), new Promise<void>((resolve) => setTimeout(resolve, ms))]);
    if (graceMs > 0) await within(graceMs);
    for (const controller of this.inflight) controller.abort(new ShuttingDown());
    await within(1_000);
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://host.invalid').pathname;
    const method = req.method ?? 'GET';
    const refused = doorCheck(req, this.door);
    if (refused !== null) {
      req.resume();
      sendError(res, refused.status, refused.code, refused.message, refused.status === 401 ? { 'WWW-Authenticate': 'Bearer' } : {});
      return;
    }
    const route = ROUTES[path];
    if (route === undefined) {
      sendError(res, 404, 'not_found', `no route for ${method} ${path}`);
      return;
    }
    if (route.method !== method && !(route.method === 'GET' && method === 'HEAD')) {
      sendError(res, 405, 'method_not_allowed', `${path} takes ${route.method}`, { Allow: route.method });
      return;
    }
    switch (route.name) {
      case 'health':
        if (this.engine === null) sendJson(res, 503, { status: 'loading model' });
        else sendJson(res, 200, { status: 'ok' });
        return;
      case 'models':
        sendJson(res, 200, { object: 'list', data: [{ id: this.options.alias, object: 'model', owned_by: 'gpu-share', created: STARTED_S }] });
        return;
      case 'metrics': {
        const text = formatMetrics({
          ...this.metrics,
          requestsProcessing: this.lock.busy ? 1 : 0,
          requestsDeferred: this.lock.waiting,
        });
        res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      case 'chat':
      case 'completion':
        await this.generation(route.name, req, res);
        return;
    }
  }

  private async generation(kind: 'chat' | 'completion', req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw: string;
    try {
      raw = await readBody(req);
    } catch (error) {
      if (error instanceof BodyTooLarge) sendError(res, 413, 'invalid_request', error.message, { Connection: 'close' });
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      sendError(res, 400, 'invalid_request', 'the body is not valid JSON');
      return;
    }
    const parsed: Checked<ChatRequest | CompletionRequest> = kind === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body);
    if (!parsed.ok) {
      sendError(res, 400, 'invalid_request', parsed.message);
      return;
    }
    const request = parsed.value;
    const engine = this.engine;
    if (this.stopping) {
      sendError(res, 503, 'unavailable', 'the engine is shutting down');
      return;
    }
    if (engine === null) {
      sendError(res, 503, 'loading', 'the model is loading');
      return;
    }
    let prompt: Prompt;
    try {
      prompt = buildPrompt(engine, request);
    } catch (error) {
      sendError(res, 400, 'invalid_request', `the prompt could not be tokenized: ${errorText(error)}`);
      return;
    }
    if (prompt.tokens.length === 0) {
      sendError(res, 400, 'invalid_request', 'the prompt is empty');
      return;
    }
    if (prompt.tokens.length >= engine.sequence.contextSize) {
      sendError(res, 400, 'invalid_request', `the prompt is ${prompt.tokens.length} tokens; the context holds ${engine.sequence.contextSize}`);
      return;
    }

    const controller = new AbortController();
    const onClose = (): void => {
      if (!res.writableEnded) controller.abort(new Error('client disconnected'));
    };
    res.on('close', onClose);
    this.inflight.add(controller);
    const started = monotonicUs();
    let release: (() => void) | null = null;
    try {
      try {
        release = await this.lock.acquire(controller.signal);
      } catch (error) {
        if (error instanceof ShuttingDown) sendError(res, 503, 'unavailable', 'the engine is shutting down');
        return; // the client went away while queued
      }
      const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`;
      const created = Math.floor(Date.now() / 1000);
      const model = this.options.alias;
      const stream = new ResponseWriter(res, kind, id, created, model, request.stream);
      const result = await this.generate(engine, prompt, request, controller.signal, (text) => stream.text(text));
      const usage = { prompt_tokens: result.promptTokens, completion_tokens: result.completionTokens, total_tokens: result.promptTokens + result.completionTokens };
      if (result.aborted && controller.signal.reason instanceof ShuttingDown && !request.stream) {
        sendError(res, 503, 'unavailable', 'the engine is shutting down');
      } else if (!result.aborted || controller.signal.reason instanceof ShuttingDown) {
        stream.finish(result.finishReason, usage, request.includeUsage);
      }
      const seconds = ((monotonicUs() - started) / 1e6).toFixed(2);
      const shape = request.kind === 'chat' ? `${request.messages.length} message${request.messages.length === 1 ? '' : 's'}` : `${request.prompt.length} prompt chars`;
      log(
        'info',
        `${kind === 'chat' ? 'chat.completions' : 'completions'}: ${shape}, ${result.promptTokens} prompt tokens, ${result.completionTokens} completion tokens, ` +
          `finish ${result.aborted ? 'aborted' : result.finishReason}, ${request.stream ? 'stream' : 'json'}, ${seconds} s`,
      );
    } catch (error) {
      log('error', `${kind === 'chat' ? 'chat.completions' : 'completions'} failed: ${errorText(error)}`);
      if (!res.headersSent) sendError(res, 500, 'internal_error', errorText(error));
      else if (!res.writableEnded) {
        res.write(`data: ${JSON.stringify({ error: { code: 'internal_error', message: errorText(error) } })}\n\n`);
        res.end();
      }
    } finally {
      release?.();
      res.off('close', onClose);
      this.inflight.delete(controller);
      if (this.inflight.size === 0) this.idle?.();
    }
  }

  /** Generate on the one sequence (the caller holds the lock). Each decode step passes the gate. */
  private async generate(engine: Engine, prompt: Prompt, request: SamplingRequest, signal: AbortSignal, onText: (text: string) => void): Promise<GenerationResult> {
    const { model, sequence } = engine;
    const tokens = prompt.tokens;
    // Reuse the cached prefix; at least one token is evaluated so that there is a next token.
    const { firstDifferentIndex } = sequence.compareContextTokens(tokens);
    const keep = Math.min(firstDifferentIndex, tokens.length - 1);
    if (keep < sequence.nextTokenIndex) await sequence.eraseContextTokenRanges([{ start: keep, end: sequence.nextTokenIndex }]);
    const limit = Math.min(request.maxTokens, sequence.contextSize - tokens.length);

    const options: SequenceEvaluateOptions = { temperature: request.temperature, yieldEogToken: true };
    if (request.topP !== null) options.topP = request.topP;
    if (request.topK !== null) options.topK = request.topK;
    if (request.seed !== null) options.seed = request.seed;

    const text = new TokenTextStream<Token>((pending, last) => model.detokenize(pending, false, last));
    const stops = new StopMatcher([...request.stop, ...prompt.stops]);
    let completionTokens = 0;
    let finishReason: FinishReason = 'length';
    let stopped = false;
    let aborted = false;
    let firstStep = true;
    // The prompt's evaluation is device work too: it starts inside our window, not someone else's.
    if (this.afterStep !== null) await this.afterStep(0);
    const iterator = sequence.evaluate(tokens.slice(keep), options);
    try {
      while (completionTokens < limit) {
        if (signal.aborted) {
          aborted = true;
          break;
        }
        const stepStart = monotonicUs();
        const next = await iterator.next();
        const stepUs = monotonicUs() - stepStart;
        this.metrics.decodeTotal++;
        if (firstStep) {
          this.metrics.promptTokensTotal += tokens.length - keep;
          this.metrics.promptSecondsTotal += stepUs / 1e6;
          firstStep = false;
        } else {
          this.metrics.tokensPredictedSecondsTotal += stepUs / 1e6;
        }
        if (this.afterStep !== null) await this.afterStep(stepUs);
        if (next.done === true) {
          finishReason = 'stop';
          break;
        }
        const token = next.value;
        if (model.isEogToken(token) || prompt.stopTokens.has(token)) {
          finishReason = 'stop';
          break;
        }
        completionTokens++;
        this.metrics.tokensPredictedTotal++;
        const piece = text.push(token);
        if (piece === '') continue;
        const out = stops.push(piece);
        if (out.text !== '' && !signal.aborted) onText(out.text);
        if (out.stopped) {
          stopped = true;
          finishReason = 'stop';
          break;
        }
      }
    } finally {
      await iterator.return();
    }
    if (!stopped && !aborted) {
      const tail = stops.push(text.flush());
      const rest = tail.stopped ? tail.text : tail.text + stops.flush();
      if (tail.stopped) finishReason = 'stop';
      if (rest !== '') onText(rest);
    }
    return { promptTokens: tokens.length, completionTokens, finishReason, aborted };
  }
}

const STARTED_S = Math.floor(Date.now() / 1000);

const ROUTES: Record<string, { name: 'health' | 'models' | 'metrics' | 'chat' | 'completion'; method: 'GET' | 'POST' }> = {
  '/health': { name: 'health', method: 'GET' },
  '/v1/health': { name: 'health', method: 'GET' },
  '/v1/models': { name: 'models', method: 'GET' },
  '/models': { name: 'models', method: 'GET' },
  '/metrics': { name: 'metrics', method: 'GET' },
  '/v1/chat/completions': { name: 'chat', method: 'POST' },
  '/chat/completions': { name: 'chat', method: 'POST' },
  '/v1/completions': { name: 'completion', method: 'POST' },
  '/completions': { name: 'completion', method: 'POST' },
};

/** Writes a generation as SSE chunks while it runs (stream) or as one JSON object at the end. */
class ResponseWriter {
  private content = '';
  private started = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly kind: 'chat' | 'completion',
    private readonly id: string,
    private readonly created: number,
    private readonly model: string,
    private readonly stream: boolean,
  ) {}

  text(piece: string): void {
    if (!this.stream) {
      this.content += piece;
      return;
    }
    this.start();
    this.event(this.chunk(this.kind === 'chat' ? { content: piece } : piece, null));
  }

  finish(finishReason: FinishReason, usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number }, includeUsage: boolean): void {
    if (this.res.destroyed || this.res.writableEnded) return;
    if (!this.stream) {
      const choice =
        this.kind === 'chat'
          ? { index: 0, message: { role: 'assistant', content: this.content }, finish_reason: finishReason }
          : { index: 0, text: this.content, logprobs: null, finish_reason: finishReason };
      sendJson(this.res, 200, { id: this.id, object: this.kind === 'chat' ? 'chat.completion' : 'text_completion', created: this.created, model: this.model, choices: [choice], usage });
      return;
    }
    this.start();
    this.event(this.chunk(this.kind === 'chat' ? {} : '', finishReason));
    if (includeUsage) this.event({ id: this.id, object: this.object(), created: this.created, model: this.model, choices: [], usage });
    this.res.write('data: [DONE]\n\n');
    this.res.end();
  }

  private object(): string {
    return this.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  }

  private chunk(delta: Record<string, string> | string, finishReason: FinishReason | null): Record<string, unknown> {
    const choice = typeof delta === 'string' ? { index: 0, text: delta, logprobs: null, finish_reason: finishReason } : { index: 0, delta, finish_reason: finishReason };
    return { id: this.id, object: this.object(), created: this.created, model: this.model, choices: [choice] };
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.res.socket?.setNoDelay(true);
    this.res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
    this.res.flushHeaders();
    if (this.kind === 'chat') this.event(this.chunk({ role: 'assistant', content: '' }, null));
  }

  private event(data: unknown): void {
    if (this.res.destroyed || this.res.writableEnded) return;
    this.res.write(`data: ${JSON.stringify(data)}\n\n`);
  }
}

function buildPrompt(engine: Engine, request: ChatRequest | CompletionRequest): Prompt {
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

// ---------------------------------------------------------------------------------------------
// main

function flushAndExit(code: number): void {
  const timer = setTimeout(() => process.exit(code), 300);
  try {
    process.stdout.write('', () => {
      clearTimeout(timer);
      process.exit(code);
    });
  } catch {
    process.exit(code);
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const parsed = parseHostArgs(argv);
  if (!parsed.ok) {
    process.stderr.write(`builtin-host: ${parsed.message}\n`);
    process.exitCode = 2;
    return;
  }
  const options = parsed.options;
  process.stdout.on('error', () => undefined);
  emit({ event: 'progress', pct: 0 });

  let cleanupRegistry: () => void = () => undefined;
  let exiting = false;
  const fatal = (message: string): void => {
    if (exiting) return;
    exiting = true;
    emit({ event: 'fatal', message });
    cleanupRegistry();
    flushAndExit(1);
  };
  process.on('uncaughtException', (error) => fatal(`uncaught: ${errorText(error)}`));
  process.on('unhandledRejection', (error) => fatal(`unhandled rejection: ${errorText(error)}`));

  try {
    accessSync(options.model, fsConstants.R_OK);
  } catch {
    fatal(`model file not found or not readable: ${options.model}`);
    return;
  }

  // The registry: our own peer, heartbeating, its activity re-judged every 100 ms.
  let afterStep: AfterStep | null = null;
  let slot: number | null = null;
  let setWeight: ((weight: number) => void) | null = null;
  if (options.registry !== null) {
    const { gpuKey, weight, name } = options.registry;
    try {
      const peer = joinAsPacedPeer(loadRegistryHelper(), { gpuKey, weight, name }, log);
      slot = peer.slot;
      afterStep = (stepUs) => peer.gate.afterStep(stepUs);
      setWeight = (w) => peer.setWeight(w);
      // Overshoot figures for the supervisor's metrics, in batches.
      const reporting = setInterval(() => {
        const overshoots = peer.gate.overshoot.take();
        if (overshoots.length > 0) emit({ event: 'pacer', overshoots_us: overshoots });
      }, OVERSHOOT_REPORT_INTERVAL_MS);
      reporting.unref();
      cleanupRegistry = () => {
        clearInterval(reporting);
        peer.leave();
      };
      log('info', `joined registry ${gpuKey} slot ${slot} as ${JSON.stringify(name)} (weight ${weight})`);
    } catch (error) {
      // A registry we may not use (another user's, a FIFO or a link at its name; full; foreign)
      // leaves the engine unpaced, as `gpu-share run` does: it serves either way, with one warning.
      if (!(error instanceof RegistryError)) {
        fatal(`could not join the registry ${gpuKey}: ${errorText(error)}`);
        return;
      }
      log('warn', `${error.message}; running unpaced`);
    }
  }

  const host = new Host(options, afterStep);
  // The secret comes in the environment (never argv, which any local user can read) and leaves it.
  const secret = process.env[ENGINE_SECRET_ENV];
  delete process.env[ENGINE_SECRET_ENV];
  if (secret !== undefined && secret !== '') host.door.secret = secret;
  const server: Server = createServer((req, res) => {
    host.handle(req, res).catch((error: unknown) => {
      log('error', `request failed: ${errorText(error)}`);
      if (!res.headersSent) sendError(res, 500, 'internal_error', errorText(error));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 5_000;

  let stopping: Promise<void> | null = null;
  const stop = (reason: string, graceMs: number): void => {
    if (stopping !== null || exiting) return;
    log('info', `stopping: ${reason}`);
    stopping = (async () => {
      server.close();
      await host.drain(graceMs);
      server.closeAllConnections();
      cleanupRegistry();
      exiting = true;
      flushAndExit(0);
    })();
  };
  process.on('SIGTERM', () => stop('SIGTERM', 1_500));
  process.on('SIGINT', () => stop('SIGINT', 1_500));

  // Exit with the parent: it may die without a word (kill -9), leaving us reparented.
  const parentPid = process.ppid;
  setInterval(() => {
    if (process.ppid !== parentPid) stop(`parent ${parentPid} went away`, 0);
  }, 500);
  // The supervisor's commands (a new weight from the slider): on the lifeline pipe, or as messages
  // when we run as an Electron utility process.
  if (stdinIsPipe() || 'parentPort' in process) {
    void readControlLines(process.stdin, (command) => {
      setWeight?.(command.weight);
      log('info', `weight set to ${command.weight}`);
    });
  }
  try {
    const stdin = fstatSync(0);
    if (stdin.isFIFO() || stdin.isSocket()) {
      process.stdin.on('end', () => stop('stdin closed (parent went away)', 0));
      process.stdin.on('error', () => stop('stdin failed (parent went away)', 0));
      process.stdin.resume();
    }
  } catch {
    // No stdin at all.
  }

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    fatal(`could not listen on ${options.host}:${options.port}: ${errorText(error)}`);
    return;
  }
  const port = (server.address() as AddressInfo).port;
  host.door.allowedHosts = allowedHosts(port);
  log('info', `listening on ${options.host}:${port} (loading the model)${host.door.secret === null ? '' : ', requests need its secret'}`);

  // Load: progress is monotonic 0..99 while loading, 100 once the context exists.
  let lastPct = 0;
  const progress = (fraction: number): void => {
    const pct = Math.min(99, Math.max(0, Math.floor(fraction * 100)));
    if (pct > lastPct) {
      lastPct = pct;
      emit({ event: 'progress', pct });
    }
  };
  const loadStarted = monotonicUs();
  let engine: Engine;
  try {
    const { getLlama, LlamaLogLevel, resolveChatWrapper } = await import('node-llama-cpp');
    const llama = await getLlama({
      gpu: options.gpuLayers === 0 ? false : 'auto',
      build: 'never',
      skipDownload: true,
      usePrebuiltBinaries: true,
      progressLogs: false,
      logLevel: LlamaLogLevel.warn,
      logger: (level, message) => {
        const text = message.trim();
        if (text === '') return;
        if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) log('error', `llama.cpp: ${text}`);
        else if (level === LlamaLogLevel.warn) log('warn', `llama.cpp: ${text}`);
      },
    });
    if (host.isStopping) return;
    progress(0.05);
    const model = await llama.loadModel({
      modelPath: options.model,
      gpuLayers: llama.gpu === false ? 0 : options.gpuLayers,
      onLoadProgress: (fraction) => progress(0.05 + fraction * 0.85),
      loadSignal: host.loadAbort.signal,
    });
    if (host.isStopping) return;
    progress(0.9);
    const threads = options.threads ?? llama.cpuMathCores;
    const context = await model.createContext({ contextSize: options.ctx, sequences: 1, threads });
    if (host.isStopping) return;
    engine = { llama, model, context, sequence: context.getSequence(), chatWrapper: resolveChatWrapper(model) };
    log(
      'info',
      `model loaded: ${options.alias} (${model.fileInsights.totalLayers} layers, ctx ${context.contextSize}, ${threads} threads, ` +
        `gpu ${llama.gpu === false ? 'none' : llama.gpu}, chat template ${engine.chatWrapper.wrapperName}) in ${((monotonicUs() - loadStarted) / 1e6).toFixed(2)} s`,
    );
  } catch (error) {
    if (host.isStopping) return;
    fatal(`could not load the model ${options.model}: ${errorText(error)}`);
    return;
  }
  host.setEngine(engine);
  emit({ event: 'progress', pct: 100 });
  emit({ event: 'ready', port, slot });
}

function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) void main(process.argv.slice(2));
