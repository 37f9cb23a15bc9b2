/**
 * Activity from a llama.cpp-style server's Prometheus `/metrics` (llama-server with `--metrics`,
 * llamafile, and the built-in engine host, which uses the same names): it is working while
 * `llamacpp:requests_processing` or `llamacpp:requests_deferred` (queued) is above 0, or
 * `llamacpp:tokens_predicted_total` grew since the previous poll (a request that began and ended
 * between two polls; it also bridges the short gaps of a client sending back to back). Idle means
 * known idle: nothing in flight, nothing queued, nothing generated since the last poll. Polled every
 * 100 ms over one keep-alive connection (a poll costs ~0.1 ms of CPU: see pacer/NOTES.md); when the
 * endpoint does not answer, it says "cannot tell" and CPU time decides.
 */
import type { ClientRequest } from 'node:http';
import { Agent as HttpAgent, get as httpGet } from 'node:http';
import { Agent as HttpsAgent, get as httpsGet } from 'node:https';
import { metricValue } from '../prometheus-text.js';
import type { ActivitySource } from './process-gate.js';

export interface ServerMetrics {
  requestsProcessing: number;
  /** Requests queued behind the busy slots; 0 when the server does not report it (older builds). */
  requestsDeferred: number;
  tokensPredicted: number;
}

/** The figures from a Prometheus text body; null when requests_processing or
 *  tokens_predicted_total is missing. Pure. */
export function parseServerMetrics(text: string): ServerMetrics | null {
  const requestsProcessing = metricValue(text, 'llamacpp:requests_processing');
  const tokensPredicted = metricValue(text, 'llamacpp:tokens_predicted_total');
  if (requestsProcessing === null || tokensPredicted === null) return null;
  return { requestsProcessing, requestsDeferred: metricValue(text, 'llamacpp:requests_deferred') ?? 0, tokensPredicted };
}

/** Working, by one poll and the one before it. Pure. */
export function busyByMetrics(previous: ServerMetrics | null, now: ServerMetrics): boolean {
  const grew = previous !== null && now.tokensPredicted > previous.tokensPredicted;
  return now.requestsProcessing > 0 || now.requestsDeferred > 0 || grew;
}

/** Metrics older than this are not evidence. */
const FRESH_MS = 1_000;

/** How often the server is asked. */
export const METRICS_POLL_MS = 100;

export interface MetricsProbeOptions {
  /** Sent as `Authorization: Bearer <key>`: a server started with an API key asks for it on
   *  /metrics too. */
  apiKey?: string | undefined;
  pollMs?: number;
}

export function metricsActivity(url: string, fallback: ActivitySource, options: MetricsProbeOptions = {}): ActivitySource & { stop(): void } {
  let previous: ServerMetrics | null = null;
  let verdict: { busy: boolean; atMs: number } | null = null;
  const poller = startPoller(url, options.apiKey, options.pollMs ?? METRICS_POLL_MS, (text) => {
    const metrics = text === null ? null : parseServerMetrics(text);
    if (metrics === null) return;
    verdict = { busy: busyByMetrics(previous, metrics), atMs: Date.now() };
    previous = metrics;
  });
  return {
    workUs: (pid) => fallback.workUs(pid),
    busyNow: () => (verdict === null || Date.now() - verdict.atMs > FRESH_MS ? null : verdict.busy),
    stop: () => poller.stop(),
  };
}

/** A /metrics page is a few KB; more than this is not one. */
const MAX_BODY_BYTES = 256 * 1024;
/** A poll not answered in this long is abandoned (its connection with it). */
const POLL_TIMEOUT_MS = 500;

/**
 * GET `url` every `pollMs` over one keep-alive connection (a new one only after an error), one
 * request at a time, handing each 200 body to `onBody` (null for anything else). `stop` ends the
 * timer, the request in flight and the connection: a server that closes gracefully (Node's
 * `server.close()` waits for busy connections) is not kept alive by us.
 */
export function startPoller(url: string, apiKey: string | undefined, pollMs: number, onBody: (text: string | null) => void): { stop(): void } {
  const target = new URL(url);
  const secure = target.protocol === 'https:';
  const agent = secure ? new HttpsAgent({ keepAlive: true, maxSockets: 1 }) : new HttpAgent({ keepAlive: true, maxSockets: 1 });
  const get = secure ? httpsGet : httpGet;
  const headers: Record<string, string> = apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
  let current: ClientRequest | null = null;
  let stopped = false;
  const poll = (): void => {
    if (current !== null || stopped) return;
    const request = get(target, { agent, headers, timeout: POLL_TIMEOUT_MS }, (response) => {
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
    request.on('timeout', () => request.destroy());
    // Not up yet, or gone: the caller's fallback decides meanwhile.
    request.on('error', () => undefined);
    request.on('close', () => {
      if (current === request) current = null;
    });
    current = request;
  };
  const timer = setInterval(poll, pollMs);
  timer.unref();
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
      current?.destroy();
      agent.destroy();
    },
  };
}
