/**
 * The built-in engine's HTTP side: who may use its port (loopback Host, JSON bodies, the
 * per-engine secret), the routes and their methods, reading bodies with a limit, writing JSON and
 * SSE, and the Host that ties a request to the token loop (decode.ts) one at a time.
 * Request and response shapes are openai-api.ts's; the Prometheus text is metrics.ts's.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { monotonicUs } from '../../clock.js';
import { errorText } from '../../error-text.js';
import { hostAllowed, JSON_DEPTH_LIMIT, jsonNestedDeeperThan, matchToken } from '../../api/http.js';
import type { GpuPeersView } from '../../registry/view.js';
import { buildPrompt, FifoLock, generate, type AfterStep, type Engine, type StepLog, type GenerationResult, type Prompt } from './decode.js';
import { completionFinal, completionPiece, parseLlamaCompletionRequest, propsBody, type PieceCounts } from './llama-api.js';
import { formatMetrics, METRICS_CONTENT_TYPE, newDecodeCounters } from './metrics.js';
import {
  completionBody,
  errorBody,
  parseChatRequest,
  parseCompletionRequest,
  streamChunk,
  usageChunk,
  usageOf,
  type ChatRequest,
  type Checked,
  type CompletionRequest,
  type ResponseMeta,
} from './openai-api.js';
import type { HostLogLevel } from '../host-protocol.js';

const MAX_BODY_BYTES = 8 * 1024 * 1024;

export class ShuttingDown extends Error {
  constructor() {
    super('the engine is shutting down');
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}


export function sendError(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}, param: string | null = null): void {
  sendJson(res, status, errorBody(status, code, message, param), headers);
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
 * adds it; under `gpu-share launch --api-key KEY` it is KEY, and without that flag there is none).
 * Reading /health, /v1/models, /metrics, /props and /gpu/peers needs no secret.
 */
export interface HostDoor {
  /** Host headers allowed (filled in once the port is known). */
  allowedHosts: ReadonlySet<string>;
  /** The engine's secret; null: none asked (started by hand, or by `launch` without --api-key). */
  secret: string | null;
}

export function doorCheck(req: Pick<IncomingMessage, 'headers' | 'method'>, door: HostDoor): { status: number; code: string; message: string } | null {
  if (!hostAllowed(req.headers.host, door.allowedHosts)) return { status: 403, code: 'forbidden', message: `Host ${JSON.stringify(req.headers.host ?? '')} is not this engine's loopback address` };
  if (req.method !== 'POST') return null;
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') return { status: 415, code: 'unsupported_media_type', message: 'the body must be sent as Content-Type: application/json' };
  if (door.secret !== null && matchToken(req.headers.authorization, new Map([[door.secret, true]])) === null) {
    // Its key is either the one `gpu-share launch --api-key` was given or, for an engine the app
    // or `serve` started, a secret only their gateway holds.
    return { status: 401, code: 'invalid_api_key', message: "this engine's port needs its API key as Authorization: Bearer KEY (the key gpu-share launch --api-key was given; an engine started by GPU Share's app or serve takes requests through its gateway)" };
  }
  return null;
}

const STARTED_S = Math.floor(Date.now() / 1000);

type GenerationKind = 'chat' | 'completion' | 'llama-completion';

const ROUTES: Record<string, { name: 'health' | 'models' | 'metrics' | 'props' | 'peers' | GenerationKind; method: 'GET' | 'POST' }> = {
  '/health': { name: 'health', method: 'GET' },
  '/v1/health': { name: 'health', method: 'GET' },
  '/v1/models': { name: 'models', method: 'GET' },
  '/models': { name: 'models', method: 'GET' },
  '/metrics': { name: 'metrics', method: 'GET' },
  '/v1/chat/completions': { name: 'chat', method: 'POST' },
  '/chat/completions': { name: 'chat', method: 'POST' },
  '/v1/completions': { name: 'completion', method: 'POST' },
  '/completions': { name: 'completion', method: 'POST' },
  // llama-server's own routes, for tools written against it.
  '/completion': { name: 'llama-completion', method: 'POST' },
  '/props': { name: 'props', method: 'GET' },
  '/gpu/peers': { name: 'peers', method: 'GET' },
};

/** How the log names each generation route. */
const ROUTE_LOG_NAME: Readonly<Record<GenerationKind, string>> = { chat: 'chat.completions', completion: 'completions', 'llama-completion': 'completion (llama-server)' };

/** Where a generation's text goes as it comes, and how it ends. */
interface GenerationWriter {
  /** A piece of the answer, and the tokens of the prompt and of the answer so far. */
  text(piece: string, counts: PieceCounts): void;
  finish(result: GenerationResult): void;
}

