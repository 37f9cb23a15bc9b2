/**
 * `npm run bench:pacing`: burn engines pinned to one core (taskset -c 0), so that the CPU behaves
 * like one shared device, under four modes side by side:
 *   free    no pacing: the kernel's scheduler splits the core
 *   coop    TDM, cooperative gate inside each engine
 *   gate    TDM, engines unaware, paced by `gpu-share run` (supervisors on core 1)
 *   static  each engine capped to its weight's window whether or not the others are busy
 *   builtin with --builtin: the built-in engine (node-llama-cpp, cooperative gate per token)
 *           with streaming clients, in the 2:1 and 1:1 scenarios; builtin-free, the same engines
 *           unpaced (each in a registry of its own), shows what two models on one core cost anyway
 * Prints a table (or one JSON object with --json) and writes bench-results/pacing.json.
 * --llama-server and --gpu run real llama-servers instead (pacing-llama.ts: free, naive, gate; on
 * one pinned core, or on the first NVIDIA GPU), writing pacing-llama-server.json / pacing-gpu.json;
 * with --engine builtin, the built-in engine in their place (coop too), writing
 * pacing-builtin-cpu.json / pacing-gpu-builtin.json;
 * with --llama-server, --cores E,H picks the engines' core and the harness's (default 0,1: on a
 * machine whose cores 0 and 1 are hyperthreads of one core, pick two physical cores).
 * --quick runs 2:1 only; --builtin adds the built-in engine mode; --repeat N runs every scenario N
 * times (round the modes) and reports each figure as the median of the runs, judged on the medians;
 * --scenarios, --modes, --measure-s and --token-ms narrow or stretch a run.
 * --serve runs the engines as a user does instead (pacing-serve.ts): `gpu-share serve`, its gateway,
 * engines unpinned at their default threads, built-in engines and a llama-server in one table.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseHostLine } from '../../electron/core/engines/host-protocol.js';
import { PACED_GGUF_SPEC, PACED_REQUEST_TOKENS, PACED_WARM_TOKENS, writeGguf } from '../fixtures/gguf.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { flagsOrExit } from '../fixtures/flags.js';
import { loadRegistryHelper } from '../../native/helper.js';
import { segmentPath } from '../../electron/core/registry/segment.js';
import { computeShares } from '../../electron/core/registry/shares.js';
import { buildSchedule, stallBoundUs } from '../../electron/core/pacer/schedule.js';
import { counterAt, gapsMs, median, rate, recoveredAtUs, releaseS, round, splitOf, summary, textTable, wakeMs } from './pacing-stats.js';
import { builtinHostEnv } from '../../electron/core/engines/builtin/defaults.js';
import { BURN_ENGINE, CLI, ROOT, predictedTokens, readBurnOutput, type BurnOutput as BurnOutputFile } from '../fixtures/procs.js';
import { stopStartedOnSignal } from './stop-on-signal.js';

const PACING_USAGE = `usage: npm run bench:pacing -- [flags]
  burn engines (default)   [--quick] [--builtin] [--modes free,coop,gate,static,builtin-free,builtin]
                           [--scenarios 2:1,…] [--token-ms MS] [--measure-s S] [--repeat N] [--json]
  real engines             --llama-server | --gpu  [--engine llama-server|builtin] [--modes …]
                           [--scenarios …] [--measure-s S] [--warm-s S] [--repeat N] [--cores E,H] [--resume-cost] [--json]
                           [--trace FILE: each run's per-window trace (≤ 10 s) and its analysis]
                           [--stop-method sigstop|cuda-lock: how gate stops an engine]
  as a user runs them      --serve [--setups builtin,builtin-1,llama-server] [--measure-s S] [--blocks N] [--warm-s S] [--repeat N] [--json]
                           [--trace DIR: the built-in engines' decode steps, and where their windows went]`;

type Mode = 'free' | 'coop' | 'gate' | 'static' | 'builtin-free' | 'builtin';
const MODES: Mode[] = ['free', 'coop', 'gate', 'static', 'builtin-free', 'builtin'];
type BuiltinMode = 'builtin' | 'builtin-free';
const isBuiltin = (mode: Mode): mode is BuiltinMode => mode === 'builtin' || mode === 'builtin-free';
/** The built-in engine (node-llama-cpp) on the integration tests' generated model: small enough
 *  that an engine's working set stays in the core's caches while the other runs, so a window
 *  switch costs little. Larger models lean towards the heavier weight on this CPU: with E768/L8 f16
 *  (13 ms tokens) two engines at 2:1 decoded 1.96–2.42 : 1 over 8 s, with this one 2.02–2.09, and
 *  2.15 in this bench's 3.6 s started from idle engines (pacer/NOTES.md). */
const BUILTIN_MODEL = { ...PACED_GGUF_SPEC, contextLength: 2048, seed: 11 };
const BUILTIN_MODEL_NAME = `E${BUILTIN_MODEL.embedding}/L${BUILTIN_MODEL.layers}/${BUILTIN_MODEL.type}`;
const TOKEN_MS = 5;

interface EngineSpec {
  weight: number;
  /** Seconds after the scenario starts; engine 0 starts at 0, alone, to measure the solo rate. */
  startS?: number;
}

interface Scenario {
  name: string;
  engines: EngineSpec[];
  /** Engine 1 goes idle (stops decoding, stays alive) or is killed with SIGKILL after the measured
   *  interval; the benchmark measures how long engine 0 takes to get back to full speed. */
  event?: 'idle' | 'kill';
  /** Whether the TDM ratio target applies. */
  ratioTarget: boolean;
  /** Also run it with built-in engines (slower to start: only where the ratio is the point). */
  builtin?: boolean;
  /** The measured interval is this many times --measure-s (default 1). */
  measureFactor?: number;
}

