/**
 * `bench:pacing --serve`: the engines as a user runs them, beside the pinned benchmark
 * (pacing-llama.ts). `gpu-share serve` with two profiles of one model at weights 2 and 1, every
 * setting at its default (threads included), nothing pinned, every request through the gateway's
 * `/v1/completions`, engines launched on demand by their first request. For each setup (the
 * built-in engine at its default threads, the built-in engine at one thread, a llama-server at its
 * defaults when one is built) one row: the weight-2 engine alone, both at once (their sum as % of
 * solo), and the token split (target 2), alone and together in alternating blocks (serveBlocks).
 *
 * The device is a simulated one with a key of this run's own (`--sim`), so that the registry is
 * not the machine's `cpu-0` that other runs may share; the engines decode on the CPU all the same.
 * Tokens are counted by the client: one per streamed piece, set right by each request's `usage`.
 * With `--trace DIR` each built-in engine writes its decode steps there (pacer/trace.ts), and the
 * run's row gains where each engine's windows went while both ran (step-trace.ts).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProfileStore } from '../../electron/core/engines/profiles.js';
import { ONE_CALL_STEPS_LOGGED } from '../../electron/core/engines/builtin/engine-host.js';
import type { AppState } from '../../electron/core/contract.js';
import { loadRegistryHelper } from '../../native/helper.js';
import { findLlamaServer, freePort } from '../fixtures/llama-server.js';
import { startServe, type Served } from '../fixtures/serve.js';
import { sseData } from '../fixtures/sse.js';
import { LLAMA_MODELS, LLAMA_WARM_S, llamaBenchModel, treeCpuUs } from './pacing-llama.js';
import { otherThreadsSpentNs, threadCpuNs, type ThreadCpuNs } from './thread-cpu.js';
import { blockFigures, median, round, serveBlocks, splitOf, textTable, tokensBetweenPieces, type CountedBlock, type StreamedRequest } from './pacing-stats.js';
import { analyseSteps, readSteps, stepTraceTable, type StepTraceFindings } from './step-trace.js';
import { PACER_TRACE_ENV } from '../../electron/core/pacer/trace.js';

export type ServeSetup = 'builtin' | 'builtin-1' | 'llama-server';
export const SERVE_SETUPS: readonly ServeSetup[] = ['builtin', 'builtin-1', 'llama-server'];

const SETUP_LABEL: Readonly<Record<ServeSetup, string>> = {
  builtin: 'built-in, default threads',
  'builtin-1': 'built-in, threads 1',
  'llama-server': 'llama-server, its defaults',
};

/** Seconds measured for solo and for both at once unless --measure-s says otherwise. */
export const SERVE_MEASURE_S = 8;

/** Blocks of both at once, each between two of the weight-2 engine alone, unless --blocks says
 *  otherwise (serveBlocks). */
export const SERVE_BLOCKS = 4;

/** The shortest block measured: a few of the 400-token requests. */
const MIN_BLOCK_S = 1;

/** After the light engine's activity changed in the registry, this long before a block is
 *  measured: the other engine's gate reads the registry at most 100 ms late (VIEW_MAX_AGE_US), and
 *  the light engine's first window after a pause starts cold. */
const SETTLE_MS = 500;

/** How long the light engine's activity may take to show in the registry after its client
 *  starts or stops (a built-in engine's clears within ~250 ms; one known by its CPU time, 2 s). */
const ACTIVITY_TIMEOUT_MS = 15_000;

