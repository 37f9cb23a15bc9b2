/**
 * Live figures of an engine from its own Prometheus `/metrics`, read every few seconds: tokens
 * decoded per second, and the time to first token. llama-server's counters (`llamacpp:*`) give
 * tokens and the seconds spent on prompts and on decoding, but no count of requests, so they
 * cannot say how long a request waited for its first token; the built-in engine adds a summary,
 * `gpushare_time_to_first_token_seconds` (`_sum` and `_count`: from a request's arrival, its wait
 * for the engine and its window included, to its first token). An engine without it has no time
 * to first token (null, "not reported"), never one made up from prompt throughput. Pure.
 */

import { metricValue } from '../prometheus-text.js';

export interface EngineCounters {
  /** llamacpp:tokens_predicted_total; null when the engine does not report it. */
  tokensPredicted: number | null;
  ttftSecondsSum: number | null;
  ttftCount: number | null;
}

/** One reading of an engine's counters and when it was taken (wall ms). */
export interface CounterReading {
  counters: EngineCounters;
  atMs: number;
}

export interface EngineFigures {
  tokensPerSecond: number | null;
  /** Mean over the requests that got their first token since the previous reading; when none did,
   *  the previous figure stands (it is the latest requests'); null until a first one. */
  timeToFirstTokenMs: number | null;
}

export const TTFT_METRIC = 'gpushare_time_to_first_token_seconds';

export function parseEngineCounters(text: string): EngineCounters {
  return {
    tokensPredicted: metricValue(text, 'llamacpp:tokens_predicted_total'),
    ttftSecondsSum: metricValue(text, `${TTFT_METRIC}_sum`),
    ttftCount: metricValue(text, `${TTFT_METRIC}_count`),
  };
}

/** The figures between two readings of one engine (before: null for its first reading). A counter
 *  that went backwards (the engine restarted) gives no figure for that interval. */
export function engineFigures(before: CounterReading | null, after: CounterReading, previous: EngineFigures | null): EngineFigures {
  const seconds = before === null ? 0 : (after.atMs - before.atMs) / 1000;
  const grew = (a: number | null | undefined, b: number | null): number | null => (a === null || a === undefined || b === null || b < a ? null : b - a);
  const tokens = grew(before?.counters.tokensPredicted, after.counters.tokensPredicted);
  const tokensPerSecond = tokens === null || seconds <= 0 ? null : tokens / seconds;
  const count = grew(before?.counters.ttftCount, after.counters.ttftCount);
  const sum = grew(before?.counters.ttftSecondsSum, after.counters.ttftSecondsSum);
  let timeToFirstTokenMs: number | null;
  if (after.counters.ttftCount === null || after.counters.ttftSecondsSum === null) timeToFirstTokenMs = null;
  else if (count !== null && count > 0 && sum !== null) timeToFirstTokenMs = (sum / count) * 1000;
  else if (before === null && after.counters.ttftCount > 0) timeToFirstTokenMs = (after.counters.ttftSecondsSum / after.counters.ttftCount) * 1000;
  else timeToFirstTokenMs = previous?.timeToFirstTokenMs ?? null;
  return { tokensPerSecond, timeToFirstTokenMs };
}