const OTHERS_START_S = 2.5;
/** Seconds between the end of the measured interval and the others' stop (see timelineOf). */
const OTHERS_STOP_AFTER_S = 0.25;
/** Seconds of whole periods measured per scenario (--measure-s). */
let MEASURE_S = 3.6;
const SCENARIOS: Scenario[] = [
  { name: 'solo', engines: [{ weight: 1 }], ratioTarget: false },
  { name: '2:1', engines: [{ weight: 2 }, { weight: 1 }], ratioTarget: true, builtin: true },
  { name: '1:1', engines: [{ weight: 1 }, { weight: 1 }], ratioTarget: true, builtin: true },
  // Its 160 ms period holds one ~40 ms window (~8 tokens) per weight-1 engine, and a window holds 7
  // or 8 of them as a step lands: in 3.6 s (22 windows) that alone put the two weight-1 engines'
  // rates ±3 % apart from one interval to the next in a run whose 18 s as a whole were 0.4 % apart.
  // Twice as long, it has as many windows as 1:1 has in 3.6 s.
  { name: '2:1:1', engines: [{ weight: 2 }, { weight: 1 }, { weight: 1 }], ratioTarget: true, measureFactor: 2 },
  { name: '2:1 late start', engines: [{ weight: 2 }, { weight: 1, startS: 5 }], ratioTarget: true },
  { name: 'idle release', engines: [{ weight: 1 }, { weight: 1 }], event: 'idle', ratioTarget: false },
  { name: 'kill -9', engines: [{ weight: 1 }, { weight: 1 }], event: 'kill', ratioTarget: false },
];

/** When things happen in a scenario, in seconds after engine 0 starts. */
interface Timeline {
  starts: number[];
  /** Engine 0 alone before the others start, and (when there is no idle/kill event) again after
   *  they stop: the mean of its two rates is the solo rate the scenario is compared with, so that
   *  the machine's drift during the run cancels out. */
  baseline: [number, number];
  after: [number, number] | null;
  /** When engines 1… are stopped (SIGTERM) for the second solo measurement. */
  othersStopS: number | null;
  /** The measured interval: whole periods of the schedule, aligned to the wall clock. */
  measureFromS: number;
  periods: number;
  periodUs: number;
  eventS: number | null;
  lengthS: number;
}

/**
 * @param startupS extra seconds an engine needs before its first token (loading a model)
 * @param stopLingerS how long the others stay in the registry after they are stopped: 0 when they
 *   leave it (SIGTERM), 3 s plus margin when they are killed and their slots must age out
 */
function timelineOf(scenario: Scenario, startupS = 0, stopLingerS = 0): Timeline {
  // --measure-s, stretched where the scenario asks.
  const measureS = MEASURE_S * (scenario.measureFactor ?? 1);
  const starts = scenario.engines.map((e, i) => (i === 0 ? 0 : (e.startS ?? OTHERS_START_S) + startupS));
  const lastStart = Math.max(...starts);
  const alone = scenario.engines.length === 1;
  const shares = computeShares(scenario.engines.map((e) => e.weight));
  const periodUs = alone ? 100_000 : buildSchedule(shares.map((share, slot) => ({ slot, share }))).periodUs;
  const periods = Math.floor((measureS * 1e6) / periodUs);
  const measureFromS = alone ? OTHERS_START_S + startupS : lastStart + 1 + startupS;
  // +1 period: the start is aligned up to the next period boundary.
  const measureEndS = measureFromS + ((periods + 1) * periodUs) / 1e6;
  const eventS = scenario.event ? measureEndS : null;
  const bracket = !alone && eventS === null;
  // The others stop a little after the measured interval, so that a built-in engine's token
  // counter (sampled every 100 ms) has a sample past its end.
  const othersStopS = measureEndS + OTHERS_STOP_AFTER_S;
  // After an idle/kill event engine 0 is alone again once it has recovered (≤ 3 s): that stretch is
  // its second solo measurement.
  const afterEvent: [number, number] | null = eventS !== null ? [eventS + 3, eventS + 3.9] : null;
  return {
    starts,
    baseline: [0.4 + startupS, (alone ? OTHERS_START_S + startupS : Math.min(...starts.slice(1))) - 0.05],
    after: bracket ? [othersStopS + 0.3 + stopLingerS, othersStopS + 1.6 + stopLingerS] : afterEvent,
    othersStopS: bracket ? othersStopS : null,
    measureFromS,
    periods,
    periodUs,
    eventS,
    lengthS: eventS !== null ? eventS + 4 : bracket ? othersStopS + 1.7 + stopLingerS : measureEndS + 0.3,
  };
}

interface ScenarioResult {
  name: string;
  mode: Mode;
  weights: number[];
  tokps: number[];
  ratio: number | null;
  target_ratio: number | null;
  aggregate_pct_of_solo: number;
  itl_ms: { p50: number; p95: number; max: number };
  itl_ms_per_engine: { p50: number; p95: number; max: number }[];
  /** Burn engines: the CPU time (ms) the engine spent in each engine's longest gap: one token's
   *  worth (~5 ms) when the gap is waiting; much more when the token itself came out dear (the
   *  machine, not the pacing: see pacer/NOTES.md). */
  itl_max_cpu_ms?: number[];
  bound_ms: number[];
  bound_ok: boolean;
  /** Engine 0 alone at the start of the same run (for static: the free engine's): what the
   *  aggregate and the recovery are compared with. */
  solo_tokps: number;
  /** Engine 0 alone before the others start and, where the scenario has one, after they stop: the
   *  two measurements solo_tokps averages. Apart, they show how far the machine drifted in a run. */
  solo_before_after_tokps?: [number, number | null];
  /** Burn engines: each engine's CPU time over the measured interval, as % of it, and its CPU
   *  time per token (ms). They tell a scheduling bias (CPU split unevenly) from a per-token cost
   *  (tokens dearer in one engine than in another). */
  cpu_pct?: number[];
  cpu_ms_per_token?: number[];
  /** Steal time: how long the hypervisor took core 0 away during the run (with --repeat, during
   *  all its runs; /proc/stat, 10 ms resolution). On a virtual machine, what no pacing can help. */
  steal_ms?: number;
  /** Seconds from the idle/kill event until engine 0 ran ≥ 95 % of its solo rate; null = never. */
  recovery_s?: number | null;
  /** Hand-over (pacer/NOTES.md): seconds from the others' last token to engine 0 at ≥ 90 % of its
   *  solo rate — the others going idle in 'idle release' (coop and built-in engines know their
   *  idleness: target ≤ 0.5 s; gate and free: CPU time, ≤ 2.0 s), stopping (SIGTERM: they leave the
   *  registry) or killed in the others; null = never. */
  release_s?: number | null;
  /** Built-in engines: ms from the first request at each other (warm, idle) engine, while engine 0
   *  is busy, to its first token (target: ≤ one period + its prefill). */
  wake_ms?: (number | null)[];
  targets_met?: boolean;
  /** With --repeat: each run's headline figures (the rest of the result is their medians). */
  runs?: { ratio: number | null; aggregate_pct_of_solo: number; itl_max_ms: number[]; itl_max_cpu_ms?: number[]; bound_ok: boolean; steal_ms?: number; recovery_s?: number | null; solo_before_after_tokps?: [number, number | null] }[];
}