export interface ServeResult {
  setup: ServeSetup;
  /** The threads the built-in engine said it loaded with (from its log); null for llama-server. */
  threads: number | null;
  /** Blocks of both at once (serveBlocks). */
  blocks: number;
  solo_tokps: number;
  /** The weight-2 engine alone in each solo block, in order (with --repeat, run after run). */
  solo_blocks_tokps: number[];
  together_tokps: [number, number];
  aggregate_pct_of_solo: number;
  /** Each together block's sum over the solo blocks beside it, % (with --repeat, run after run). */
  together_blocks_pct: number[];
  /** Tokens of the weight-2 engine over the weight-1 engine's while both stream (target 2). */
  ratio: number | null;
  /** CPU time of each engine's process tree while both stream, the weight-2 engine's over the
   *  other's (unpinned: what each used of the machine, not of one device). */
  cpu_ratio: number | null;
  /** The same for the built-in engine hosts' threads other than the JavaScript thread: their
   *  decode threads (thread-cpu.ts). null for llama-servers. */
  decode_cpu_ratio: number | null;
  runs?: { solo_tokps: number; aggregate_pct_of_solo: number; ratio: number | null; cpu_ratio: number | null; decode_cpu_ratio: number | null; steps?: StepTraceFindings[] }[];
  /** With --trace, a built-in setup's steps while both ran (of this run; of each run under `runs`). */
  steps?: StepTraceFindings[];
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until serve's registry view shows the engine of `profileId` active (or idle). */
async function untilActivity(appState: () => Promise<AppState>, profileId: string, active: boolean): Promise<void> {
  const deadline = Date.now() + ACTIVITY_TIMEOUT_MS;
  for (;;) {
    const state = await appState();
    const engine = state.engines.find((e) => e.profileId === profileId && e.state === 'running');
    const peer = engine === undefined ? undefined : state.devices.flatMap((d) => d.peers).find((p) => p.engineId === engine.id);
    // An engine with no slot is idle as far as pacing goes.
    if ((peer?.active ?? false) === active) return;
    if (Date.now() > deadline) throw new Error(`engine ${profileId} did not go ${active ? 'active' : 'idle'} within ${ACTIVITY_TIMEOUT_MS / 1000} s of its client ${active ? 'starting' : 'stopping'} (${engine === undefined ? 'not running' : peer === undefined ? 'no registry slot' : 'its slot says otherwise'})`);
    await sleep(100);
  }
}

/** The body of one streamed `/v1/completions` request: the llama-server as in the pinned
 *  benchmark (greedy, never ending early, no byte tokens), the built-in engine sampled at
 *  temperature 1 (it takes neither ignore_eos nor logit_bias). */
function completionBody(setup: ServeSetup, model: string, tokens: number): Record<string, unknown> {
  const common = { model, prompt: 'Once upon a time', max_tokens: tokens, stream: true, stream_options: { include_usage: true } };
  if (setup !== 'llama-server') return { ...common, temperature: 1 };
  return { ...common, temperature: 0, ignore_eos: true, logit_bias: Array.from({ length: 259 }, (_, id) => [id, false]) };
}

interface Client {
  /** Its requests, in order, the last one possibly still streaming (tokensBetweenPieces). */
  requests: StreamedRequest[];
  /** When it started, and until when it has been watched: an interval it counts lies inside. */
  span: { fromUs: number; toUs: number };
  /** Notes that the client was watched up to `atUs` (now unless given). */
  mark: (atUs?: number) => number;
  stop: () => Promise<void>;
}

/** Streams requests back to back through the gateway until stopped. */
function startClient(served: Served, setup: ServeSetup, capability: string, tokens: number, wallUs: () => number): Client {
  const controller = new AbortController();
  const requests: StreamedRequest[] = [];
  const span = { fromUs: wallUs(), toUs: wallUs() };
  const loop = (async () => {
    while (!controller.signal.aborted) {
      const request: StreamedRequest = { piecesUs: [], tokens: null, endUs: null };
      requests.push(request);
      try {
        const response = await fetch(`${served.base}/v1/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${served.token}`, 'content-type': 'application/json' },
          body: JSON.stringify(completionBody(setup, capability, tokens)),
          signal: controller.signal,
        });
        if (!response.ok) throw new Error(`the gateway answered ${response.status}: ${(await response.text()).slice(0, 200)}`);
        for await (const payload of sseData(response.body)) {
          if (payload === '[DONE]') break;
          const data = JSON.parse(payload) as { choices?: { text?: string }[]; usage?: { completion_tokens?: number } | null };
          const usage = data.usage?.completion_tokens;
          if (data.choices?.[0]?.text) request.piecesUs.push(wallUs());
          if (typeof usage === 'number') {
            request.tokens = usage;
            request.endUs = wallUs();
          }
        }
      } catch (error) {
        if (controller.signal.aborted) return;
        process.stderr.write(`  ${capability}: ${error instanceof Error ? error.message : String(error)}\n`);
        await sleep(200);
      }
    }
  })();
  return {
    requests,
    span,
    mark: (atUs = wallUs()) => {
      span.toUs = Math.max(span.toUs, atUs);
      return atUs;
    },
    stop: async () => {
      span.toUs = Math.max(span.toUs, wallUs());
      controller.abort();
      await loop;
    },
  };
}

