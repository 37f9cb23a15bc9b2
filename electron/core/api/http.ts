/**
 * The loopback API's HTTP plumbing: the one JSON error envelope, body reading with a limit, the
 * Host allow-list and the bearer token check. Pure helpers plus thin writers on node:http.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, type ApiErrorCode } from '../contract.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;

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

/** The body as JSON (an empty body is `{}`); TOO_LARGE past the limit, BAD_REQUEST when it is not
 *  JSON. The limit is checked on the declared length first and on the bytes as they come. */
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
