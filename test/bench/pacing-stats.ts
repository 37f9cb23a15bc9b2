/** Figures the pacing benchmarks derive from token timestamps (µs on the wall clock). Pure. */
import { medianOf } from '../../electron/core/pacer/gate.js';

export const round = (x: number, digits = 2): number => Math.round(x * 10 ** digits) / 10 ** digits;

/** A split: `a` over `b` to three digits; null when either is missing or `b` is not positive. */
export const splitOf = (a: number | null | undefined, b: number | null | undefined): number | null => (a === undefined || a === null || b === undefined || b === null || b <= 0 ? null : round(a / b, 3));

/** A plain-text table: a header, a rule, and the rows, each column as wide as its widest cell. */
export function textTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

export function gapsMs(tokens: number[], fromUs: number, toUs: number): number[] {
  const inside = tokens.filter((t) => t >= fromUs && t < toUs);
  const gaps: number[] = [];
  for (let i = 1; i < inside.length; i++) gaps.push(((inside[i] ?? 0) - (inside[i - 1] ?? 0)) / 1000);
  return gaps.sort((a, b) => a - b);
}

export function summary(gaps: number[]): { p50: number; p95: number; max: number } {
  return { p50: round(percentile(gaps, 0.5)), p95: round(percentile(gaps, 0.95)), max: round(gaps[gaps.length - 1] ?? 0) };
}

export const rate = (tokens: number[], fromUs: number, toUs: number): number => tokens.filter((t) => t >= fromUs && t < toUs).length / ((toUs - fromUs) / 1e6);

/** One streamed request as its client saw it: when each piece of text arrived (wall µs), and the
 *  tokens the engine says it generated (the stream's usage, at its end; null when the request was
 *  cut off before it), with the time that usage arrived. */
export interface StreamedRequest {
  piecesUs: number[];
  tokens: number | null;
  endUs: number | null;
}

/**
 * The tokens a client received in [fromUs, toUs), from its requests' pieces of text. A piece need
 * not be one token: a character whose bytes are several tokens comes out as one piece once it is
 * whole, and a token whose text is held back (a partial character) adds none. So a finished
 * request's tokens (its usage) are spread evenly over its pieces, rather than counted one a piece
 * and the rest all at once at its end (on a generated model a quarter of a request's tokens, one
 * lump of ~100 at a 400-token request's end, which decided whether a 2.5 s block read ±10 %); a
 * request cut off before its usage counts the client's mean tokens a piece over its finished
 * requests (1 when none finished), and a finished one without pieces counts at its end.
 */
export function tokensBetweenPieces(requests: readonly StreamedRequest[], fromUs: number, toUs: number): number {
  let finishedTokens = 0;
  let finishedPieces = 0;
  for (const r of requests) {
    if (r.tokens === null) continue;
    finishedTokens += r.tokens;
    finishedPieces += r.piecesUs.length;
  }
  const meanPerPiece = finishedPieces > 0 ? finishedTokens / finishedPieces : 1;
  const inside = (us: number): boolean => us >= fromUs && us < toUs;
  let tokens = 0;
  for (const r of requests) {
    if (r.tokens !== null && r.piecesUs.length === 0) {
      if (r.endUs !== null && inside(r.endUs)) tokens += r.tokens;
      continue;
    }
    const perPiece = r.tokens === null ? meanPerPiece : r.tokens / r.piecesUs.length;
    tokens += perPiece * r.piecesUs.filter(inside).length;
  }
  return tokens;
}

/** The engine's own token counter at a time, interpolated between samples; null outside them. */
export function counterAt(counters: readonly [number, number][], us: number): number | null {
  for (let i = 1; i < counters.length; i++) {
    const [t0, n0] = counters[i - 1] ?? [0, 0];
    const [t1, n1] = counters[i] ?? [0, 0];
    if (us >= t0 && us <= t1) return t1 === t0 ? n0 : n0 + ((n1 - n0) * (us - t0)) / (t1 - t0);
  }
  return null;
}

/** The start of the first 200 ms window after `fromUs` in which the engine decoded at ≥ `fraction`
 *  (95 % unless told) of its solo rate; null when it never did. */
export function recoveredAtUs(tokens: readonly number[], fromUs: number, soloTokps: number, fraction = 0.95): number | null {
  const windowUs = 200_000;
  const needed = Math.ceil(fraction * soloTokps * (windowUs / 1e6));
  const after = tokens.filter((t) => t >= fromUs);
  for (let i = 0; i + needed - 1 < after.length; i++) {
    const first = after[i] ?? 0;
    if ((after[i + needed - 1] ?? 0) - first <= windowUs) return first;
  }
  return null;
}

