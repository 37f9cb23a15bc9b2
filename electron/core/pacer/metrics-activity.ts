/**
 * Activity from a llama.cpp-style server's Prometheus `/metrics` (llama-server with `--metrics`,
 * and the built-in engine host, which uses the same names): it is working while
 * `llamacpp:requests_processing` > 0 or `llamacpp:tokens_predicted_total` grows. Polled in the
 * background; when the endpoint does not answer, it says "cannot tell" and CPU time decides.
 */
import { metricValue } from '../engines/engine-figures.js';
import type { ActivitySource } from './process-gate.js';

export interface ServerMetrics {
  requestsProcessing: number;
  tokensPredicted: number;
}

/** The two figures from a Prometheus text body; null when either is missing. Pure. */
export function parseServerMetrics(text: string): ServerMetrics | null {
  const requestsProcessing = metricValue(text, 'llamacpp:requests_processing');
  const tokensPredicted = metricValue(text, 'llamacpp:tokens_predicted_total');
  return requestsProcessing === null || tokensPredicted === null ? null : { requestsProcessing, tokensPredicted };
}

/** Metrics older than this are not evidence. */
const FRESH_MS = 1_000;

export interface MetricsProbeOptions {
  /** Sent as `Authorization: Bearer <key>`: a server started with an API key asks for it on
   *  /metrics too. */
  apiKey?: string | undefined;
  pollMs?: number;
}

export function metricsActivity(url: string, fallback: ActivitySource, options: MetricsProbeOptions = {}): ActivitySource & { stop(): void } {
  const pollMs = options.pollMs ?? 100;
  const headers: Record<string, string> = options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` };
  let latest: { metrics: ServerMetrics; atMs: number } | null = null;
  let lastTokens: number | null = null;
  let inFlight = false;
  const poll = async (): Promise<void> => {
    if (inFlight) return;
    inFlight = true;
    try {
      const response = await fetch(url, { headers, signal: AbortSignal.timeout(500) });
      const metrics = response.ok ? parseServerMetrics(await response.text()) : null;
      if (metrics !== null) latest = { metrics, atMs: Date.now() };
    } catch {
      // not up yet, or gone: the CPU fallback decides meanwhile
    } finally {
      inFlight = false;
    }
  };
  const timer = setInterval(() => void poll(), pollMs);
  timer.unref();
  return {
    workUs: (pid) => fallback.workUs(pid),
    busyNow: () => {
      if (latest === null || Date.now() - latest.atMs > FRESH_MS) return null;
      const { requestsProcessing, tokensPredicted } = latest.metrics;
      const grew = lastTokens !== null && tokensPredicted > lastTokens;
      lastTokens = tokensPredicted;
      return requestsProcessing > 0 || grew;
    },
    stop: () => clearInterval(timer),
  };
}