/** The tokens a client received between two times (tokensBetweenPieces). */
function tokensBetween(client: Client, fromUs: number, toUs: number, what: string): number {
  if (fromUs < client.span.fromUs || toUs > client.span.toUs) throw new Error(`${what}: the client streamed ${Math.round(client.span.fromUs)}–${Math.round(client.span.toUs)} µs, not all of ${Math.round(fromUs)}–${Math.round(toUs)} µs`);
  return tokensBetweenPieces(client.requests, fromUs, toUs);
}

/** One setup: serve, its two profiles, solo and together in alternating blocks (serveBlocks). */
async function runSetup(setup: ServeSetup, server: string | null, measureS: number, blocks: number, warmS: number, log: (line: string) => void, tracePrefix: string | null): Promise<ServeResult> {
  const helper = loadRegistryHelper();
  const wallUs = (): number => helper.wallUs();
  const config = LLAMA_MODELS.cpu;
  const model = llamaBenchModel('cpu');
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-bench-serve-'));
  const key = `bench-serve-${process.pid}-${setup}`.slice(0, 40);
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir, { recursive: true });
  const sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key, name: 'bench', totalBytes: 24 * 1024 ** 3, usedBytes: 1024 ** 3, processes: null, health: 'OK' }] }));
  const store = new ProfileStore({ dataDir });
  for (const weight of [2, 1]) {
    const id = `w${weight}`;
    if (setup === 'llama-server') {
      if (server === null) throw new Error('no llama-server');
      store.create({ id, name: id, capabilities: [id], engineKind: 'llama-server', command: server, modelPath: model, contextSize: config.ctx, gpuLayers: 0, weight, priority: 'interactive', args: ['--host', '127.0.0.1', '--port', String(await freePort())] });
    } else {
      store.create({ id, name: id, capabilities: [id], engineKind: 'builtin', modelPath: model, contextSize: config.ctx, gpuLayers: 0, threads: setup === 'builtin-1' ? 1 : null, weight, priority: 'interactive' });
    }
  }
  // The built-in hosts write their steps to `${tracePrefix}.PID` (serve passes its environment on).
  const traced = tracePrefix !== null && setup !== 'llama-server';
  const served = await startServe({ dataDir, sim, ...(traced ? { env: { [PACER_TRACE_ENV]: tracePrefix } } : {}) });
  const clients: Client[] = [];
  try {
    // Launch both on demand and warm them, one after the other, then let both go idle.
    for (const id of ['w2', 'w1']) {
      const warm = startClient(served, setup, id, 200, wallUs);
      const deadline = Date.now() + 180_000;
      while (tokensBetweenPieces(warm.requests, 0, Number.POSITIVE_INFINITY) < 200 && Date.now() < deadline) await sleep(50);
      await warm.stop();
    }
    // The weight-2 engine's threads, from its "model loaded" line while its log tail still holds it.
    const appState = async (): Promise<AppState> => (await (await fetch(`${served.base}/api/state`, { headers: { authorization: `Bearer ${served.token}` } })).json()) as AppState;
    const loadedState = await appState();
    const threadsLine = loadedState.engines.find((e) => e.profileId === 'w2')?.logTail.find((line) => /model loaded/.test(line)) ?? '';
    const threads = setup === 'llama-server' ? null : Number(/(\d+) threads/.exec(threadsLine)?.[1] ?? Number.NaN);
    const oneCallSteps = threadsLine.includes(`decode steps ${ONE_CALL_STEPS_LOGGED}`);
    // Then both together, as measured later (LLAMA_WARM_S: V8 optimises the paced engine's code).
    if (warmS > 0) {
      const warming = ['w2', 'w1'].map((id) => startClient(served, setup, id, config.requestTokens, wallUs));
      await sleep(warmS * 1000);
      for (const warm of warming) await warm.stop();
    }
    await sleep(2_500);
    const engines = await appState();
    const pidOf = (id: string): number => engines.engines.find((e) => e.profileId === id && e.state === 'running')?.pid ?? -1;

    const heavy = startClient(served, setup, 'w2', config.requestTokens, wallUs);
    clients.push(heavy);
    await sleep(1_000);
    const pids = [pidOf('w2'), pidOf('w1')];
    // The built-in hosts' decode threads apart (a llama-server's threads are not split so, and a
    // host that decodes in one call a token decodes on its JavaScript thread: nothing to split).
    const hosts = setup === 'llama-server' || oneCallSteps ? [] : pids;
    const cpu = [0, 0];
    const decodeReadings: [ThreadCpuNs | null | undefined, ThreadCpuNs | null | undefined][][] = hosts.map(() => []);
    const intervals: [number, number][] = [];
    const counted: CountedBlock[] = [];
    let during: AppState | null = null;
    for (const block of serveBlocks(measureS, blocks)) {
      if (block.kind === 'solo') {
        // The light engine's slot goes idle (its activity clears), then the heavy one alone.
        await untilActivity(appState, 'w1', false);
        await sleep(SETTLE_MS);
        const fromUs = heavy.mark();
        await sleep(block.seconds * 1000);
        const toUs = heavy.mark();
        counted.push({ kind: 'solo', seconds: (toUs - fromUs) / 1e6, heavyTokens: tokensBetween(heavy, fromUs, toUs, 'w2 alone'), lightTokens: 0 });
        continue;
      }
      const light = startClient(served, setup, 'w1', config.requestTokens, wallUs);
      clients.push(light);
      // Both active in the registry, and the schedule settled.
      await untilActivity(appState, 'w1', true);
      await sleep(SETTLE_MS);
      const fromUs = heavy.mark();
      light.mark(fromUs);
      const cpuFrom = pids.map(treeCpuUs);
      const threadsFrom = hosts.map((pid) => threadCpuNs(pid));
      await sleep(block.seconds * 1000);
      const toUs = heavy.mark();
      light.mark(toUs);
      const cpuTo = pids.map(treeCpuUs);
      const threadsTo = hosts.map((pid) => threadCpuNs(pid));
      // The schedule both followed, and each engine's slot in it, for the steps' windows.
      if (traced && during === null) during = await appState();
      await light.stop();
      clients.splice(clients.indexOf(light), 1);
      cpuTo.forEach((c, i) => (cpu[i] = (cpu[i] ?? 0) + c - (cpuFrom[i] ?? 0)));
      threadsTo.forEach((to, i) => decodeReadings[i]?.push([threadsFrom[i], to]));
      intervals.push([fromUs, toUs]);
      counted.push({ kind: 'together', seconds: (toUs - fromUs) / 1e6, heavyTokens: tokensBetween(heavy, fromUs, toUs, 'w2 beside w1'), lightTokens: tokensBetween(light, fromUs, toUs, 'w1 beside w2') });
    }
    const figures = blockFigures(counted);
    const decodeSpent = decodeReadings.map(otherThreadsSpentNs);
    const result: ServeResult = {
      setup,
      threads: threads !== null && Number.isNaN(threads) ? null : threads,
      blocks,
      solo_tokps: round(figures.soloTokps, 1),
      solo_blocks_tokps: figures.soloBlocksTokps,
      together_tokps: [round(figures.togetherTokps[0], 1), round(figures.togetherTokps[1], 1)],
      aggregate_pct_of_solo: figures.aggregatePctOfSolo,
      together_blocks_pct: figures.togetherBlocksPct,
      ratio: splitOf(figures.togetherTokps[0], figures.togetherTokps[1]),
      cpu_ratio: splitOf(cpu[0], cpu[1]),
      decode_cpu_ratio: splitOf(decodeSpent[0], decodeSpent[1]),
    };
    if (during !== null && tracePrefix !== null) {
      // The hosts write the rest of their steps as they exit.
      for (const client of clients) await client.stop();
      await served.stop();
      result.steps = tracedSteps(during, tracePrefix, intervals);
      log(stepTraceTable(result.steps).replace(/^/gm, '    '));
    }
    log(`  ${SETUP_LABEL[setup].padEnd(27)} solo ${result.solo_tokps} tok/s (blocks ${result.solo_blocks_tokps.join(' / ')})  together ${result.together_tokps.join(' / ')} = ${result.aggregate_pct_of_solo} % of solo (blocks ${result.together_blocks_pct.join(' / ')})  split ${result.ratio ?? '—'} (CPU ${result.cpu_ratio ?? '—'}${result.decode_cpu_ratio === null ? '' : `, decode threads ${result.decode_cpu_ratio}`})${result.threads === null ? '' : `  threads ${result.threads}`}`);
    return result;
  } finally {
    for (const client of clients) await client.stop();
    await served.stop();
    rmSync(dir, { recursive: true, force: true });
    try {
      helper.unlink(key);
    } catch {
      // never created
    }
  }
}

