/** An engine's live figures from its /metrics: tokens per second and the time to first token. */
import { describe, expect, it } from 'vitest';
import { engineFigures, parseEngineCounters, type CounterReading } from '../../electron/core/engines/engine-figures.js';
import { metricValue } from '../../electron/core/prometheus-text.js';

// What llama-server answers (b5000-ish): prompt and decode counters, no count of requests.
const LLAMA_SERVER = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 6886
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 2903.63
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 3469
llamacpp:requests_processing 0
`;

const builtin = (tokens: number, sum: number, count: number): string =>
  `llamacpp:tokens_predicted_total ${tokens}\ngpushare_time_to_first_token_seconds_sum ${sum}\ngpushare_time_to_first_token_seconds_count ${count}\n`;
const at = (text: string, atMs: number): CounterReading => ({ counters: parseEngineCounters(text), atMs });

describe('engine figures from /metrics', () => {
  it("reads llama-server's token counter and says it reports no time to first token (not one made up from prompt seconds)", () => {
    expect(parseEngineCounters(LLAMA_SERVER)).toEqual({ tokensPredicted: 3469, ttftSecondsSum: null, ttftCount: null });
    const figures = engineFigures(at(LLAMA_SERVER, 0), at(LLAMA_SERVER.replace('3469', '3569'), 2_000), null);
    expect(figures).toEqual({ tokensPerSecond: 50, timeToFirstTokenMs: null });
  });

  it('gives the mean time to first token of the requests since the last reading, and keeps the latest while none arrives', () => {
    const first = engineFigures(null, at(builtin(0, 0, 0), 0), null);
    expect(first).toEqual({ tokensPerSecond: null, timeToFirstTokenMs: null });
    const two = engineFigures(at(builtin(0, 0, 0), 0), at(builtin(40, 0.3, 2), 2_000), first);
    expect(two.tokensPerSecond).toBe(20);
    expect(two.timeToFirstTokenMs).toBeCloseTo(150, 6);
    const quiet = engineFigures(at(builtin(40, 0.3, 2), 2_000), at(builtin(40, 0.3, 2), 4_000), two);
    expect(quiet).toEqual({ tokensPerSecond: 0, timeToFirstTokenMs: two.timeToFirstTokenMs });
    const slower = engineFigures(at(builtin(40, 0.3, 2), 4_000), at(builtin(60, 1.3, 3), 6_000), quiet);
    expect(slower.timeToFirstTokenMs).toBeCloseTo(1000, 6);
  });

  it('gives no figure across a restart (counters went back) or without an earlier reading', () => {
    const reset = engineFigures(at(builtin(500, 4, 10), 0), at(builtin(20, 0.1, 1), 2_000), { tokensPerSecond: 9, timeToFirstTokenMs: 400 });
    expect(reset.tokensPerSecond).toBeNull();
    expect(reset.timeToFirstTokenMs).toBe(400);
    expect(engineFigures(null, at(builtin(500, 4, 10), 0), null)).toEqual({ tokensPerSecond: null, timeToFirstTokenMs: 400 });
  });

  it('reads values with labels and timestamps, and no value from a line that is not a number', () => {
    expect(metricValue('x_total{slot="0"} 12 1712345678000\n', 'x_total')).toBe(12);
    expect(metricValue('x_total NaN\n', 'x_total')).toBeNull();
    expect(metricValue('x_total_more 3\n', 'x_total')).toBeNull();
    expect(metricValue('', 'x_total')).toBeNull();
  });
});