/** Core 0's steal time so far (ms), from /proc/stat; null where there is none to read. */
function core0StealMs(): number | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n').find((l) => l.startsWith('cpu0 '));
    const steal = Number(line?.trim().split(/\s+/)[8]);
    return Number.isFinite(steal) ? steal * 10 : null; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
}

/** An engine's CPU time between its first and last token in [fromUs, toUs), and that token count
 *  less one (the tokens the CPU time paid for); null without CPU figures. */
function cpuOf(output: BurnOutputFile, fromUs: number, toUs: number): { cpuUs: number; tokens: number } | null {
  if (output.cpu.length !== output.tokens.length) return null;
  const first = output.tokens.findIndex((t) => t >= fromUs);
  let last = -1;
  for (let i = output.tokens.length - 1; i >= 0; i--) if ((output.tokens[i] ?? 0) < toUs) { last = i; break; }
  if (first < 0 || last <= first) return null;
  return { cpuUs: (output.cpu[last] ?? 0) - (output.cpu[first] ?? 0), tokens: last - first };
}

/** The engine's CPU time (ms) between the two tokens of its longest gap in [fromUs, toUs); null
 *  without CPU figures or gaps. */
function cpuInLongestGapMs(output: BurnOutputFile, fromUs: number, toUs: number): number | null {
  if (output.cpu.length !== output.tokens.length) return null;
  let longest = -1;
  let at = -1;
  for (let i = 1; i < output.tokens.length; i++) {
    const t0 = output.tokens[i - 1] ?? 0;
    const t1 = output.tokens[i] ?? 0;
    if (t0 < fromUs || t1 >= toUs) continue;
    if (t1 - t0 > longest) [longest, at] = [t1 - t0, i];
  }
  return at < 0 ? null : ((output.cpu[at] ?? 0) - (output.cpu[at - 1] ?? 0)) / 1000;
}

/** tok/s of one engine: from its own counter when it has one (a built-in engine, whose streamed
 *  pieces can merge tokens), else from the recorded tokens. A counter that does not span the
 *  interval is an error: its pieces would count fewer tokens than the other engine's counter. */
function rateOf(output: BurnOutputFile, fromUs: number, toUs: number): number {
  if (output.counters.length === 0) return rate(output.tokens, fromUs, toUs);
  const from = counterAt(output.counters, fromUs);
  const to = counterAt(output.counters, toUs);
  if (from === null || to === null) {
    throw new Error(`engine pid ${output.pid}: its token counter spans ${output.counters[0]?.[0]}–${output.counters.at(-1)?.[0]} µs, not the interval ${Math.round(fromUs)}–${Math.round(toUs)} µs`);
  }
  return (to - from) / ((toUs - fromUs) / 1e6);
}

function taskset(core: number, argv: string[]): string[] {
  return ['taskset', '-c', String(core), ...argv];
}

/**
 * Node flags for a burn engine: no heap-shrinking collections when V8 sees it allocate little
 * (~8 s into its life they cost 10–15 ms of CPU on each of two tokens, in the measured interval
 * of the late-start scenario). A device's decode step has none. (The flag only works on the
 * command line: V8 sets the reducer up with the heap.)
 */
const BURN_NODE_FLAGS = ['--no-memory-reducer'];

function launch(mode: Exclude<Mode, BuiltinMode>, scenario: Scenario, index: number, gpuKey: string, iterations: number, out: string, idleAfterS: number | null): ChildProcess {
  const spec = scenario.engines[index] ?? { weight: 1 };
  const burnArgs = [...BURN_NODE_FLAGS, BURN_ENGINE, '--iterations', String(iterations), '--out', out, '--name', `e${index}-w${spec.weight}`];
  if (idleAfterS !== null) burnArgs.push('--idle-after-s', idleAfterS.toFixed(3));
  let argv: string[];
  switch (mode) {
    case 'free':
      argv = taskset(0, [process.execPath, ...burnArgs, '--mode', 'unaware']);
      break;
    case 'coop':
      argv = taskset(0, [process.execPath, ...burnArgs, '--mode', 'coop', '--gpu-key', gpuKey, '--weight', String(spec.weight)]);
      break;
    case 'static':
      argv = taskset(0, [process.execPath, ...burnArgs, '--mode', 'static', '--static-weights', scenario.engines.map((e) => e.weight).join(','), '--static-index', String(index)]);
      break;
    case 'gate':
      // The supervisor is not the device: it runs on core 1, its engine on core 0.
      argv = taskset(1, [process.execPath, CLI, 'run', '--gpu-key', gpuKey, '--weight', String(spec.weight), '--name', `e${index}`, '--', ...taskset(0, [process.execPath, ...burnArgs, '--mode', 'unaware'])]);
      break;
  }
  const [command, ...args] = argv;
  return spawn(command ?? 'taskset', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

let builtinModel = '';

/** A built-in engine, loaded and warmed up, waiting for its client. */
interface BuiltinHost {
  process: ChildProcess;
  port: number;
}

/**
 * Starts the scenario's built-in engines (all at once, on core 0), waits until each is ready, lets
 * each decode PACED_WARM_TOKENS alone, then waits until none is active any more (the registry's
 * 2 s), so that the scenario starts from warm, idle engines, as an engine a user has been using is.
 */
async function startBuiltinHosts(scenario: Scenario, gpuKeys: string[]): Promise<BuiltinHost[]> {
  // The host's command line as the real-engine benchmark builds it (its Node flags included).
  const { engineArgv } = await import('./pacing-llama.js');
  const processes = scenario.engines.map((spec, index) => {
    const threads = 1;
    const argv = engineArgv('builtin', '', { model: builtinModel, port: 0, ctx: 2048, threads, gpuLayers: 0 }, { gpuKey: gpuKeys[index] ?? '', weight: spec.weight, name: `e${index}` });
    const [command, ...args] = taskset(0, argv);
    return spawn(command ?? 'taskset', args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...builtinHostEnv(threads) } });
  });
  try {
    const hosts = await Promise.all(processes.map((host, index) => readyHost(host, `e${index}`)));
    for (const host of hosts) {
      const target = (await predictedTokensOf(host.port)) + PACED_WARM_TOKENS;
      while ((await predictedTokensOf(host.port)) < target) await streamChat(host.port, () => undefined);
    }
    await sleep(2_200);
    return hosts;
  } catch (error) {
    for (const host of processes) host.kill('SIGKILL');
    throw error;
  }
}