/** Both engines' steps from their trace files, against the schedule `state` showed while both ran. */
function tracedSteps(state: AppState, prefix: string, intervals: readonly [number, number][]): StepTraceFindings[] {
  const schedule = state.devices.find((device) => device.schedule !== null)?.schedule;
  if (schedule === undefined || schedule === null) throw new Error('--trace: no schedule while both engines ran');
  return analyseSteps({
    schedule,
    intervals,
    engines: ['w2', 'w1'].map((id) => {
      const engine = state.engines.find((e) => e.profileId === id && e.state === 'running');
      if (engine === undefined || engine.slot === null) throw new Error(`--trace: engine ${id} has no slot while both ran`);
      const file = `${prefix}.${engine.pid}`;
      if (!existsSync(file)) throw new Error(`--trace: engine ${id} wrote no steps (${file}; its log says why)`);
      return { label: id, slot: engine.slot, steps: readSteps(file) };
    }),
  });
}

function medianOfRuns(runs: readonly ServeResult[]): ServeResult {
  const first = runs[0];
  if (first === undefined) throw new Error('no runs');
  if (runs.length === 1) return first;
  // Each run's steps stay with it (under `runs`): they do not take a median.
  const { steps: _firstRunSteps, ...firstWithoutSteps } = first;
  const m = (pick: (r: ServeResult) => number | null, digits: number): number | null => {
    const values = runs.map(pick).filter((x): x is number => x !== null);
    return values.length === 0 ? null : round(median(values), digits);
  };
  return {
    ...firstWithoutSteps,
    // A run may have missed the engine's threads line (its log tail had moved on): any run's will do.
    threads: runs.map((r) => r.threads).find((t) => t !== null && Number.isFinite(t)) ?? null,
    solo_tokps: m((r) => r.solo_tokps, 1) ?? 0,
    together_tokps: [m((r) => r.together_tokps[0], 1) ?? 0, m((r) => r.together_tokps[1], 1) ?? 0],
    aggregate_pct_of_solo: m((r) => r.aggregate_pct_of_solo, 1) ?? 0,
    ratio: m((r) => r.ratio, 3),
    cpu_ratio: m((r) => r.cpu_ratio, 3),
    decode_cpu_ratio: m((r) => r.decode_cpu_ratio, 3),
    solo_blocks_tokps: runs.flatMap((r) => r.solo_blocks_tokps),
    together_blocks_pct: runs.flatMap((r) => r.together_blocks_pct),
    runs: runs.map((r) => ({ solo_tokps: r.solo_tokps, aggregate_pct_of_solo: r.aggregate_pct_of_solo, ratio: r.ratio, cpu_ratio: r.cpu_ratio, decode_cpu_ratio: r.decode_cpu_ratio, ...(r.steps === undefined ? {} : { steps: r.steps }) })),
  };
}

