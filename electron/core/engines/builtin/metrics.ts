/**
 * The built-in engine's `/metrics`: its decode counters and request gauges as Prometheus text
 * under llama-server's names (`llamacpp:*`), so that one activity source reads both engines.
 * Owns the counters' shape and the text format; pure.
 */
import { TTFT_METRIC } from '../engine-figures.js';

/** What the token loop counts (decode.ts adds to these as it steps). */
export interface DecodeCounters {
  promptTokensTotal: number;
  promptSecondsTotal: number;
  tokensPredictedTotal: number;
  tokensPredictedSecondsTotal: number;
  decodeTotal: number;
  /** Seconds from each request's arrival to its first token, summed, and how many requests got
   *  one (the time to first token's summary). */
  firstTokenSecondsTotal: number;
  firstTokensTotal: number;
}

export interface HostMetrics extends DecodeCounters {
  requestsProcessing: number;
  requestsDeferred: number;
}

export function newDecodeCounters(): DecodeCounters {
  return { promptTokensTotal: 0, promptSecondsTotal: 0, tokensPredictedTotal: 0, tokensPredictedSecondsTotal: 0, decodeTotal: 0, firstTokenSecondsTotal: 0, firstTokensTotal: 0 };
}

/** Prometheus' text exposition format, version 0.0.4. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

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
  // Not one of llama-server's: a summary of the time to first token, waits included.
  const finite = (value: number): number => (Number.isFinite(value) ? value : 0);
  lines.push(
    `# HELP ${TTFT_METRIC} Time from a request's arrival to its first token.`,
    `# TYPE ${TTFT_METRIC} summary`,
    `${TTFT_METRIC}_sum ${finite(m.firstTokenSecondsTotal)}`,
    `${TTFT_METRIC}_count ${finite(m.firstTokensTotal)}`,
  );
  return `${lines.join('\n')}\n`;
}
