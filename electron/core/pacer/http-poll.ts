/**
 * A cheap HTTP/1.1 GET poller for a loopback endpoint asked 10 times a second (a llama.cpp server's
 * /metrics): one keep-alive TCP connection, the request's bytes built once, the response read by a
 * small parser (status, Content-Length or chunked). Node's http client cost ~0.8 ms of CPU per poll
 * here (0.8 % of a core at 100 ms); this costs a fraction of that (pacer/NOTES.md). https URLs go
 * through node:https with a keep-alive agent. Everything read is untrusted: a response over
 * MAX_BODY_BYTES, one that does not parse, or one that takes over POLL_TIMEOUT_MS drops the
 * connection, and the next poll opens a new one.
 */
import { Agent as HttpsAgent, get as httpsGet } from 'node:https';
import type { ClientRequest } from 'node:http';
import { connect, type Socket } from 'node:net';

/** A /metrics page is a few KB; more than this is not one. */
export const MAX_BODY_BYTES = 256 * 1024;
/** A poll not answered in this long is abandoned (its connection with it). */
export const POLL_TIMEOUT_MS = 500;

export type ParsedResponse = { kind: 'done'; status: number; body: Buffer; consumed: number; close: boolean } | { kind: 'incomplete' } | { kind: 'bad'; why: string };

const HEAD_END = Buffer.from('\r\n\r\n');

/** One HTTP/1.1 response at the start of `buf`. Pure. */
export function parseHttpResponse(buf: Buffer): ParsedResponse {
  const headEnd = buf.indexOf(HEAD_END);
  if (headEnd < 0) return buf.length > 16 * 1024 ? { kind: 'bad', why: 'headers over 16 KiB' } : { kind: 'incomplete' };
  const lines = buf.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(lines[0] ?? '');
  if (status === null) return { kind: 'bad', why: 'no status line' };
  let length: number | null = null;
  let chunked = false;
  let close = (lines[0] ?? '').startsWith('HTTP/1.0');
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return { kind: 'bad', why: 'a header without a name' };
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim().toLowerCase();
    if (name === 'content-length') {
      if (!/^\d{1,9}$/.test(value)) return { kind: 'bad', why: 'Content-Length is not a number' };
      length = Number(value);
    } else if (name === 'transfer-encoding') chunked = value.split(',').map((v) => v.trim()).includes('chunked');
    else if (name === 'connection') close = value.split(',').map((v) => v.trim()).includes('close') || (close && !value.includes('keep-alive'));
  }
  const start = headEnd + 4;
  if (chunked) {
    const parts: Buffer[] = [];
    let at = start;
    let size = 0;
    for (;;) {
      const lineEnd = buf.indexOf('\r\n', at);
      if (lineEnd < 0) return { kind: 'incomplete' };
      const hex = buf.subarray(at, lineEnd).toString('latin1').split(';')[0]?.trim() ?? '';
      if (!/^[0-9a-fA-F]{1,8}$/.test(hex)) return { kind: 'bad', why: 'a chunk size is not hex' };
      const chunk = parseInt(hex, 16);
      size += chunk;
      if (size > MAX_BODY_BYTES) return { kind: 'bad', why: `body over ${MAX_BODY_BYTES} bytes` };
      if (chunk === 0) {
        // Trailers, if any, end with an empty line.
        const end = buf.indexOf(HEAD_END, lineEnd);
        if (end < 0) return { kind: 'incomplete' };
        return { kind: 'done', status: Number(status[1]), body: Buffer.concat(parts), consumed: end + 4, close };
      }
      const dataStart = lineEnd + 2;
      if (buf.length < dataStart + chunk + 2) return { kind: 'incomplete' };
      parts.push(buf.subarray(dataStart, dataStart + chunk));
      at = dataStart + chunk + 2;
    }
  }
  if (length === null) return { kind: 'bad', why: 'neither Content-Length nor chunked' };
  if (length > MAX_BODY_BYTES) return { kind: 'bad', why: `body over ${MAX_BODY_BYTES} bytes` };
  if (buf.length < start + length) return { kind: 'incomplete' };
  return { kind: 'done', status: Number(status[1]), body: buf.subarray(start, start + length), consumed: start + length, close };
}

/**
 * GET `url` every `pollMs`, one request at a time, handing each 200 body to `onBody` (null for any
 * other status). `stop` ends the timer, the request in flight and the connection: a server that
 * closes gracefully (Node's `server.close()` waits for busy connections) is not kept alive by us.
 */