export function serveTable(results: readonly ServeResult[]): string {
  const header = ['setup', 'threads', 'solo tok/s (blocks)', 'together tok/s', 'agg % solo (blocks)', 'split 2:1', 'CPU split', 'CPU split, decode threads'];
  const range = (values: readonly number[]): string => (values.length === 0 ? '—' : `${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)}`);
  const rows = results.map((r) => [
    SETUP_LABEL[r.setup],
    r.threads === null ? '—' : String(r.threads),
    `${r.solo_tokps.toFixed(1)} (${range(r.solo_blocks_tokps)})`,
    r.together_tokps.map((t) => t.toFixed(1)).join(' / '),
    `${r.aggregate_pct_of_solo.toFixed(1)} (${range(r.together_blocks_pct)})`,
    r.ratio === null ? '—' : r.ratio.toFixed(3),
    r.cpu_ratio === null ? '—' : r.cpu_ratio.toFixed(3),
    r.decode_cpu_ratio === null ? '—' : r.decode_cpu_ratio.toFixed(3),
  ]);
  return textTable(header, rows);
}

export interface ServeMainArgs {
  /** --setups: a comma list of SERVE_SETUPS (default: all, llama-server when one is built). */
  setups: string | undefined;
  measureS: number | undefined;
  /** --blocks: blocks of both at once, each between two of one engine alone (serveBlocks). */
  blocks?: number | undefined;
  /** --warm-s: seconds both engines decode together before anything is measured. */
  warmS?: number | undefined;
  repeat: number;
  json: boolean;
  /** --trace: a folder for the built-in engines' step traces (made if missing). */
  trace?: string | undefined;
}