/** Resolves with the host's port once it says it is ready; rejects when it fails or exits first. */
function readyHost(host: ChildProcess, name: string): Promise<BuiltinHost> {
  return new Promise<BuiltinHost>((resolve, reject) => {
    host.once('exit', (code, signal) => reject(new Error(`built-in engine ${name} exited before it was ready (${signal ?? `code ${code}`})`)));
    if (host.stdout === null) return;
    createInterface({ input: host.stdout }).on('line', (line) => {
      const event = parseHostLine(line);
      if (event?.event === 'ready') resolve({ process: host, port: event.port });
      if (event?.event === 'fatal') reject(new Error(`built-in engine ${name}: ${event.message}`));
    });
  });
}

/** The engine's own count of generated tokens; an engine without one is an error here. */
async function predictedTokensOf(port: number): Promise<number> {
  const n = await predictedTokens(port);
  if (!Number.isFinite(n)) throw new Error(`no llamacpp:tokens_predicted_total in the /metrics of 127.0.0.1:${port}`);
  return n;
}

/** One streamed chat completion of PACED_REQUEST_TOKENS; `onPiece` for each streamed piece. */
async function streamChat(port: number, onPiece: () => void): Promise<void> {
  const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'Go on.' }], stream: true, max_tokens: PACED_REQUEST_TOKENS, temperature: 1 }) });
  for await (const part of response.body ?? []) {
    // One piece per token, but for partial UTF-8 that the server holds back and merges.
    const text = Buffer.from(part as Uint8Array).toString('utf8');
    for (const match of text.matchAll(/"content":"/g)) if (match) onPiece();
  }
}

/**
 * A client for a built-in engine: streams short chat completions back to back (a token's cost
 * grows with its place in the context: short requests keep tokens comparable) and records when
 * each streamed piece arrives, in the burn engine's file format, with the engine's own token count
 * 10 times a second. Stops asking `idleAfterS` seconds after it started (the engine goes idle), and
 * when the engine exits.
 */
function streamFromHost({ process: host, port }: BuiltinHost, out: string, idleAfterS: number | null): void {
  const helper = loadRegistryHelper();
  const startedMs = Date.now();
  const tokens: number[] = [];
  let flushed = 0;
  writeFileSync(out, `${JSON.stringify({ pid: host.pid, name: 'builtin', mode: 'builtin', iterations: 0 })}\n`);
  const flush = (): void => {
    if (flushed < tokens.length) appendFileSync(out, `${JSON.stringify({ tokens: tokens.slice(flushed) })}\n`);
    flushed = tokens.length;
  };
  const flusher = setInterval(flush, 100);
  let alive = host.exitCode === null && host.signalCode === null;
  const poller = setInterval(() => {
    void predictedTokensOf(port)
      .then((n) => {
        if (alive) appendFileSync(out, `${JSON.stringify({ counter: [helper.wallUs(), n] })}\n`);
      })
      .catch(() => undefined);
  }, 100);
  host.once('exit', () => {
    alive = false;
    clearInterval(flusher);
    clearInterval(poller);
    flush();
  });
  void (async () => {
    while (alive && (idleAfterS === null || Date.now() - startedMs < idleAfterS * 1000)) {
      try {
        await streamChat(port, () => tokens.push(helper.wallUs()));
      } catch {
        if (!alive) return;
      }
    }
  })();
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves when the child has exited, or after `withinMs` at most. The timer is dropped once the
 *  child is gone: a pending one kept the bench alive for up to 5 s after its last scenario. */
function exited(child: ChildProcess, withinMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, withinMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** The engine process under a `gpu-share run` supervisor (its only child), or the process itself. */
function enginePid(mode: Mode, child: ChildProcess): number | undefined {
  if (mode !== 'gate' || child.pid === undefined) return child.pid;
  try {
    const kids = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    return kids.length > 0 ? Number(kids[0]) : undefined;
  } catch {
    return undefined;
  }
}

/** @param soloOverride the solo rate to compare with, for a mode whose engine is capped even alone
 *  (static): the free engine's, measured in the same scenario a few seconds earlier */
async function runScenario(mode: Mode, scenario: Scenario, iterations: number, dir: string, wallUs: () => number, soloOverride: number | null): Promise<ScenarioResult> {
  const gpuKey = `bench-${process.pid}-${mode}-${scenario.name.replace(/[^A-Za-z0-9]/g, '')}`.slice(0, 40);
  const helper = loadRegistryHelper();
  // Built-in engines are loaded and warmed before the scenario starts, and its timeline starts
  // their clients. They are stopped with SIGKILL (see othersStopS below): their slots age out in 3 s.
  // Unpaced built-in engines each join a registry of their own.
  const gpuKeys = scenario.engines.map((_, i) => (mode === 'builtin-free' ? `${gpuKey.slice(0, 36)}-${i}` : gpuKey));
  const hosts = isBuiltin(mode) ? await startBuiltinHosts(scenario, gpuKeys) : null;
  const timeline = isBuiltin(mode) ? timelineOf(scenario, 0, 3.5) : timelineOf(scenario);
  const t0 = wallUs();
  const stealBefore = core0StealMs();
  const children: (ChildProcess | null)[] = scenario.engines.map(() => null);
  const outs = scenario.engines.map((_, i) => join(dir, `${gpuKey}-${i}.jsonl`));
  const timers: NodeJS.Timeout[] = [];
  /** When each built-in engine's client sent its first request (wall µs). */
  const clientStartUs: (number | null)[] = scenario.engines.map(() => null);
  let eventUs: number | null = null;
  timeline.starts.forEach((startS, i) => {
    const idleAfterS = scenario.event === 'idle' && i === 1 && timeline.eventS !== null ? timeline.eventS - startS : null;
    const host = hosts?.[i];
    if (host !== undefined) {
      children[i] = host.process;
      timers.push(
        setTimeout(() => {
          clientStartUs[i] = wallUs();
          streamFromHost(host, outs[i] ?? '', idleAfterS);
        }, startS * 1000),
      );
    } else if (!isBuiltin(mode)) timers.push(setTimeout(() => (children[i] = launch(mode, scenario, i, gpuKey, iterations, outs[i] ?? '', idleAfterS)), startS * 1000));
  });
  if (scenario.event === 'kill' && timeline.eventS !== null) {
    timers.push(
      setTimeout(() => {
        const child = children[1];
        const pid = child ? enginePid(mode, child) : undefined;
        eventUs = wallUs();
        if (pid !== undefined) process.kill(pid, 'SIGKILL');
      }, timeline.eventS * 1000),
    );
  }
  if (timeline.othersStopS !== null) {
    // A built-in engine given SIGTERM finishes its request first (up to 1.5 s), still decoding:
    // for the second solo measurement the others must stop at once.
    const signal: NodeJS.Signals = isBuiltin(mode) ? 'SIGKILL' : 'SIGTERM';
    timers.push(setTimeout(() => children.slice(1).forEach((child) => child?.kill(signal)), timeline.othersStopS * 1000));
  }
  await sleep(timeline.lengthS * 1000);
  const stealAfter = core0StealMs();
  for (const timer of timers) clearTimeout(timer);
  // A supervisor forwards SIGTERM to its engine; an engine writes its last tokens and exits.
  for (const child of children) child?.kill('SIGTERM');
  await Promise.all(children.map((child) => (child ? exited(child, 5000) : Promise.resolve())));
  for (const child of children) if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const key of new Set(gpuKeys)) {
    try {
      helper.unlink(segmentPath(helper, key));
    } catch {
      // never created (free and static modes)
    }
  }

  const outputs = outs.map(readBurnOutput);
  const tokensOf = (i: number): number[] => outputs[i]?.tokens ?? [];
  // The solo window opens 0.3 s after engine 0's first token: start-up (a supervisor, joining the
  // registry) differs between modes and is not decoding speed.
  const firstToken = tokensOf(0)[0] ?? t0;
  const zero = outputs[0] ?? readBurnOutput('');
  const before = rateOf(zero, Math.max(t0 + timeline.baseline[0] * 1e6, firstToken + 300_000), t0 + timeline.baseline[1] * 1e6);
  const after = timeline.after === null ? null : rateOf(zero, t0 + timeline.after[0] * 1e6, t0 + timeline.after[1] * 1e6);
  const soloTokps = soloOverride ?? (after === null ? before : (before + after) / 2);
  const period = timeline.periodUs;
  // Everyone must be decoding before the measurement starts: an engine that loads a model under
  // contention (the built-in one) may start later than planned. Start a second after the last
  // first token, and end where the scenario stops the others (or its end).
  const allDecodingUs = Math.max(...outputs.map((o) => (o.tokens[0] ?? Number.POSITIVE_INFINITY) + 1e6));
  const fromUs = Math.ceil(Math.max(t0 + timeline.measureFromS * 1e6, Number.isFinite(allDecodingUs) ? allDecodingUs : 0) / period) * period;
  const plannedEndUs = Math.ceil((t0 + timeline.measureFromS * 1e6) / period) * period + timeline.periods * period;
  const toUs = fromUs + Math.max(1, Math.floor((plannedEndUs - fromUs) / period)) * period;
  const tokps = outputs.map((o) => round(rateOf(o, fromUs, toUs), 1));
  const weights = scenario.engines.map((e) => e.weight);
  const shares = computeShares(weights);
  const schedule = buildSchedule(shares.map((share, slot) => ({ slot, share })));
  const boundMs = weights.map((_, slot) => (weights.length > 1 ? (stallBoundUs(schedule, slot) ?? 0) / 1000 : 0));
  const perEngine = outputs.map((o) => gapsMs(o.tokens, fromUs, toUs));
  const itlPerEngine = perEngine.map(summary);
  const aggregate = tokps.reduce((a, b) => a + b, 0);
  const result: ScenarioResult = {
    name: scenario.name,
    mode,
    weights,
    tokps,
    ratio: tokps.length > 1 ? splitOf(tokps[0], tokps[1]) : null,
    target_ratio: weights.length > 1 ? round((weights[0] ?? 1) / (weights[1] ?? 1), 3) : null,
    aggregate_pct_of_solo: soloTokps > 0 ? round((aggregate / soloTokps) * 100, 1) : 0,
    itl_ms: summary(perEngine.flat().sort((a, b) => a - b)),
    itl_ms_per_engine: itlPerEngine,
    bound_ms: boundMs.map((b) => round(b, 1)),
    bound_ok: false,
    solo_tokps: round(soloTokps, 1),
    ...(soloOverride === null ? { solo_before_after_tokps: [round(before, 1), after === null ? null : round(after, 1)] as [number, number | null] } : {}),
  };
  result.bound_ok = withinBound(result);
  if (stealBefore !== null && stealAfter !== null) result.steal_ms = stealAfter - stealBefore;
  const cpu = outputs.map((o) => cpuOf(o, fromUs, toUs));
  if (cpu.every((c) => c !== null)) {
    result.cpu_pct = cpu.map((c) => round(((c?.cpuUs ?? 0) / (toUs - fromUs)) * 100, 1));
    result.cpu_ms_per_token = cpu.map((c) => round((c?.cpuUs ?? 0) / 1000 / Math.max(1, c?.tokens ?? 1), 3));
    result.itl_max_cpu_ms = outputs.map((o) => round(cpuInLongestGapMs(o, fromUs, toUs) ?? 0, 1));
  }
  if (scenario.event === 'idle') eventUs = Math.max(...tokensOf(1));
  if (scenario.event !== undefined && eventUs !== null) {
    const at = recoveredAtUs(tokensOf(0), eventUs, soloTokps);
    result.recovery_s = at === null ? null : round(Math.max(0, at - eventUs) / 1e6, 2);
  }
  if (scenario.engines.length > 1) {
    // The others' last token: at the idle/kill event, or before they were stopped.
    const endUs = eventUs ?? (timeline.othersStopS === null ? null : t0 + timeline.othersStopS * 1e6);
    if (endUs !== null) {
      const lastUs = Math.max(...scenario.engines.slice(1).map((_, k) => tokensOf(k + 1).filter((t) => t <= endUs + 500_000).at(-1) ?? endUs));
      result.release_s = releaseS(tokensOf(0), lastUs, soloTokps);
    }
  }
  if (isBuiltin(mode) && scenario.engines.length > 1) result.wake_ms = clientStartUs.slice(1).map((at, k) => (at === null ? null : wakeMs(tokensOf(k + 1), at)));
  return result;
}

/** Every engine's longest gap within its bound plus two tokens (at the solo rate). Alone, nothing
 *  bounds the gaps but the machine: the bound applies when engines share. */
function withinBound(result: ScenarioResult): boolean {
  const tokenMs = result.solo_tokps > 0 ? 1000 / result.solo_tokps : TOKEN_MS;
  return result.weights.length < 2 || result.itl_ms_per_engine.every((itl, i) => itl.max <= (result.bound_ms[i] ?? 0) + 2 * tokenMs);
}

/** --repeat: the runs of one scenario and mode as one result, each figure the median of the runs
 *  (a ratio is the median of the runs' ratios, not a ratio of medians), and every run's headline
 *  figures kept under `runs`. A recovery that never happened counts as the longest. */
function medianOf(runs: ScenarioResult[]): ScenarioResult {
  const first = runs[0];
  if (first === undefined) throw new Error('medianOf: no runs');
  if (runs.length === 1) return first;
  const m = (pick: (r: ScenarioResult) => number, digits = 2): number => round(median(runs.map(pick)), digits);
  const perEngine = (pick: (r: ScenarioResult, i: number) => number, digits = 2): number[] => first.weights.map((_, i) => m((r) => pick(r, i), digits));
  const itl = (pick: (r: ScenarioResult) => { p50: number; p95: number; max: number }) => ({ p50: m((r) => pick(r).p50), p95: m((r) => pick(r).p95), max: m((r) => pick(r).max) });
  const result: ScenarioResult = {
    ...first,
    tokps: perEngine((r, i) => r.tokps[i] ?? 0, 1),
    ratio: first.ratio === null ? null : m((r) => r.ratio ?? 0, 3),
    aggregate_pct_of_solo: m((r) => r.aggregate_pct_of_solo, 1),
    itl_ms: itl((r) => r.itl_ms),
    itl_ms_per_engine: first.weights.map((_, i) => itl((r) => r.itl_ms_per_engine[i] ?? { p50: 0, p95: 0, max: 0 })),
    solo_tokps: m((r) => r.solo_tokps, 1),
    runs: runs.map((r) => ({ ratio: r.ratio, aggregate_pct_of_solo: r.aggregate_pct_of_solo, itl_max_ms: r.itl_ms_per_engine.map((e) => e.max), ...(r.itl_max_cpu_ms !== undefined ? { itl_max_cpu_ms: r.itl_max_cpu_ms } : {}), bound_ok: r.bound_ok, ...(r.steal_ms !== undefined ? { steal_ms: r.steal_ms } : {}), ...(r.recovery_s !== undefined ? { recovery_s: r.recovery_s } : {}), ...(r.solo_before_after_tokps !== undefined ? { solo_before_after_tokps: r.solo_before_after_tokps } : {}) })),
  };
  delete result.targets_met;
  delete result.solo_before_after_tokps; // each run's is under `runs`
  delete result.itl_max_cpu_ms;
  if (runs.every((r) => r.cpu_pct && r.cpu_ms_per_token)) {
    result.cpu_pct = perEngine((r, i) => r.cpu_pct?.[i] ?? 0, 1);
    result.cpu_ms_per_token = perEngine((r, i) => r.cpu_ms_per_token?.[i] ?? 0, 3);
  }
  if (runs.every((r) => r.steal_ms !== undefined)) result.steal_ms = runs.reduce((sum, r) => sum + (r.steal_ms ?? 0), 0);
  if (first.release_s !== undefined) {
    const release = median(runs.map((r) => r.release_s ?? Number.POSITIVE_INFINITY));
    result.release_s = Number.isFinite(release) ? round(release, 2) : null;
  }
  if (first.wake_ms !== undefined) result.wake_ms = first.wake_ms.map((_, i) => round(median(runs.map((r) => r.wake_ms?.[i] ?? Number.POSITIVE_INFINITY)), 1));
  if (first.recovery_s !== undefined) {
    const recovery = median(runs.map((r) => r.recovery_s ?? Number.POSITIVE_INFINITY));
    result.recovery_s = Number.isFinite(recovery) ? round(recovery, 2) : null;
  }
  result.bound_ok = withinBound(result);
  return result;
}

/** The TDM targets, for the coop and gate modes. */
function judge(result: ScenarioResult, scenario: Scenario): boolean | undefined {
  if (result.mode !== 'coop' && result.mode !== 'gate' && result.mode !== 'builtin') return undefined;
  const checks: boolean[] = [result.bound_ok, result.aggregate_pct_of_solo >= 97];
  if (scenario.ratioTarget && result.ratio !== null && result.target_ratio !== null) {
    checks.push(Math.abs(result.ratio / result.target_ratio - 1) <= 0.03);
    if (result.weights.length === 3) checks.push(Math.abs((result.tokps[1] ?? 0) / (result.tokps[2] ?? 1) - 1) <= 0.03);
  }
  if (scenario.event === 'idle') checks.push(result.recovery_s !== undefined && result.recovery_s !== null && result.recovery_s <= 2.5);
  if (scenario.event === 'idle') checks.push(result.release_s !== undefined && result.release_s !== null && result.release_s <= releaseTargetS(result.mode));
  if (scenario.event === 'kill') checks.push(result.recovery_s !== undefined && result.recovery_s !== null && result.recovery_s <= 3.6);
  return checks.every(Boolean);
}

/** The idle-release target of a mode: engines that know their idleness (coop burn engines, the
 *  built-in engine) hand over within 0.5 s; engines known only by CPU time (gate, free) keep 2 s. */
function releaseTargetS(mode: Mode): number {
  return mode === 'coop' || mode === 'builtin' ? 0.5 : 2.0;
}

const periodMsOf = (weights: number[]): number => round(buildSchedule(computeShares(weights).map((share, slot) => ({ slot, share }))).periodUs / 1000, 0);

function table(results: ScenarioResult[]): string {
  const header = ['scenario', 'mode', 'weights', 'tok/s', 'ratio', 'target', 'solo tok/s', 'agg % solo', 'ITL p50/p95/max ms', 'bound ms', 'recovery s', 'release s (target)', 'wake ms (period)', 'TDM targets'];
  const rows = results.map((r) => [
    r.name,
    r.mode,
    r.weights.join(':'),
    r.tokps.map((t) => t.toFixed(1)).join(' / '),
    r.ratio === null ? '—' : r.ratio.toFixed(3),
    r.target_ratio === null ? '—' : r.target_ratio.toFixed(3),
    r.solo_tokps.toFixed(1),
    r.aggregate_pct_of_solo.toFixed(1),
    `${r.itl_ms.p50.toFixed(1)}/${r.itl_ms.p95.toFixed(1)}/${r.itl_ms.max.toFixed(1)}`,
    r.bound_ms.length ? r.bound_ms.map((b) => b.toFixed(0)).join(' / ') : '—',
    r.recovery_s === undefined ? '' : r.recovery_s === null ? 'never' : r.recovery_s.toFixed(2),
    r.release_s === undefined ? '' : `${r.release_s === null ? 'never' : r.release_s.toFixed(2)}${r.name === 'idle release' ? ` (≤ ${releaseTargetS(r.mode)})` : ''}`,
    r.wake_ms === undefined ? '' : `${r.wake_ms.map((w) => (w === null || !Number.isFinite(w) ? '—' : w.toFixed(0))).join(' / ')} (${periodMsOf(r.weights)})`,
    r.targets_met === undefined ? '' : r.targets_met ? 'met' : 'MISSED',
  ]);
  return textTable(header, rows);
}

async function main(): Promise<void> {
  const values = flagsOrExit('bench:pacing', PACING_USAGE, { quick: { type: 'boolean', default: false }, json: { type: 'boolean', default: false }, builtin: { type: 'boolean', default: false }, 'token-ms': { type: 'string' }, modes: { type: 'string' }, scenarios: { type: 'string' }, 'measure-s': { type: 'string' }, 'warm-s': { type: 'string' }, repeat: { type: 'string' }, gpu: { type: 'boolean', default: false }, 'llama-server': { type: 'boolean', default: false }, cores: { type: 'string' }, 'resume-cost': { type: 'boolean', default: false }, engine: { type: 'string' }, serve: { type: 'boolean', default: false }, setups: { type: 'string' }, blocks: { type: 'string' }, trace: { type: 'string' }, 'stop-method': { type: 'string' } });
  const repeat = values.repeat === undefined ? 1 : Number(values.repeat);
  if (!Number.isInteger(repeat) || repeat < 1 || repeat > 20) {
    console.error(`--repeat: must be a whole number of runs from 1 to 20 (got ${values.repeat})`);
    process.exit(2);
  }
  if (values['measure-s'] !== undefined) {
    MEASURE_S = Number(values['measure-s']);
    if (!Number.isFinite(MEASURE_S) || MEASURE_S < 1 || MEASURE_S > 600) {
      console.error(`--measure-s: must be a number of seconds from 1 to 600 (got ${values['measure-s']})`);
      process.exit(2);
    }
  }
  const warmS = values['warm-s'] === undefined ? undefined : Number(values['warm-s']);
  if (warmS !== undefined && (!Number.isFinite(warmS) || warmS < 0 || warmS > 600)) {
    console.error(`--warm-s: must be a number of seconds from 0 to 600 (got ${values['warm-s']})`);
    process.exit(2);
  }
  if (warmS !== undefined && !values.serve && !values.gpu && !values['llama-server']) {
    console.error('--warm-s: goes with --serve, --llama-server or --gpu (the real engines it warms)');
    process.exit(2);
  }
  if (values.setups !== undefined && !values.serve) {
    console.error('--setups: goes with --serve (the setups it runs)');
    process.exit(2);
  }
  const blocks = values.blocks === undefined ? undefined : Number(values.blocks);
  if (blocks !== undefined && !values.serve) {
    console.error('--blocks: goes with --serve (its blocks of both engines at once)');
    process.exit(2);
  }
  if (blocks !== undefined && (!Number.isInteger(blocks) || blocks < 1 || blocks > 20)) {
    console.error(`--blocks: must be a whole number of blocks from 1 to 20 (got ${values.blocks})`);
    process.exit(2);
  }
  if (values.serve) {
    if (values.gpu || values['llama-server'] || values.builtin || values['resume-cost'] || values.engine !== undefined || values.modes !== undefined || values.scenarios !== undefined || values.cores !== undefined) {
      console.error('--serve: runs on its own (with --setups, --measure-s, --blocks, --warm-s, --repeat, --trace, --json), not with the pinned benchmarks\' flags');
      process.exit(2);
    }
    const { serveBenchMain } = await import('./pacing-serve.js');
    process.exitCode = await serveBenchMain({ setups: values.setups, measureS: values['measure-s'] === undefined ? undefined : MEASURE_S, blocks, warmS, repeat, json: values.json, trace: values.trace }, join(ROOT, 'bench-results'));
    return;
  }
  if (values.engine !== undefined && !values.gpu && !values['llama-server']) {
    console.error('--engine: goes with --llama-server or --gpu (the engines those benchmarks run)');
    process.exit(2);
  }
  if (values.trace !== undefined && !values.gpu && !values['llama-server']) {
    console.error('--trace: goes with --llama-server, --gpu or --serve (the gates it traces run there)');
    process.exit(2);
  }
  if (values.gpu || values['llama-server']) {
    const { llamaBenchMain } = await import('./pacing-llama.js');
    process.exitCode = await llamaBenchMain({ device: values.gpu ? 'gpu' : 'cpu', modes: values.modes, scenarios: values.scenarios, measureS: values['measure-s'] === undefined ? undefined : MEASURE_S, warmS, repeat, json: values.json, cores: values.cores, resumeCost: values['resume-cost'], engine: values.engine, trace: values.trace, stopMethod: values['stop-method'] });
    return;
  }
  const tokenMs = values['token-ms'] === undefined ? TOKEN_MS : Number(values['token-ms']);
  if (!Number.isFinite(tokenMs) || tokenMs < 0.5 || tokenMs > 100) {
    console.error(`--token-ms: must be a number of milliseconds from 0.5 to 100 (got ${values['token-ms']})`);
    process.exit(2);
  }
  const modes = values.modes === undefined ? MODES : values.modes.split(',');
  const unknown = modes.filter((m) => !(MODES as string[]).includes(m));
  if (unknown.length > 0) {
    console.error(`--modes: unknown mode ${unknown.join(', ')} (modes: ${MODES.join(', ')})`);
    process.exit(2);
  }
  if (process.platform !== 'linux' || spawnSync('sh', ['-c', 'command -v taskset']).status !== 0) {
    console.error('bench:pacing needs Linux with taskset (util-linux) to pin every engine to one core');
    process.exit(2);
  }
  const log = (text: string): void => {
    if (!values.json) console.log(text);
    else process.stderr.write(`${text}\n`);
  };
  // The harness (and the built-in engines' clients in it) stays off the "device" core.
  spawnSync('taskset', ['-a', '-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
  const helper = loadRegistryHelper();
  const wallUs = (): number => helper.wallUs();
  const calibration = spawnSync('taskset', ['-c', '0', process.execPath, ...BURN_NODE_FLAGS, BURN_ENGINE, '--calibrate', '--token-ms', String(tokenMs)], { encoding: 'utf8' });
  const iterations = (JSON.parse(calibration.stdout) as { iterations: number }).iterations;
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-bench-'));
  const names = values.quick ? ['2:1'] : values.scenarios?.split(',') ?? SCENARIOS.map((s) => s.name);
  const unknownScenarios = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknownScenarios.length > 0) {
    console.error(`--scenarios: unknown scenario ${unknownScenarios.join(', ')} (scenarios: ${SCENARIOS.map((s) => s.name).join(', ')})`);
    process.exit(2);
  }
  const scenarios = SCENARIOS.filter((s) => names.includes(s.name));
  const started = Date.now();
  log(`pacing benchmark: ${tokenMs} ms tokens (${iterations} iterations), all engines on core 0; ${scenarios.length} scenarios × ${modes.length} modes`);
  const results: ScenarioResult[] = [];
  try {
    if (values.builtin && scenarios.some((s) => s.builtin)) {
      builtinModel = join(tmpdir(), `gpushare-bench-${BUILTIN_MODEL_NAME.toLowerCase().replaceAll('/', '-')}-${BUILTIN_MODEL.seed}.gguf`);
      if (!existsSync(builtinModel)) {
        log(`generating the built-in engine's model ${builtinModel} (${BUILTIN_MODEL_NAME})…`);
        writeGguf(builtinModel, BUILTIN_MODEL);
      }
    }
    for (const scenario of scenarios) {
      // Repeats go round the modes, so that the machine's drift falls on every mode alike.
      const runsByMode = new Map<Mode, ScenarioResult[]>();
      for (let run = 0; run < repeat; run++) {
        let freeSolo: number | null = null;
        for (const mode of MODES) {
          if (!modes.includes(mode)) continue;
          if (isBuiltin(mode) && !(values.builtin && scenario.builtin)) continue;
          const result = await runScenario(mode, scenario, iterations, dir, wallUs, mode === 'static' ? freeSolo : null);
          if (mode === 'free') freeSolo = result.solo_tokps;
          runsByMode.set(mode, [...(runsByMode.get(mode) ?? []), result]);
          log(`  ${scenario.name.padEnd(15)} ${mode.padEnd(6)}${repeat > 1 ? ` run ${run + 1}/${repeat}` : ''} tok/s ${result.tokps.join(' / ')}${result.ratio !== null ? `  ratio ${result.ratio}` : ''}  agg ${result.aggregate_pct_of_solo}% of ${result.solo_tokps}${result.solo_before_after_tokps?.[1] ? ` (${result.solo_before_after_tokps.join(' → ')})` : ''}${result.cpu_pct ? `  cpu ${result.cpu_pct.join('/')}% ${result.cpu_ms_per_token?.join('/')} ms/tok` : ''}  max gap ${result.itl_ms_per_engine.map((e) => e.max).join('/')} ms${result.itl_max_cpu_ms ? ` (cpu in it ${result.itl_max_cpu_ms.join('/')})` : ''}${result.steal_ms ? `  steal ${result.steal_ms} ms` : ''}${result.recovery_s !== undefined ? `  recovery ${result.recovery_s ?? 'never'} s` : ''}${result.release_s !== undefined ? `  release ${result.release_s ?? 'never'} s` : ''}${result.wake_ms !== undefined ? `  wake ${result.wake_ms.map((w) => w ?? '—').join('/')} ms` : ''}`);
        }
      }
      for (const runs of runsByMode.values()) {
        const result = medianOf(runs);
        const verdict = judge(result, scenario);
        if (verdict !== undefined) result.targets_met = verdict;
        results.push(result);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const seconds = round((Date.now() - started) / 1000, 1);
  const report = { benchmark: 'pacing', date: new Date().toISOString(), token_ms: tokenMs, iterations, duration_s: seconds, quick: values.quick, repeat, scenarios: results };
  const outDir = join(ROOT, 'bench-results');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, values.quick ? 'pacing-quick.json' : 'pacing.json'), `${JSON.stringify(report, null, 2)}\n`);
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ scenarios: results })}\n`);
  } else {
    console.log('');
    console.log(table(results));
    console.log(`\nratio = first engine's tok/s over the second's; solo = engine 0 alone at the start of the same run; bound = (1 − share)·period;\nTDM targets (coop, gate, builtin): ratio ±3 %, aggregate ≥ 97 % of solo, max ITL ≤ bound + 2 tokens, idle release ≤ 2.5 s, kill -9 ≤ 3.6 s\nrelease = from the others' last token (idle, stopped or killed) until engine 0 decodes at ≥ 90 % of its solo rate; target in 'idle release': ≤ 0.5 s where idleness is known (coop, builtin), ≤ 2.0 s for CPU-time engines (gate); wake (built-in engines) = from the first request at an idle engine to its first token while engine 0 is busy, target ≤ one period (in brackets) + its prefill\nbuiltin: node-llama-cpp on a generated ${BUILTIN_MODEL_NAME} model, warmed up alone, then two clients streaming ${PACED_REQUEST_TOKENS}-token chat completions back to back`);
    if (repeat > 1) console.log(`every figure is the median of ${repeat} runs (each run's in the JSON, under "runs")`);
    console.log(`${seconds} s; wrote bench-results/${values.quick ? 'pacing-quick.json' : 'pacing.json'}`);
  }
}

stopStartedOnSignal('bench:pacing');
void main();
