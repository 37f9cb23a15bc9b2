/**
 * The loopback API's HTTP plumbing: the one JSON error envelope, body reading with a limit, the
 * Host allow-list and the bearer token check. Pure helpers plus thin writers on node:http.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError, type ApiErrorCode } from '../contract.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;
/** Arrays and objects inside each other in a JSON body, at most (a deeper body is a 400: nothing
 *  we take is nested past a dozen levels, and a deep one would exhaust the stack later on). */
export const JSON_DEPTH_LIMIT = 64;

/** Time to receive a request's headers, the whole request, and between requests on a connection. */
export const HEADERS_TIMEOUT_MS = 10_000;
export const REQUEST_TIMEOUT_MS = 30_000;
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** A connection with no request in progress that sends nothing for this long is closed. Node's
 *  headers timeout starts at a request's first byte, so a connection that never sends one would
 *  otherwise hold its file descriptor for good. */
export const IDLE_TIMEOUT_MS = 10_000;

/**
 * The request timeouts of every server of ours (serve's port and each built-in engine's): a client
 * that sends its headers or body slowly is cut off (answers may stream for long: the request
 * timeout covers receiving the request only), and so is a connection that sends nothing while no
 * answer is in progress on it. The server must be created with `connectionsCheckingInterval`
 * 1000 (SERVER_OPTIONS) for the timeouts to be checked every second (Node's default: 30 s).
 */
export function applyRequestTimeouts(server: Server): void {
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // Inactivity on a socket: closed when no answer is in progress on it; an answer (a stream
  // waiting for its engine to load, say) may stay quiet for as long as it needs.
  const answering = new WeakSet<Socket>();
  server.timeout = IDLE_TIMEOUT_MS;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    answering.add(socket);
    res.once('close', () => answering.delete(socket));
  });
  server.on('timeout', (socket: Socket) => {
    if (!answering.has(socket)) socket.destroy();
  });
}

/** createServer's options for applyRequestTimeouts: no Host required (our 403, not Node's 400),
 *  timeouts checked every second. */
export const SERVER_OPTIONS = { requireHostHeader: false, connectionsCheckingInterval: 1_000 } as const;

/** Whether JSON text nests arrays and objects deeper than `limit` (strings skipped; one pass, no
 *  recursion, stops at the first level past the limit). */
export function jsonNestedDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** The status each error code answers with. */
export const STATUS_OF: Readonly<Record<ApiErrorCode, number>> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  TOO_LARGE: 413,
  QUEUE_FULL: 429,
  NOT_ADMITTED: 503,
  ENGINE_GONE: 503,
  INTERNAL: 500,
};

/** The Host headers a request may carry: exactly the loopback names with our port. Anything else
 *  (another name pointing here: DNS rebinding; an empty one) is refused before any handler. */
export function allowedHosts(port: number): ReadonlySet<string> {
  return new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
}

export function hostAllowed(host: string | undefined, allowed: ReadonlySet<string>): boolean {
  return host !== undefined && allowed.has(host.toLowerCase());
}

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/** Which of the known tokens the request carries (`Authorization: Bearer T`), compared in
 *  constant time over equal-length digests; null when none matches. */
export function matchToken<T>(header: string | undefined, tokens: ReadonlyMap<string, T>): T | null {
  if (header === undefined) return null;
  // The scheme is case-insensitive (RFC 9110 §11.1): "bearer T" is the same as "Bearer T".
  const match = /^Bearer +([A-Za-z0-9_-]{1,256})$/i.exec(header.trim());
  if (match === null) return null;
  const presented = digest(match[1] ?? '');
  let found: T | null = null;
  for (const [token, value] of tokens) {
    // Every token is compared, so the time does not tell which one (or whether any) matched.
    if (timingSafeEqual(presented, digest(token))) found = value;
  }
  return found;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store', ...headers });
  res.end(text);
}

export function sendError(res: ServerResponse, error: ApiError, headers: Record<string, string> = {}): void {
  sendJson(res, STATUS_OF[error.code], error.toBody(), headers);
}