/**
 * When an engine stopped being held after the others went idle: the end of the last gap between
 * its tokens that is a hold (at least `holdUs`: half the shortest window of the others, which no
 * token of a running engine takes), chained from `fromUs`: the first hold starts within
 * `periodUs` · 1.5 of it and every next one within that of the previous hold's end, so one stall
 * of the machine later on is not read as pacing. `fromUs` itself when no hold follows. Unlike a
 * rate against the solo rate, it does not depend on the solo rate being measured in the same state
 * of a machine whose speed moves by a third from one minute to the next. Pure.
 */
export function releasedAtUs(tokens: readonly number[], fromUs: number, holdUs: number, periodUs: number): number {
  const after = tokens.filter((t) => t >= fromUs).sort((a, b) => a - b);
  const reach = 1.5 * periodUs;
  let releasedAt = fromUs;
  let previous = fromUs;
  for (const t of after) {
    if (t - previous >= holdUs) {
      if (previous - releasedAt > reach) break;
      releasedAt = t;
    }
    previous = t;
  }
  return releasedAt;
}

/** The cooperative gate's median (0 for none). */
export const median = medianOf;


/** Wall ms per token by its place in the engine's own windows, medians over the windows. */
export interface WindowPositionCost {
  /** From the window's start to the first token that arrives in it: what starting a window costs
   *  (resuming, cold caches, the rest of a token cut off at the last window's end). */
  first: number | null;
  /** From the first token to the second. */
  second: number | null;
  /** Between every later pair. */
  rest: number | null;
  /** Tokens that arrived in a window, mean. */
  perWindow: number | null;
  /** What starting a window costs, ms: per window, its length less its tokens at its own later
   *  cadence (from its second token to its last, over the tokens between), the median over the
   *  windows that held at least four. A window's own cadence, not one over the run: on this VM the
   *  machine's speed moves from window to window (10 to 60 tokens in 40 ms within one run), and
   *  tokens arrive in bursts (text held back until it is whole UTF-8 or clear of a stop string),
   *  whose zero gaps would pull a median gap below the cadence and the cost up. */
  start: number | null;
  /** The same with every token that arrives before the window comes round again: one decoded
   *  just before its end that reached the client after it, one whose step ran past the end (a
   *  cooperative gate lets a last step go when half of it fits; a SIGSTOP lands a little late).
   *  They are the window's work; counted out, they charge its start with what its end did. For an
   *  engine that decodes in its own windows only (each mode of the resume-cost probe): what
   *  arrives while the others' windows run is then its own window's. */
  startToNext: number | null;
}

/** A window with fewer tokens has no later cadence to speak of. */
const START_COST_MIN_TOKENS = 4;

/**
 * How much a token costs by its position in `slot`'s windows between `fromUs` and `toUs`, from
 * the tokens' arrival times. Inside its window a paced engine has the device to itself, so wall
 * time there is its cost per token; a first token dearer than the rest is a cost of starting a
 * window, which a short window pays more often per token. Pure.
 */
export function costByWindowPosition(tokens: readonly number[], schedule: { periodUs: number; windows: readonly { slot: number; startUs: number; lengthUs: number }[] }, slot: number, fromUs: number, toUs: number): WindowPositionCost {
  const window = schedule.windows.find((w) => w.slot === slot);
  const none = { first: null, second: null, rest: null, perWindow: null, start: null, startToNext: null };
  if (window === undefined || schedule.periodUs <= 0) return none;
  const sorted = [...tokens].sort((a, b) => a - b);
  const first: number[] = [];
  const second: number[] = [];
  const rest: number[] = [];
  const counts: number[] = [];
  const starts: number[] = [];
  const startsToNext: number[] = [];
  let i = 0;
  for (let periodStart = Math.floor(fromUs / schedule.periodUs) * schedule.periodUs; periodStart < toUs; periodStart += schedule.periodUs) {
    const start = periodStart + window.startUs;
    const end = start + window.lengthUs;
    if (start < fromUs || end > toUs) continue;
    while (i < sorted.length && (sorted[i] ?? 0) < start) i++;
    const inside: number[] = [];
    for (let j = i; j < sorted.length && (sorted[j] ?? 0) < end; j++) inside.push(sorted[j] ?? 0);
    counts.push(inside.length);
    if (inside.length > 0) first.push(((inside[0] ?? 0) - start) / 1000);
    if (inside.length > 1) second.push(((inside[1] ?? 0) - (inside[0] ?? 0)) / 1000);
    for (let k = 2; k < inside.length; k++) rest.push(((inside[k] ?? 0) - (inside[k - 1] ?? 0)) / 1000);
    if (inside.length >= START_COST_MIN_TOKENS) {
      const cadenceUs = ((inside.at(-1) ?? 0) - (inside[1] ?? 0)) / (inside.length - 2);
      starts.push((window.lengthUs - inside.length * cadenceUs) / 1000);
      if (start + schedule.periodUs <= toUs) {
        let upToNext = inside.length;
        for (let j = i + inside.length; j < sorted.length && (sorted[j] ?? 0) < start + schedule.periodUs; j++) upToNext++;
        startsToNext.push((window.lengthUs - upToNext * cadenceUs) / 1000);
      }
    }
  }
  const med = (values: number[]): number | null => (values.length === 0 ? null : round(median(values), 2));
  return { first: med(first), second: med(second), rest: med(rest), perWindow: counts.length === 0 ? null : round(counts.reduce((a, b) => a + b, 0) / counts.length, 1), start: med(starts), startToNext: med(startsToNext) };
}

