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
import { metricValue } from '../prometheus-text.js';
import { startPoller } from './http-poll.js';
import type { ActivitySource } from './process-gate.js';
import type { GateTraceEvent } from './trace.js';

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

/** Idle answers in a row that make a known idle (see the poll's answer handler). */
const IDLE_ANSWERS = 2;

/** How often the server is asked. */
export const METRICS_POLL_MS = 100;

export interface MetricsProbeOptions {
  /** Sent as `Authorization: Bearer <key>`: a server started with an API key asks for it on
   *  /metrics too. */
  apiKey?: string | undefined;
  pollMs?: number;
  /** Every poll sent, skipped or given up, and every answer with what it said (pacer/trace.ts). */
  trace?: ((event: GateTraceEvent) => void) | undefined;
  /** The trace's wall clock (µs). */
  wallUs?: () => number;
}

export function metricsActivity(url: string, fallback: ActivitySource, options: MetricsProbeOptions = {}): ActivitySource & { stop(): void } {
  let previous: ServerMetrics | null = null;
  let verdict: { busy: boolean | null; atMs: number } | null = null;
  let idleAnswers = 0;
  const trace = options.trace;
  const wallUs = options.wallUs ?? ((): number => Date.now() * 1000);
  const poller = startPoller(
    url,
    options.apiKey,
    options.pollMs ?? METRICS_POLL_MS,
    (text) => {
      const metrics = text === null ? null : parseServerMetrics(text);
      if (metrics === null) {
        trace?.({ k: 'answer', t: wallUs(), busy: null, why: text === null ? 'not 200' : 'no llama.cpp metrics' });
        return;
      }
      const busy = busyByMetrics(previous, metrics);
      // Idle is said on the second idle answer in a row (nothing in flight, queued or generated
      // across two polls): one answer that lands in a client's short gap between two requests
      // is not enough when polls come late on a loaded machine. The first one says "cannot
      // tell" rather than "busy", so that the hysteresis runs from the last evidence of work,
      // not from this answer.
      idleAnswers = busy ? 0 : idleAnswers + 1;
      verdict = { busy: busy ? true : idleAnswers >= IDLE_ANSWERS ? false : null, atMs: Date.now() };
      trace?.({ k: 'answer', t: wallUs(), busy, processing: metrics.requestsProcessing, deferred: metrics.requestsDeferred, predicted: metrics.tokensPredicted });
      previous = metrics;
    },
    trace === undefined ? undefined : (what) => trace({ k: 'poll', t: wallUs(), what }),
  );
  return {
    workUs: (pid) => fallback.workUs(pid),
    busyNow: () => (verdict === null || Date.now() - verdict.atMs > FRESH_MS ? null : verdict.busy),
    stop: () => poller.stop(),
  };
}