export type PollEvent = 'sent' | 'in-flight' | 'timed-out';

/** `onPoll` (a trace: pacer/trace.ts) hears each request sent, each tick skipped because the
 *  previous request is still unanswered, and each one given up after POLL_TIMEOUT_MS. */
export function startPoller(url: string, apiKey: string | undefined, pollMs: number, onBody: (text: string | null) => void, onPoll?: (event: PollEvent) => void): { stop(): void } {
  const target = new URL(url);
  const poll = target.protocol === 'https:' ? httpsPoll(target, apiKey, onBody, onPoll) : plainPoll(target, apiKey, onBody, onPoll);
  const timer = setInterval(poll.poll, pollMs);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      poll.stop();
    },
  };
}

interface Poll {
  poll(): void;
  stop(): void;
}

function plainPoll(target: URL, apiKey: string | undefined, onBody: (text: string | null) => void, onPoll?: (event: PollEvent) => void): Poll {
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = target.port === '' ? 80 : Number(target.port);
  const request = Buffer.from(`GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n${apiKey === undefined ? '' : `Authorization: Bearer ${apiKey}\r\n`}Connection: keep-alive\r\n\r\n`, 'latin1');
  let socket: Socket | null = null;
  let pending: Buffer = Buffer.alloc(0);
  /** When the request in flight was sent (ms); null when none is. */
  let askedAtMs: number | null = null;
  let stopped = false;
  const drop = (): void => {
    socket?.destroy();
    socket = null;
    pending = Buffer.alloc(0);
    askedAtMs = null;
  };
  const open = (): Socket => {
    const fresh = connect({ host, port, noDelay: true });
    fresh.unref(); // between polls the connection keeps nobody alive
    fresh.on('data', (data: Buffer) => {
      if (fresh !== socket) return;
      pending = pending.length === 0 ? data : Buffer.concat([pending, data]);
      const parsed = parseHttpResponse(pending);
      if (parsed.kind === 'incomplete') return;
      if (parsed.kind === 'bad' || askedAtMs === null || parsed.consumed !== pending.length) {
        drop(); // not a response we can read, unasked for, or more than one: start afresh
        return;
      }
      const close = parsed.close;
      const body = parsed.status === 200 ? parsed.body.toString('utf8') : null;
      pending = Buffer.alloc(0);
      askedAtMs = null;
      if (close) drop();
      if (!stopped) onBody(body);
    });
    fresh.on('error', () => undefined); // not up yet, or gone: the caller's fallback decides
    fresh.on('close', () => {
      if (fresh === socket) drop();
    });
    return fresh;
  };
  return {
    poll: () => {
      if (stopped) return;
      if (askedAtMs !== null) {
        // Checked at the next tick rather than by a timer of its own: one timer less per poll.
        if (Date.now() - askedAtMs < POLL_TIMEOUT_MS) {
          onPoll?.('in-flight');
          return;
        }
        drop();
        onPoll?.('timed-out');
      }
      socket ??= open();
      askedAtMs = Date.now();
      socket.write(request);
      onPoll?.('sent');
    },
    stop: () => {
      stopped = true;
      drop();
    },
  };
}

function httpsPoll(target: URL, apiKey: string | undefined, onBody: (text: string | null) => void, onPoll?: (event: PollEvent) => void): Poll {
  const agent = new HttpsAgent({ keepAlive: true, maxSockets: 1 });
  const headers: Record<string, string> = apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
  let current: ClientRequest | null = null;
  let stopped = false;
  return {
    poll: () => {
      if (stopped) return;
      if (current !== null) {
        onPoll?.('in-flight');
        return;
      }
      const request = httpsGet(target, { agent, headers, timeout: POLL_TIMEOUT_MS }, (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY_BYTES) request.destroy();
          else chunks.push(chunk);
        });
        response.on('end', () => {
          current = null;
          if (!stopped) onBody(response.statusCode === 200 ? Buffer.concat(chunks).toString('utf8') : null);
        });
        response.on('error', () => undefined);
      });
      request.on('timeout', () => {
        onPoll?.('timed-out');
        request.destroy();
      });
      request.on('error', () => undefined);
      request.on('close', () => {
        if (current === request) current = null;
      });
      current = request;
      onPoll?.('sent');
    },
    stop: () => {
      stopped = true;
      current?.destroy();
      agent.destroy();
    },
  };
}