/** When each decode step of a built-in engine's step log (`GPU_SHARE_PACER_TRACE`) ended, wall µs,
 *  in order: where a token is decoded rather than where a client reads it, for
 *  costByWindowPosition. Events other than steps are left out. Pure. */
export function stepEndsUs(events: readonly { k: string; t: number; us?: number }[]): number[] {
  const ends: number[] = [];
  for (const event of events) if (event.k === 'step' && typeof event.us === 'number' && Number.isFinite(event.t + event.us)) ends.push(event.t + event.us);
  return ends.sort((a, b) => a - b);
}

/** An engine's long-run rate from the requests it started and finished inside an interval. */
export interface WholeRequestRate {
  tokps: number;
  /** Whole request cycles counted (a cycle: one request's start to the next one's). */
  requests: number;
}

/**
 * Tokens per second over the whole request cycles that lie inside `fromUs`–`toUs`: from the first
 * request that starts inside it to the last one that starts inside it, each taken with the count
 * of tokens the engine had decoded when it started. A token's cost grows with its place in its
 * request (attention over a longer context), so a rate over an interval that cuts requests is
 * biased by where they were cut: engines that start together at position 0 and decode at
 * different rates sit at different places of the cost curve. Whole cycles (their tokens, their
 * time, the client's turnaround between them) sample every place once, which is what a rate over
 * a long run converges to. Null under one whole cycle. Pure.
 */
export function rateOverWholeRequests(requestStarts: readonly (readonly [number, number])[], fromUs: number, toUs: number): WholeRequestRate | null {
  const inside = requestStarts.filter(([at]) => at >= fromUs && at <= toUs);
  const first = inside[0];
  const last = inside.at(-1);
  if (first === undefined || last === undefined || inside.length < 2 || last[0] <= first[0]) return null;
  return { tokps: (last[1] - first[1]) / ((last[0] - first[0]) / 1e6), requests: inside.length - 1 };
}

/** What starting a window costs an engine that is stopped between its windows, against the same
 *  engine decoding unstopped. */
export interface WindowStartCost {
  /** Device time lost per window, ms: the window's length less what its tokens take unstopped. */
  lostMsPerWindow: number;
  /** CPU only: CPU ms per window beyond what its tokens cost unstopped (null without CPU figures). */
  extraCpuMsPerWindow: number | null;
}

/**
 * From a run of `windows` windows of `windowMs` in which the engine decoded `tokens` tokens
 * (spending `cpuMs` of CPU), and the same engine's unstopped cost per token. A fixed cost per
 * window weighs on a short window more than on a long one (40 ms less 10 ms is 30 ms of tokens,
 * 80 ms less 10 ms is 70 ms): a 2:1 split of time then reads 2.33 in tokens. Pure.
 */
export function windowStartCost(run: { windowMs: number; windows: number; tokens: number; cpuMs: number | null }, unstopped: { msPerToken: number; cpuMsPerToken: number | null }): WindowStartCost | null {
  if (run.windows <= 0 || !(unstopped.msPerToken > 0)) return null;
  const perWindow = run.tokens / run.windows;
  return {
    lostMsPerWindow: round(run.windowMs - perWindow * unstopped.msPerToken, 2),
    extraCpuMsPerWindow: run.cpuMs === null || unstopped.cpuMsPerToken === null ? null : round((run.cpuMs - run.tokens * unstopped.cpuMsPerToken) / run.windows, 2),
  };
}

/**
 * Hand-over figures (the targets of pacer/NOTES.md, "Activity and hand-over"). Release: seconds from
 * the others' last token to `tokens` at ≥ 90 % of `soloTokps` (null: never). Wake: ms from a
 * request at an idle engine (`requestUs`) to its first token (null: none came). Pure.
 */