/** OpenAI's error types and codes for ours (`/v1/*` answers as OpenAI's API does, so that its
 *  clients raise the right exception: NotFoundError, AuthenticationError, RateLimitError, …). */
const OPENAI_ERROR: Readonly<Record<ApiErrorCode, { type: string; code: string }>> = {
  BAD_REQUEST: { type: 'invalid_request_error', code: 'invalid_value' },
  UNAUTHORIZED: { type: 'invalid_request_error', code: 'invalid_api_key' },
  FORBIDDEN: { type: 'invalid_request_error', code: 'forbidden' },
  NOT_FOUND: { type: 'invalid_request_error', code: 'not_found' },
  CONFLICT: { type: 'invalid_request_error', code: 'conflict' },
  TOO_LARGE: { type: 'invalid_request_error', code: 'request_too_large' },
  QUEUE_FULL: { type: 'requests', code: 'rate_limit_exceeded' },
  NOT_ADMITTED: { type: 'server_error', code: 'not_admitted' },
  ENGINE_GONE: { type: 'server_error', code: 'engine_gone' },
  INTERNAL: { type: 'server_error', code: 'internal_error' },
};

/** An error as OpenAI's API shapes it: `{error:{message,type,param,code}}`, with the plan's
 *  verdict and reasons beside them when a load was refused. */
export function openAiErrorBody(error: ApiError): { error: Record<string, unknown> } {
  const { field, ...rest } = error.details;
  const mapped = OPENAI_ERROR[error.code];
  const code = error.code === 'NOT_FOUND' && field === 'model' ? 'model_not_found' : error.code === 'BAD_REQUEST' && error.message.includes('is not supported') ? 'unsupported_parameter' : mapped.code;
  return { error: { message: error.message, type: mapped.type, param: field ?? null, code, ...rest } };
}

export function sendOpenAiError(res: ServerResponse, error: ApiError, headers: Record<string, string> = {}): void {
  sendJson(res, STATUS_OF[error.code], openAiErrorBody(error), headers);
}

/** The body as JSON (an empty body is `{}`); TOO_LARGE past the limit, BAD_REQUEST when it is not
 *  JSON or nests deeper than JSON_DEPTH_LIMIT. The limit is checked on the declared length first and on the bytes as they come. */
export async function readJson(req: IncomingMessage, limit = BODY_LIMIT_BYTES): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (Number.isFinite(declared) && declared > limit) throw new ApiError('TOO_LARGE', `body: ${declared} bytes is over the limit of ${limit}`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > limit) throw new ApiError('TOO_LARGE', `body: over the limit of ${limit} bytes`);
    chunks.push(buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  if (jsonNestedDeeperThan(text, JSON_DEPTH_LIMIT)) throw new ApiError('BAD_REQUEST', `body: JSON nested deeper than ${JSON_DEPTH_LIMIT} levels (the limit)`, { field: 'body' });
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ApiError('BAD_REQUEST', `body: malformed JSON (${error instanceof Error ? error.message : String(error)})`, { field: 'body' });
  }
}

/**
 * What is left of a refused request's body: drained (not kept) up to the limit, so that a small
 * body leaves the connection usable; one that declares more than the limit, or sends more, has its
 * connection closed once the answer is out. A slow body is cut by the server's request timeout.
 */
export function discardBody(req: IncomingMessage, res: ServerResponse, limit = BODY_LIMIT_BYTES): void {
  if (req.complete) return;
  const close = (): void => {
    res.setHeader('connection', 'close');
    if (res.writableFinished) req.socket.destroy();
    else res.once('finish', () => req.socket.destroy());
  };
  const declared = Number(req.headers['content-length'] ?? '0');
  if (!Number.isFinite(declared) || declared > limit) {
    req.pause();
    close();
    return;
  }
  let seen = 0;
  req.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > limit) {
      req.pause();
      close();
    }
  });
  req.resume();
}