/** `bench:pacing --serve`: the exit code (2, with one line, for a bad flag or a missing piece). */
export async function serveBenchMain(args: ServeMainArgs, outDir: string): Promise<number> {
  const fail = (line: string): number => {
    console.error(`bench:pacing --serve: ${line}`);
    return 2;
  };
  if (process.platform !== 'linux') return fail('needs Linux (procfs)');
  const asked = args.setups?.split(',') ?? null;
  const unknown = asked?.find((s) => !(SERVE_SETUPS as readonly string[]).includes(s));
  if (unknown !== undefined) return fail(`--setups: unknown setup ${unknown} (setups: ${SERVE_SETUPS.join(', ')})`);
  const server = await findLlamaServer();
  if (asked?.includes('llama-server') === true && server === null) return fail('--setups: llama-server asked for, but none is built (npm run llama-server:build, or set LLAMA_SERVER)');
  const setups = (asked ?? SERVE_SETUPS.filter((s) => s !== 'llama-server' || server !== null)) as ServeSetup[];
  const log = (line: string): void => {
    if (args.json) process.stderr.write(`${line}\n`);
    else console.log(line);
  };
  if (args.trace !== undefined) {
    try {
      mkdirSync(args.trace, { recursive: true });
    } catch (error) {
      return fail(`--trace: cannot make ${args.trace} (${error instanceof Error ? error.message : String(error)})`);
    }
    // A host never writes over a trace (it creates its file afresh): a folder with one is refused here.
    const earlier = readdirSync(args.trace).find((name) => /^(builtin|builtin-1)-run\d+\.\d+$/.test(name));
    if (earlier !== undefined) return fail(`--trace: ${args.trace} already holds a trace (${earlier}); name an empty folder`);
  }
  const measureS = args.measureS ?? SERVE_MEASURE_S;
  const blocks = args.blocks ?? SERVE_BLOCKS;
  if (measureS / blocks < MIN_BLOCK_S) return fail(`--blocks: ${blocks} blocks of --measure-s ${measureS} last ${round(measureS / blocks, 2)} s each; a block needs at least ${MIN_BLOCK_S} s (a few requests)`);
  const warmS = args.warmS ?? LLAMA_WARM_S.cpu;
  const uptime = spawnSync('uptime', { encoding: 'utf8' }).stdout.trim();
  const model = LLAMA_MODELS.cpu;
  log(`pacing benchmark through serve and its gateway: engines unpinned at their defaults, weights 2:1; model E${model.spec.embedding}/L${model.spec.layers}/FF${model.spec.feedForward} ${model.spec.type}, ${model.requestTokens}-token requests; ${setups.join(', ')}${server === null ? ' (no llama-server built)' : ''}\n  ${uptime}`);
  const started = Date.now();
  const results: ServeResult[] = [];
  const byRun = new Map<ServeSetup, ServeResult[]>();
  for (let run = 0; run < args.repeat; run++) {
    for (const setup of setups) {
      try {
        const tracePrefix = args.trace === undefined ? null : join(args.trace, `${setup}-run${run + 1}`);
        byRun.set(setup, [...(byRun.get(setup) ?? []), await runSetup(setup, server, measureS, blocks, warmS, log, tracePrefix)]);
      } catch (error) {
        log(`  ${setup}: failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
  for (const setup of setups) {
    const runs = byRun.get(setup);
    if (runs !== undefined) results.push(medianOfRuns(runs));
  }
  const report = { benchmark: 'pacing-serve', date: new Date().toISOString(), uptime, model: { ...model.spec, ctx: model.ctx, request_tokens: model.requestTokens }, measure_s: measureS, blocks, warm_s: warmS, repeat: args.repeat, duration_s: round((Date.now() - started) / 1000, 1), setups: results };
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'pacing-serve.json'), `${JSON.stringify(report, null, 2)}\n`);
  if (args.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else {
    console.log('');
    console.log(serveTable(results));
    console.log(`\nsolo = the weight-2 engine alone, in ${blocks + 1} blocks of ${round(measureS / blocks, 2)} s around the ${blocks} of both at once (blocks: the range of the blocks' own figures); together = both streaming back to back, tok/s each; agg % solo = their sum over solo (each block's over the solo blocks beside it); split = weight-2 tokens over weight-1 (target 2.000); CPU split = the same for each engine's process tree's CPU time; decode threads = the same for the built-in hosts' threads but the JavaScript thread (the nearest to a GPU's time; — for a host that decodes on its JavaScript thread, one call a token).${args.repeat > 1 ? `\nevery figure is the median of ${args.repeat} runs (each run's in the JSON, under "runs")` : ''}\n${report.duration_s} s; wrote bench-results/pacing-serve.json`);
  }
  return results.length > 0 ? 0 : 1;
}