export function releaseS(tokens: readonly number[], othersLastTokenUs: number, soloTokps: number): number | null {
  const at = recoveredAtUs(tokens, othersLastTokenUs, soloTokps, 0.9);
  return at === null ? null : round(Math.max(0, at - othersLastTokenUs) / 1e6, 2);
}

export function wakeMs(tokens: readonly number[], requestUs: number): number | null {
  const first = tokens.find((t) => t >= requestUs);
  return first === undefined ? null : round((first - requestUs) / 1000, 1);
}

/** One measured block of `bench:pacing --serve`: the weight-2 engine alone, or both at once. */
export interface ServeBlock {
  kind: 'solo' | 'together';
  seconds: number;
}

/**
 * The measured blocks of one `--serve` run: `blocks` blocks of both at once, each between two of
 * the weight-2 engine alone, every block `measureS / blocks` seconds (solo, together, solo, …,
 * solo). This machine's speed wanders by 10–25 % over a few seconds (one engine alone read 1,203
 * before and 1,521 tok/s after one 10 s phase of both); alternating short blocks lets a slow spell
 * fall on both sides of the comparison. One block is solo, together, solo. Pure.
 */
export function serveBlocks(measureS: number, blocks: number): ServeBlock[] {
  const seconds = measureS / blocks;
  const plan: ServeBlock[] = [{ kind: 'solo', seconds }];
  for (let i = 0; i < blocks; i++) plan.push({ kind: 'together', seconds }, { kind: 'solo', seconds });
  return plan;
}

/** What the client counted in one block: tokens over seconds, the weight-2 engine's and, together,
 *  the weight-1 engine's. */
export interface CountedBlock extends ServeBlock {
  heavyTokens: number;
  lightTokens: number;
}

export interface BlockFigures {
  /** The weight-2 engine alone over every solo block, tok/s. */
  soloTokps: number;
  /** Each solo block's, in order. */
  soloBlocksTokps: number[];
  /** Both at once over every together block, tok/s each (weight 2, weight 1). */
  togetherTokps: [number, number];
  /** Their sum over solo, %. */
  aggregatePctOfSolo: number;
  /** Each together block's sum over the mean of the two solo blocks beside it, %. */
  togetherBlocksPct: number[];
}

/** The run's figures from its blocks, in the order they ran (serveBlocks). Pure. */
export function blockFigures(counted: readonly CountedBlock[]): BlockFigures {
  const solos = counted.filter((b) => b.kind === 'solo');
  const togethers = counted.filter((b) => b.kind === 'together');
  const sum = (blocks: readonly CountedBlock[], pick: (b: CountedBlock) => number): number => blocks.reduce((total, b) => total + pick(b), 0);
  const soloS = sum(solos, (b) => b.seconds);
  const togetherS = sum(togethers, (b) => b.seconds);
  if (soloS <= 0 || togetherS <= 0) throw new Error(`blockFigures: needs time alone and together (got ${soloS} s and ${togetherS} s)`);
  const soloTokps = sum(solos, (b) => b.heavyTokens) / soloS;
  if (soloTokps <= 0) throw new Error(`blockFigures: the weight-2 engine made no tokens alone in ${round(soloS, 1)} s`);
  const togetherTokps: [number, number] = [sum(togethers, (b) => b.heavyTokens) / togetherS, sum(togethers, (b) => b.lightTokens) / togetherS];
  const blockRate = (b: CountedBlock | undefined): number | null => (b === undefined || b.kind !== 'solo' || b.seconds <= 0 ? null : b.heavyTokens / b.seconds);
  const togetherBlocksPct: number[] = [];
  counted.forEach((b, i) => {
    if (b.kind !== 'together' || b.seconds <= 0) return;
    const beside = [blockRate(counted[i - 1]), blockRate(counted[i + 1])].filter((r): r is number => r !== null);
    const soloBeside = beside.length === 0 ? soloTokps : beside.reduce((s, r) => s + r, 0) / beside.length;
    // A solo block with no tokens beside it says nothing of this one.
    if (soloBeside > 0) togetherBlocksPct.push(round(((b.heavyTokens + b.lightTokens) / b.seconds / soloBeside) * 100, 1));
  });
  return {
    soloTokps,
    soloBlocksTokps: solos.map((b) => round(b.heavyTokens / b.seconds, 1)),
    togetherTokps,
    aggregatePctOfSolo: round(((togetherTokps[0] + togetherTokps[1]) / soloTokps) * 100, 1),
    togetherBlocksPct,
  };
}