/** Writes a generation as OpenAI's SSE chunks while it runs (stream) or as one JSON object at the end. */
class ResponseWriter implements GenerationWriter {
  private content = '';
  private started = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly meta: ResponseMeta,
    private readonly stream: boolean,
    private readonly includeUsage: boolean,
  ) {}

  text(piece: string): void {
    if (!this.stream) {
      this.content += piece;
      return;
    }
    this.start();
    this.event(streamChunk(this.meta, this.meta.kind === 'chat' ? { content: piece } : piece, null));
  }

  finish(result: GenerationResult): void {
    const { finishReason } = result;
    const usage = usageOf(result.promptTokens, result.completionTokens);
    if (this.res.destroyed || this.res.writableEnded) return;
    if (!this.stream) {
      sendJson(this.res, 200, completionBody(this.meta, this.content, finishReason, usage));
      return;
    }
    this.start();
    this.event(streamChunk(this.meta, this.meta.kind === 'chat' ? {} : '', finishReason));
    if (this.includeUsage) this.event(usageChunk(this.meta, usage));
    this.res.write('data: [DONE]\n\n');
    this.res.end();
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    startEventStream(this.res);
    if (this.meta.kind === 'chat') this.event(streamChunk(this.meta, { role: 'assistant', content: '' }, null));
  }

  private event(data: unknown): void {
    writeEvent(this.res, data);
  }
}

/** Writes a llama-server `/completion`: `{"content":…,"stop":false}` events while it runs and a
 *  last one with `"stop":true` (no [DONE], as llama-server), or one JSON object at the end. */
class LlamaCompletionWriter implements GenerationWriter {
  private content = '';
  private started = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly stream: boolean,
    private readonly final: (content: string, result: GenerationResult) => Record<string, unknown>,
  ) {}

  text(piece: string, counts: PieceCounts): void {
    if (!this.stream) {
      this.content += piece;
      return;
    }
    this.start();
    writeEvent(this.res, completionPiece(piece, counts));
  }

  finish(result: GenerationResult): void {
    if (this.res.destroyed || this.res.writableEnded) return;
    if (!this.stream) {
      sendJson(this.res, 200, this.final(this.content, result));
      return;
    }
    this.start();
    writeEvent(this.res, this.final('', result));
    this.res.end();
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    startEventStream(this.res);
  }
}

/** The headers of a server-sent event stream, sent at once (no buffering on the way). */
function startEventStream(res: ServerResponse): void {
  res.socket?.setNoDelay(true);
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
  res.flushHeaders();
}

function writeEvent(res: ServerResponse, data: unknown): void {
  if (res.destroyed || res.writableEnded) return;
  res.write(`data: ${JSON.stringify(data)}\n\n`);
}

/** What the Host serves, as the flags said. */
export interface ServedModel {
  /** The name /v1/models lists and responses carry when the client named none. */
  alias: string;
  /** The GGUF file, as given (`/props`' model_path). */
  modelPath: string;
}

export type HostLog = (level: HostLogLevel, message: string) => void;

export class Host {
  private engine: Engine | null = null;
  readonly door: HostDoor = { allowedHosts: new Set(), secret: null };
  private readonly lock = new FifoLock();
  private readonly inflight = new Set<AbortController>();
  private readonly counters = newDecodeCounters();
  private stopping = false;
  readonly loadAbort = new AbortController();
  private idle: (() => void) | null = null;

  constructor(
    private readonly served: ServedModel,
    private readonly afterStep: AfterStep | null,
    private readonly log: HostLog,
    /** Our device's registry peers (`/gpu/peers`); null when the engine did not join a registry. */
    private readonly peers: (() => GpuPeersView) | null,
    /** The registry asked for, and why the engine runs unpaced right now (null while paced). */
    private readonly registry: { gpuKey: string | null; unpacedBecause: () => string | null },
    /** Every decode step, when the pacer's trace is asked for (pacer/trace.ts). */
    private readonly stepLog: StepLog | null = null,
  ) {}

  /** Generation requests in flight or queued: what the engine's `active` flag follows
   *  (pacer/paced-peer.ts knowRequests). */
  get pendingRequests(): number {
    return this.inflight.size;
  }

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
        sendJson(res, 200, { object: 'list', data: [{ id: this.served.alias, object: 'model', owned_by: 'gpu-share', created: STARTED_S }] });
        return;
      case 'metrics': {
        const text = formatMetrics({
          ...this.counters,
          requestsProcessing: this.lock.busy ? 1 : 0,
          requestsDeferred: this.lock.waiting,
        });
        res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      case 'props': {
        const engine = this.engine;
        sendJson(
          res,
          200,
          propsBody({
            alias: this.served.alias,
            modelPath: this.served.modelPath,
            nCtx: engine?.sequence.contextSize ?? null,
            isProcessing: this.lock.busy,
            chatTemplate: engine?.model.fileInfo.metadata.tokenizer.chat_template ?? null,
            peers: this.propsPeers(),
          }),
        );
        return;
      }
      case 'peers': {
        if (this.peers === null) {
          sendError(res, 404, 'not_found', 'this engine has not joined a GPU registry (started without --gpu-key, or the registry refused it)');
          return;
        }
        const view = this.peersView();
        if (view === null) sendError(res, 503, 'unavailable', 'the GPU registry could not be read');
        else sendJson(res, 200, view);
        return;
      }
      case 'chat':
      case 'completion':
      case 'llama-completion':
        await this.generation(route.name, req, res);
        return;
    }
  }

  /** The registry view, or null when there is none or it cannot be read now (logged). */
  /** The peers for /props, or why there are none: /props always has its gpu_share block. */
  private propsPeers(): GpuPeersView | { gpuKey: string | null; unpacedBecause: string } {
    const unpaced = this.registry.unpacedBecause();
    const view = unpaced === null ? this.peersView() : null;
    return view ?? { gpuKey: this.registry.gpuKey, unpacedBecause: unpaced ?? 'the GPU registry could not be read' };
  }

  private peersView(): GpuPeersView | null {
    if (this.peers === null) return null;
    try {
      return this.peers();
    } catch (error) {
      this.log('warn', `the registry could not be read: ${errorText(error)}`);
      return null;
    }
  }

  private async generation(kind: GenerationKind, req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw: string;
    try {
      raw = await readBody(req);
    } catch (error) {
      if (error instanceof BodyTooLarge) sendError(res, 413, 'invalid_request', error.message, { Connection: 'close' });
      return;
    }
    if (jsonNestedDeeperThan(raw, JSON_DEPTH_LIMIT)) {
      sendError(res, 400, 'invalid_request', `the body is JSON nested deeper than ${JSON_DEPTH_LIMIT} levels (the limit)`);
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      sendError(res, 400, 'invalid_request', 'the body is not valid JSON');
      return;
    }
    const parsed: Checked<ChatRequest | CompletionRequest> = kind === 'chat' ? parseChatRequest(body) : kind === 'completion' ? parseCompletionRequest(body) : parseLlamaCompletionRequest(body);
    if (!parsed.ok) {
      sendError(res, 400, 'invalid_request', parsed.message, {}, parsed.param);
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
      sendError(res, 400, 'invalid_request', 'the prompt is empty', {}, request.kind === 'chat' ? 'messages' : 'prompt');
      return;
    }
    if (prompt.tokens.length >= engine.sequence.contextSize) {
      sendError(res, 400, 'invalid_request', `the prompt is ${prompt.tokens.length} tokens; the context holds ${engine.sequence.contextSize}`, {}, request.kind === 'chat' ? 'messages' : 'prompt');
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
      // The model as the client named it (the gateway passes its name on), else our alias.
      const asked = (body as { model?: unknown }).model;
      const model = typeof asked === 'string' && asked !== '' ? asked.slice(0, 256) : this.served.alias;
      const nCtx = engine.sequence.contextSize;
      const writer: GenerationWriter =
        kind === 'llama-completion' && request.kind === 'completion'
          ? new LlamaCompletionWriter(res, request.stream, (content, result) => completionFinal(content, request, result, nCtx, model))
          : new ResponseWriter(res, { kind: request.kind, id, created, model }, request.stream, request.includeUsage);
      const result = await generate(engine, prompt, request, controller.signal, (text, completionTokens) => writer.text(text, { predicted: completionTokens, evaluated: prompt.tokens.length }), { afterStep: this.afterStep, counters: this.counters, arrivedUs: started, stepLog: this.stepLog });
      if (result.aborted && controller.signal.reason instanceof ShuttingDown && !request.stream) {
        sendError(res, 503, 'unavailable', 'the engine is shutting down');
      } else if (!result.aborted || controller.signal.reason instanceof ShuttingDown) {
        writer.finish(result);
      }
      const seconds = ((monotonicUs() - started) / 1e6).toFixed(2);
      const shape = request.kind === 'chat' ? `${request.messages.length} message${request.messages.length === 1 ? '' : 's'}` : `${request.prompt.length} prompt chars`;
      this.log(
        'info',
        `${ROUTE_LOG_NAME[kind]}: ${shape}, ${result.promptTokens} prompt tokens, ${result.completionTokens} completion tokens, ` +
          `finish ${result.aborted ? 'aborted' : result.finishReason}, ${request.stream ? 'stream' : 'json'}, ${seconds} s`,
      );
    } catch (error) {
      this.log('error', `${ROUTE_LOG_NAME[kind]} failed: ${errorText(error)}`);
      if (!res.headersSent) sendError(res, 500, 'internal_error', errorText(error));
      else if (!res.writableEnded) {
        res.write(`data: ${JSON.stringify(errorBody(500, 'internal_error', errorText(error)))}\n\n`);
        res.end();
      }
    } finally {
      release?.();
      res.off('close', onClose);
      this.inflight.delete(controller);
      if (this.inflight.size === 0) this.idle?.();
    }
  }
}
