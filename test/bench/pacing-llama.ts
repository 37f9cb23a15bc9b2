/**
 * The pacing benchmark on real llama-servers, one driver for two devices:
 *   --llama-server  CPU: every engine pinned to core 0 (the "device"), supervisors, clients and
 *                   this harness on core 1; a generated q8_0 model with random weights
 *   --gpu           the first NVIDIA GPU: a CUDA llama-server with every layer offloaded, no
 *                   pinning, a generated f16 model big enough that decoding streams its weights
 *                   from memory (sparse: the weights are zeros, which cost the GPU the same)
 * The engines are llama-servers, or with --engine builtin our built-in engine (node-llama-cpp
 * behind llama-server's /completion; on the GPU where node-llama-cpp's CUDA build is installed).
 * Modes: free (unpaced), naive (a fixed SIGSTOP/SIGCONT loop over the same TDM windows, run by this
 * harness whether or not an engine is busy), gate (`gpu-share run`, the process gate) and, for the
 * built-in engine only, coop (the cooperative gate it calls after every decode step).
 *
 * Each run of a scenario: engine 0 decodes alone (solo before), the others join, the shares are
 * measured over whole periods, the others stop (idle release: how long engine 0 takes to get back
 * to 95 % of its solo rate), and engine 0 alone again (solo after). Tokens are the server's own
 * count (`tokens_predicted` in every streamed chunk; the /metrics counter moves only when a request
 * ends), CPU time is each engine's process tree from procfs, GPU utilisation is NVML's.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve as resolvePath } from 'node:path';
import { createInterface } from 'node:readline';
import { parseHostLine } from '../../electron/core/engines/host-protocol.js';
import { loadRegistryHelper } from '../../native/helper.js';
import { segmentPath } from '../../electron/core/registry/segment.js';
import { loadNvml, type NvmlDevice, type NvmlLibrary } from '../../native/nvml.js';
import { computeShares } from '../../electron/core/registry/shares.js';
import { RegistryMember, processBootUs, startHeartbeat } from '../../electron/core/registry/member.js';
import { RegistrySegment } from '../../electron/core/registry/segment.js';
import { systemClock } from '../../electron/core/clock.js';
import { buildSchedule, ownerAt, stallBoundUs, usUntilWindowEnd, type Schedule } from '../../electron/core/pacer/schedule.js';
import { writeGguf, type GgufSpec } from '../fixtures/gguf.js';
import { LLAMA_SERVER_HINT, findLlamaServer, freePort, llamaServerArgs, nvidiaSmiListsGpu, streamCompletion, waitHealthy, type LlamaServerArgs } from '../fixtures/llama-server.js';
import { BUILTIN_HOST, CLI, ROOT, predictedTokens } from '../fixtures/procs.js';
import { BUILTIN_HOST_NODE_FLAGS, builtinHostEnv } from '../../electron/core/engines/builtin/defaults.js';
import { PACER_TRACE_ENV, parseGateTrace, type GateTraceEvent } from '../../electron/core/pacer/trace.js';
import { STOP_METHODS, type StopMethod } from '../../electron/core/pacer/stop-method.js';
import { TRACE_MAX_S, analyseTrace, type PacingTrace, type TraceFindings } from './pacing-trace.js';
import { costByWindowPosition, stepEndsUs, counterAt, gapsMs, median, rateOverWholeRequests, releaseS, releasedAtUs, round, splitOf, summary, textTable, wakeMs, windowStartCost, type WindowPositionCost } from './pacing-stats.js';

export type LlamaDevice = 'cpu' | 'gpu';
export type LlamaMode = 'free' | 'naive' | 'gate' | 'coop';
export type LlamaEngineKind = 'llama-server' | 'builtin';
export const LLAMA_ENGINES: readonly LlamaEngineKind[] = ['llama-server', 'builtin'];
/** The modes each engine can run (coop needs an engine that calls the gate per decode step). */
export const LLAMA_MODES: Readonly<Record<LlamaEngineKind, readonly LlamaMode[]>> = { 'llama-server': ['free', 'naive', 'gate'], builtin: ['free', 'naive', 'gate', 'coop'] };

/** The modes a run uses unless --modes says otherwise: on the GPU, within the check part's five
 *  minutes. */
export function defaultLlamaModes(device: LlamaDevice, engine: LlamaEngineKind): readonly LlamaMode[] {
  if (device === 'cpu') return LLAMA_MODES[engine];
  return engine === 'builtin' ? ['free', 'gate', 'coop'] : ['free', 'gate'];
}

export interface LlamaScenario {
  name: string;
  weights: number[];
  /** The measured interval is this many times --measure-s. */
  measureFactor: number;
}

export const LLAMA_SCENARIOS: readonly LlamaScenario[] = [
  { name: '2:1', weights: [2, 1], measureFactor: 1 },
  { name: '1:1', weights: [1, 1], measureFactor: 1 },
  { name: '2:1:1', weights: [2, 1, 1], measureFactor: 2 },
];

/** What each device runs. CPU: a model whose weights stay in the core's caches while the others
 *  run (E256/L4 q8_0, 3.7 MB; ~0.7 ms tokens on one core), as a GPU keeps each engine's weights
 *  in its own memory: with E1024/L8 q8_0 (155 MB) every engine's working set evicted the others',
 *  a window after another engine's lost ~25 ms of 40 on the 2-core VM CI runs on
 *  (`--resume-cost`), and an exact 2:1 of time read 2.86 in tokens; with this one a window loses
 *  nothing measurable. 400-token requests: a token's cost grows with its place in the request
 *  (attention over the context), which whole requests average out (the whole-request split);
 *  short requests would make every request's own costs decide the split instead (pacer NOTES.md).
 *  GPU: 2.4 GB of f16 weights (E4096/L6, FF 11008) that every token streams from HBM, where the
 *  context adds ~4 % by the 1000th token. */
export const LLAMA_MODELS: Readonly<Record<LlamaDevice, { spec: GgufSpec; sparse: boolean; ctx: number; requestTokens: number }>> = {
  cpu: { spec: { embedding: 256, layers: 4, contextLength: 2048, feedForward: 704, heads: 8, vocab: 512, type: 'q8_0', seed: 5 }, sparse: false, ctx: 1024, requestTokens: 400 },
  gpu: { spec: { embedding: 4096, layers: 6, contextLength: 4096, feedForward: 11008, heads: 32, vocab: 512, type: 'f16', seed: 1 }, sparse: true, ctx: 2048, requestTokens: 1000 },
};

/** Seconds measured per scenario unless --measure-s says otherwise (2:1:1 twice as long). CPU:
 *  the slowest engine (a quarter of the core at 2:1:1, ~1.2 s per 400-token request) finishes
 *  tens of whole requests, over which the token split is read without the bias of where the
 *  interval cut them. GPU: the one-part check's budget (5 minutes for every scenario and mode). */
export const LLAMA_MEASURE_S: Readonly<Record<LlamaDevice, number>> = { cpu: 15, gpu: 3 };

/**
 * Seconds every engine of a run decodes, paced as its mode paces, before anything is measured
 * (--warm-s). A built-in engine's JavaScript runs at its steady speed only once V8 has optimised
 * the code that a paced engine runs: its decode loop at every token, its gate's waits a few times a
 * period, which take the longest to be compiled. Started and measured a few seconds later, a
 * weight-1 engine spent 10 % of its CPU in V8's optimising compiler throughout the measured
 * interval, two thirds of it inside its own window (pacer/NOTES.md). A user's engine runs for
 * minutes, so the benchmark measures engines past that.
 */
export const LLAMA_WARM_S: Readonly<Record<LlamaDevice, number>> = { cpu: 10, gpu: 3 };

export interface LlamaBenchOptions {
  device: LlamaDevice;
  engine: LlamaEngineKind;
  /** The llama-server binary (for the built-in engine: unused). */
  server: string;
  modes: LlamaMode[];
  scenarios: LlamaScenario[];
  measureS: number;
  /** Seconds every engine decodes (paced as the mode paces) before anything is measured. */
  warmS: number;
  repeat: number;
  /** CPU: the core every engine runs on, and the one for supervisors, clients and this harness. */
  cores: { engine: number; harness: number };
  log: (line: string) => void;
  /** Called with every result so far after each scenario (a run cut short keeps what it measured). */
  onScenario?: (results: readonly LlamaResult[]) => void;
  /** --trace: each run's per-window trace (pacing-trace.ts), handed over as it is taken; tracing
   *  costs nothing when absent. */
  onTrace?: (trace: Omit<PacingTrace, 'run'>) => void;
  /** --stop-method: how `gate` stops an engine (`gpu-share run --stop-method`); sigstop unless told. */
  stopMethod?: StopMethod;
}

export interface PhaseUtilization {
  solo_before: number | null;
  shared: number | null;
  solo_after: number | null;
}

export interface LlamaResult {
  name: string;
  engine: LlamaEngineKind;
  mode: LlamaMode;
  weights: number[];
  tokps: number[];
  /** Token split: engine 0's rate over engine 1's, over the measured interval. */
  ratio: number | null;
  /** Each engine's rate over the whole requests it started inside the measured interval (null
   *  under one whole request cycle), and how many cycles that was: a token's cost grows with its
   *  place in its request, so a rate over an interval that cuts requests leans toward the engine
   *  that sat on the cheap part of its requests (pacing-stats.ts, rateOverWholeRequests). */
  whole_request_tokps: (number | null)[];
  whole_requests: number[];
  /** The token split from those rates. */
  ratio_whole_requests: number | null;
  equal_pair_ratio_whole_requests: number | null;
  target_ratio: number;
  /** 2:1:1: the two weight-1 engines' rates, the second over the first. */
  equal_pair_ratio: number | null;
  /** Time split: each engine's CPU time (its whole process tree) over the measured interval, %. */
  cpu_pct: number[] | null;
  cpu_ratio: number | null;
  cpu_ms_per_token: number[] | null;
  /** Paced modes: each engine's ms per token by its place in its own windows (the first from the
   *  window's start); null unpaced. */
  window_ms_per_token: WindowPositionCost[] | null;
  solo_tokps: number;
  solo_before_after_tokps: [number, number];
  aggregate_pct_of_solo: number;
  itl_max_ms: number[];
  itl_p50_ms: number;
  bound_ms: number[];
  /** Gate and coop: seconds from the others' stop until engine 0 was last held for their windows
   *  (they hold them until their slots go idle); null unpaced and under the naive loop, which
   *  stops with the interval. */
  release_s: number | null;
  /** Hand-over (pacer/NOTES.md): seconds from the others' last token to engine 0 at ≥ 90 % of its
   *  solo rate (null: never), and ms from the first request at each idle other engine, while
   *  engine 0 is busy, to its first token (prefill included). Targets in HANDOVER_TARGETS. */
  release_90_s: number | null;
  wake_ms: (number | null)[];
  /** NVML's GPU utilisation, mean of the samples in each phase (GPU only). */
  gpu_util_pct: PhaseUtilization | null;
  /** Each server's own /metrics counter at the end, and what its streams said (they agree but
   *  for a request cut short by the stop). */
  metrics_tokens: number[];
  streamed_tokens: number[];
  runs?: { ratio: number | null; ratio_whole_requests: number | null; equal_pair_ratio_whole_requests: number | null; cpu_ratio: number | null; equal_pair_ratio: number | null; aggregate_pct_of_solo: number; release_s: number | null; release_90_s: number | null; wake_ms: (number | null)[]; itl_max_ms: number[] }[];
}

/** What release should be: ≤ 0.5 s where the engine's idleness is known (a llama.cpp server's
 *  /metrics under the gate, the built-in engine's own queue in coop), ≤ 2.0 s for engines known only
 *  by CPU time (opencoti's gate); wake: ≤ one period plus the request's own prefill (the table shows
 *  the period beside it). */
export const HANDOVER_TARGETS = { knownIdleReleaseS: 0.5, cpuTimeReleaseS: 2.0 } as const;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU time (µs) of a process and all its descendants, from /proc (10 ms resolution). */
export function treeCpuUs(pid: number): number {
  let total = 0;
  const seen = new Set<number>();
  const visit = (p: number): void => {
    if (seen.has(p)) return;
    seen.add(p);
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(fields[11]) + Number(fields[12])) * 10_000; // utime, stime: USER_HZ = 100
      for (const task of readdirSync(`/proc/${p}/task`)) {
        for (const child of readFileSync(`/proc/${p}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) visit(Number(child));
      }
    } catch {
      // gone
    }
  };
  visit(pid);
  return total;
}

/** The model each device uses, generated once into the temp folder. */
export function llamaBenchModel(device: LlamaDevice): string {
  const { spec, sparse } = LLAMA_MODELS[device];
  const path = join(tmpdir(), `gpushare-llama-${device}-e${spec.embedding}-l${spec.layers}-f${spec.feedForward}-${spec.type}${sparse ? '-sparse' : `-s${spec.seed ?? 1}`}.gguf`);
  if (!existsSync(path) || statSync(path).size === 0) writeGguf(path, spec, { sparse });
  return path;
}

interface Engine {
  kind: LlamaEngineKind;
  /** The process we started: the server, or its `gpu-share run` supervisor. */
  child: ChildProcess;
  port: number;
  /** The server's process (for signals and CPU time). */
  serverPid: () => number | undefined;
  /** [wall µs, tokens decoded so far by this engine]: one entry per streamed chunk. */
  counter: [number, number][];
  tokens: number[];
  /** [wall µs, tokens decoded so far by this engine] when each request was sent. */
  requestStarts: [number, number][];
  client: AbortController | null;
  streamed: number;
  /** The built-in engine: where it says it loaded the model (node-llama-cpp's backend: cuda,
   *  vulkan, metal, or none for the CPU); null until it says so, and for a llama-server. */
  backend: () => string | null;
  /** The built-in engine in coop: its registry slot, from its ready event (null until then). */
  slot: () => number | null;
}

/** A built-in engine's place in the registry: it paces itself (coop). */
interface CoopPeer {
  gpuKey: string;
  weight: number;
  name: string;
}

/** What one engine runs: a llama-server, or the built-in engine's host with the same model,
 *  context, threads and offload (every layer, or none), joining the registry itself in coop. */
export function engineArgv(kind: LlamaEngineKind, server: string, args: LlamaServerArgs, peer: CoopPeer | null): string[] {
  if (kind === 'llama-server') return [server, ...llamaServerArgs(args)];
  const registry = peer === null ? [] : ['--gpu-key', peer.gpuKey, '--weight', String(peer.weight), '--name', peer.name];
  return [process.execPath, ...BUILTIN_HOST_NODE_FLAGS, BUILTIN_HOST, '--model', args.model, '--ctx', String(args.ctx), '--gpu-layers', args.gpuLayers === 0 ? '0' : 'max', '--threads', String(args.threads), '--port', String(args.port), ...registry];
}

/** The backend in the built-in engine's "model loaded" line (`…, gpu cuda, …`); null in any other line. */
export function backendOf(message: string): string | null {
  if (!message.startsWith('model loaded:')) return null;
  return /, gpu ([a-z0-9]+),/.exec(message)?.[1] ?? null;
}

/** Starts one engine (behind `prefix`: taskset, `gpu-share run`) and waits until it is healthy. */
async function startEngine(prefix: string[], kind: LlamaEngineKind, argv: string[], port: number, threads: number, supervised: boolean, env?: NodeJS.ProcessEnv): Promise<Engine> {
  const [command, ...rest] = [...prefix, ...argv];
  // The built-in engine's host as the supervisor starts it (builtinHostEnv), under whatever else the caller set.
  const hostEnv = kind === 'builtin' ? { ...process.env, ...env, ...builtinHostEnv(threads) } : env;
  const child = spawn(command ?? process.execPath, rest, { stdio: ['ignore', kind === 'builtin' ? 'pipe' : 'ignore', 'pipe'], ...(hostEnv === undefined ? {} : { env: hostEnv }) });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-2000);
  });
  let backend: string | null = null;
  let slot: number | null = null;
  if (child.stdout !== null) {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const event = parseHostLine(line);
      if (event?.event === 'log') backend = backendOf(event.message) ?? backend;
      if (event?.event === 'ready') slot = event.slot;
      if (event?.event === 'fatal') stderr = (stderr + event.message).slice(-2000);
    });
  }
  // taskset execs the server; under `gpu-share run` it is the supervisor's child (beside the
  // supervisor's watchdog).
  const serverPid = (): number | undefined => {
    if (!supervised || child.pid === undefined) return child.pid;
    return childrenOf(child.pid).find((pid) => !commOf(pid).startsWith('gpushare-watch'));
  };
  const engine: Engine = { kind, child, port, serverPid, counter: [], tokens: [], requestStarts: [], client: null, streamed: 0, backend: () => backend, slot: () => slot };
  try {
    await waitHealthy(port, child, 180_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${stderr}`);
  }
  return engine;
}

/** Stops every client, resumes and ends every engine (SIGTERM, SIGKILL after 5 s). */
async function endEngines(engines: readonly Engine[]): Promise<void> {
  for (const engine of engines) {
    engine.client?.abort();
    const pid = engine.serverPid();
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // gone
      }
    }
    engine.child.kill('SIGTERM');
  }
  await Promise.all(engines.map((e) => (e.child.exitCode !== null || e.child.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      e.child.kill('SIGKILL');
      resolve();
    }, 5_000);
    e.child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  }))));
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** Stops an engine's client. Its count holds until now: what the server decoded after the last
 *  chunk that arrived is at most the chunk in flight. */
function stopClient(engine: Engine, wallUs: () => number): void {
  if (engine.client === null || engine.client.signal.aborted) return;
  engine.counter.push([wallUs(), engine.counter.at(-1)?.[1] ?? 0]);
  engine.client.abort();
}

/** Streams requests back to back until aborted, appending to the engine's counter. */
function startClient(engine: Engine, requestTokens: number, wallUs: () => number): void {
  const controller = new AbortController();
  engine.client = controller;
  let base = engine.counter.at(-1)?.[1] ?? 0;
  void (async () => {
    while (!controller.signal.aborted) {
      let last = 0;
      engine.requestStarts.push([wallUs(), base]);
      try {
        const done = await streamCompletion(engine.port, requestTokens, wallUs, {
          signal: controller.signal,
          body: engine.kind,
          onChunk: (at, decoded) => {
            for (let i = last; i < decoded; i++) engine.tokens.push(at);
            last = decoded;
            engine.counter.push([at, base + decoded]);
          },
        });
        base += done.tokens;
        engine.streamed += done.tokens;
      } catch {
        if (controller.signal.aborted) return;
        await sleep(50);
      }
    }
  })();
}

/** Every engine's server pid, for signals: never a guess (a pid of -1 would signal every
 *  process we may signal). */
function serverPids(engines: readonly Engine[]): number[] {
  return engines.map((e) => {
    const pid = e.serverPid();
    if (pid === undefined || pid <= 0) throw new Error(`naive: the server pid of the engine on port ${e.port} is unknown`);
    return pid;
  });
}

/**
 * The naive pacer: from the scenario's schedule, whatever the engines do, SIGCONT the engine whose
 * window it is and SIGSTOP the others, at every window edge of the wall clock. Returns a stopper
 * that resumes everyone.
 */
function naivePacer(pids: number[], schedule: Schedule, wallUs: () => number, trace?: (index: number, event: GateTraceEvent) => void): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  const send = (pid: number, signal: NodeJS.Signals): void => {
    try {
      process.kill(pid, signal);
    } catch {
      // gone
    }
  };
  const tick = (): void => {
    if (stopped) return;
    const now = wallUs();
    const owner = ownerAt(schedule, now);
    pids.forEach((pid, slot) => send(pid, slot === owner ? 'SIGCONT' : 'SIGSTOP'));
    if (trace !== undefined) pids.forEach((pid, slot) => trace(slot, { k: slot === owner ? 'cont' : 'stop', t: now, pid }));
    timer = setTimeout(tick, Math.max(0.5, (owner === null ? schedule.periodUs : usUntilWindowEnd(schedule, owner, now)) / 1000));
  };
  tick();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
    for (const pid of pids) send(pid, 'SIGCONT');
  };
}

function nvmlSampler(): { sample: (wallUs: number) => void; between: (fromUs: number, toUs: number) => [number, number][]; mean: (fromUs: number, toUs: number) => number | null; close: () => void } | null {
  let nvml: NvmlLibrary;
  try {
    nvml = loadNvml();
  } catch {
    return null;
  }
  if (!nvml.init().ok) return null;
  const handle = nvml.deviceHandle(0);
  if (!handle.ok) return null;
  const device: NvmlDevice = handle.value;
  const samples: [number, number][] = [];
  return {
    between: (fromUs, toUs) => samples.filter(([t]) => t >= fromUs && t < toUs),
    sample: (at) => {
      const u = nvml.utilization(device);
      if (u.ok && u.value !== null) samples.push([at, u.value.gpuPct]);
    },
    mean: (fromUs, toUs) => {
      const inside = samples.filter(([t]) => t >= fromUs && t < toUs).map(([, v]) => v);
      return inside.length === 0 ? null : round(inside.reduce((a, b) => a + b, 0) / inside.length, 1);
    },
    close: () => {
      nvml.shutdown();
    },
  };
}

async function runOnce(options: LlamaBenchOptions, scenario: LlamaScenario, mode: LlamaMode, model: string): Promise<LlamaResult> {
  const { device, server, engine: kind } = options;
  const config = LLAMA_MODELS[device];
  const helper = loadRegistryHelper();
  const wallUs = (): number => helper.wallUs();
  const gpuKey = `bench-llama-${process.pid}-${mode}-${scenario.name.replace(/[^0-9]/g, '')}`.slice(0, 40);
  const shares = computeShares(scenario.weights);
  const schedule = buildSchedule(shares.map((share, slot) => ({ slot, share })));
  const pin = device === 'cpu';
  const { engine: engineCore, harness: harnessCore } = options.cores;
  const engines: Engine[] = [];
  const nvml = device === 'gpu' ? nvmlSampler() : null;
  let sampler: NodeJS.Timeout | null = null;
  // --trace: each supervisor writes its gate's events to a file of its own; the naive loop's
  // signals are kept here.
  const tracing = options.onTrace !== undefined;
  const traceDir = tracing ? mkdtempSync(join(tmpdir(), 'gpushare-pacing-trace-')) : null;
  const naiveEvents: GateTraceEvent[][] = scenario.weights.map(() => []);
  try {
    for (let i = 0; i < scenario.weights.length; i++) {
      const port = await freePort();
      const args: LlamaServerArgs = { model, port, ctx: config.ctx, threads: pin ? 1 : 4, gpuLayers: device === 'gpu' ? 999 : 0 };
      const enginePin = pin ? ['taskset', '-c', String(engineCore)] : [];
      const weight = scenario.weights[i] ?? 1;
      const prefix =
        mode === 'gate'
          ? [...(pin ? ['taskset', '-c', String(harnessCore)] : []), process.execPath, CLI, 'run', '--gpu-key', gpuKey, '--weight', String(weight), '--name', `e${i}`, '--activity-url', `http://127.0.0.1:${port}/metrics`, ...(options.stopMethod === 'cuda-lock' ? ['--stop-method', 'cuda-lock'] : []), '--', ...enginePin]
          : enginePin;
      const argv = engineArgv(kind, server, args, mode === 'coop' ? { gpuKey, weight, name: `e${i}` } : null);
      const traceEnv = traceDir !== null && mode === 'gate' ? { ...process.env, [PACER_TRACE_ENV]: join(traceDir, `e${i}.jsonl`) } : undefined;
      const engine = await startEngine(prefix, kind, argv, port, args.threads, mode === 'gate', traceEnv);
      engines.push(engine);
      // Never a GPU figure from an engine that fell back to the CPU.
      if (kind === 'builtin' && device === 'gpu' && engine.backend() !== 'cuda') throw new Error(`the built-in engine loaded its model on ${engine.backend() ?? 'an unnamed backend'}, not CUDA`);
    }
    // Warm each engine alone (its first requests allocate and, on a GPU, capture graphs), then all
    // of them together as the mode paces them (LLAMA_WARM_S), then let the registry see every
    // engine idle.
    for (const engine of engines) await streamCompletion(engine.port, Math.min(200, config.requestTokens), wallUs, { body: kind });
    if (options.warmS > 0) {
      const stopWarmPacer = mode === 'naive' ? naivePacer(serverPids(engines), schedule, wallUs) : null;
      for (const engine of engines) startClient(engine, config.requestTokens, wallUs);
      await sleep(options.warmS * 1000);
      stopWarmPacer?.();
      for (const engine of engines) stopClient(engine, wallUs);
    }
    await sleep(2_500);
    if (nvml !== null) sampler = setInterval(() => nvml.sample(wallUs()), 100);

    const t0 = wallUs();
    const e0 = engines[0];
    if (e0 === undefined) throw new Error('no engine');
    startClient(e0, config.requestTokens, wallUs);
    await sleep(3_000);
    const othersStartUs = wallUs();
    for (const engine of engines.slice(1)) startClient(engine, config.requestTokens, wallUs);
    let stopNaive: (() => void) | null = null;
    if (mode === 'naive') {
      stopNaive = naivePacer(serverPids(engines), schedule, wallUs, tracing ? (index, event) => naiveEvents[index]?.push(event) : undefined);
    }
    // Everyone decoding for a second, then whole periods.
    const deadline = Date.now() + 30_000;
    while (engines.some((e) => (e.tokens.at(-1) ?? 0) < othersStartUs) && Date.now() < deadline) await sleep(20);
    const period = schedule.periodUs;
    const fromUs = Math.ceil((wallUs() + 1e6) / period) * period;
    const periods = Math.max(1, Math.floor((options.measureS * scenario.measureFactor * 1e6) / period));
    const toUs = fromUs + periods * period;
    await sleep((fromUs - wallUs()) / 1000);
    const cpuFrom = engines.map((e) => treeCpuUs(e.serverPid() ?? -1));
    await sleep((toUs - wallUs()) / 1000);
    const cpuTo = engines.map((e) => treeCpuUs(e.serverPid() ?? -1));
    await sleep(250);
    stopNaive?.();
    const stopUs = wallUs();
    for (const engine of engines.slice(1)) stopClient(engine, wallUs);
    // Idle release, then engine 0 alone again.
    await sleep(5_000);
    const afterFromUs = wallUs();
    await sleep(2_000);
    const afterToUs = wallUs();
    stopClient(e0, wallUs);
    if (sampler !== null) clearInterval(sampler);
    await sleep(300);
    const metrics = await Promise.all(engines.map((e) => predictedTokens(e.port).catch(() => Number.NaN)));

    const rateOf = (e: Engine, a: number, b: number): number => {
      const x = counterAt(e.counter, a);
      const y = counterAt(e.counter, b);
      if (x === null || y === null) throw new Error(`engine on port ${e.port}: its token count (${e.counter.length} samples, ${e.counter[0]?.[0] ?? '—'}–${e.counter.at(-1)?.[0] ?? '—'} µs) does not span ${Math.round(a)}–${Math.round(b)} µs`);
      return (y - x) / ((b - a) / 1e6);
    };
    const before = rateOf(e0, t0 + 1e6, othersStartUs - 50_000);
    const after = rateOf(e0, afterFromUs, afterToUs);
    const solo = (before + after) / 2;
    const tokps = engines.map((e) => round(rateOf(e, fromUs, toUs), 1));
    const cpuUs = engines.map((_, i) => (cpuTo[i] ?? 0) - (cpuFrom[i] ?? 0));
    const cpuPct = pin ? cpuUs.map((c) => round((c / (toUs - fromUs)) * 100, 1)) : null;
    const perTokenMs = pin ? cpuUs.map((c, i) => round(c / 1000 / Math.max(1, (tokps[i] ?? 0) * ((toUs - fromUs) / 1e6)), 2)) : null;
    const itl = engines.map((e) => summary(gapsMs(e.tokens, fromUs, toUs)));
    // Held for the others' windows until their slots go idle (the activity window): the gate only;
    // free never holds, and the naive loop stops with the interval.
    const othersShortestWindowUs = Math.min(...schedule.windows.filter((w) => w.slot !== 0).map((w) => w.lengthUs));
    const released = mode === 'gate' || mode === 'coop' ? releasedAtUs(e0.tokens, stopUs, othersShortestWindowUs / 2, schedule.periodUs) : null;
    // The others' last token: their clients stop at stopUs (a token may still arrive in flight).
    const othersLastTokenUs = Math.max(...engines.slice(1).map((e) => e.tokens.filter((t) => t <= stopUs + 500_000).at(-1) ?? stopUs));
    if (options.onTrace !== undefined) options.onTrace(takeTrace({ scenario, mode, stopMethod: options.stopMethod, schedule, engines, fromUs, toUs, traceDir, naiveEvents, nvml, device }));
    const whole = engines.map((e) => rateOverWholeRequests(e.requestStarts, fromUs, toUs));
    const wholeTokps = whole.map((w) => (w === null ? null : round(w.tokps, 1)));
    return {
      name: scenario.name,
      engine: kind,
      mode,
      weights: scenario.weights,
      tokps,
      ratio: splitOf(tokps[0], tokps[1]),
      whole_request_tokps: wholeTokps,
      whole_requests: whole.map((w) => w?.requests ?? 0),
      ratio_whole_requests: splitOf(wholeTokps[0], wholeTokps[1]),
      equal_pair_ratio_whole_requests: scenario.weights.length === 3 ? splitOf(wholeTokps[2], wholeTokps[1]) : null,
      target_ratio: round((scenario.weights[0] ?? 1) / (scenario.weights[1] ?? 1), 3),
      equal_pair_ratio: scenario.weights.length === 3 ? splitOf(tokps[2], tokps[1]) : null,
      cpu_pct: cpuPct,
      cpu_ratio: cpuPct === null ? null : splitOf(cpuPct[0], cpuPct[1]),
      cpu_ms_per_token: perTokenMs,
      window_ms_per_token: mode === 'free' ? null : engines.map((e, slot) => costByWindowPosition(e.tokens, schedule, slot, fromUs, toUs)),
      solo_tokps: round(solo, 1),
      solo_before_after_tokps: [round(before, 1), round(after, 1)],
      aggregate_pct_of_solo: round((tokps.reduce((a, b) => a + b, 0) / solo) * 100, 1),
      itl_max_ms: itl.map((s) => s.max),
      itl_p50_ms: median(itl.map((s) => s.p50)),
      bound_ms: scenario.weights.map((_, slot) => round((stallBoundUs(schedule, slot) ?? 0) / 1000, 1)),
      release_s: released === null ? null : round(Math.max(0, released - stopUs) / 1e6, 2),
      release_90_s: releaseS(e0.tokens, othersLastTokenUs, solo),
      wake_ms: engines.slice(1).map((e) => wakeMs(e.tokens, othersStartUs)),
      gpu_util_pct: nvml === null ? null : { solo_before: nvml.mean(t0 + 1e6, othersStartUs), shared: nvml.mean(fromUs, toUs), solo_after: nvml.mean(afterFromUs, afterToUs) },
      metrics_tokens: metrics,
      streamed_tokens: engines.map((e) => e.streamed),
    };
  } finally {
    if (sampler !== null) clearInterval(sampler);
    nvml?.close();
    await endEngines(engines);
    try {
      helper.unlink(segmentPath(helper, gpuKey));
    } catch {
      // never created (free and naive)
    }
    if (traceDir !== null) rmSync(traceDir, { recursive: true, force: true });
  }
}

/** One run's trace over the measured interval (its first TRACE_MAX_S): the supervisors' files
 *  (flushed every second: the interval ended seconds ago) or the naive loop's signals, each
 *  engine's tokens, NVML's samples. */
function takeTrace(run: { scenario: LlamaScenario; mode: LlamaMode; stopMethod?: StopMethod | undefined; schedule: Schedule; engines: readonly Engine[]; fromUs: number; toUs: number; traceDir: string | null; naiveEvents: GateTraceEvent[][]; nvml: ReturnType<typeof nvmlSampler>; device: LlamaDevice }): Omit<PacingTrace, 'run'> {
  const { schedule, fromUs } = run;
  const toUs = Math.min(run.toUs, fromUs + TRACE_MAX_S * 1e6);
  const engines = run.engines.map((engine, slot) => {
    let events: GateTraceEvent[] = [];
    if (run.mode === 'naive') events = run.naiveEvents[slot] ?? [];
    else if (run.mode === 'gate' && run.traceDir !== null) {
      const file = join(run.traceDir, `e${slot}.jsonl`);
      events = existsSync(file) ? parseGateTrace(readFileSync(file, 'utf8')).events : [];
    }
    const before = events.filter((e) => (e.k === 'stop' || e.k === 'cont') && e.t < fromUs).at(-1);
    return {
      slot,
      weight: run.scenario.weights[slot] ?? 1,
      boundUs: stallBoundUs(schedule, slot) ?? 0,
      tokens: engine.tokens.filter((t) => t >= fromUs && t < toUs),
      // 200 ms before the interval: the decisions and samples that led into its first windows.
      gate: events.filter((e) => e.t >= fromUs - 200_000 && e.t < toUs),
      stoppedAtStart: before?.k === 'stop',
      requests: engine.requestStarts.map(([t]) => t).filter((t) => t >= fromUs - schedule.periodUs && t < toUs),
    };
  });
  const nvml: PacingTrace['nvml'] =
    run.device !== 'gpu'
      ? { device: 'not available: CPU run', processes: 'not available: CPU run' }
      : run.nvml === null
        ? { device: 'not available: NVML did not load', processes: 'not available: NVML did not load' }
        : { device: run.nvml.between(fromUs, toUs), processes: 'not available: the NVML binding reads no per-process utilisation (nvmlDeviceGetProcessUtilization is not bound)' };
  return { scenario: run.scenario.name, mode: run.mode === 'gate' && run.stopMethod === 'cuda-lock' ? 'gate+cuda-lock' : run.mode, fromUs, toUs, schedule: { periodUs: schedule.periodUs, windows: schedule.windows.map((w) => ({ slot: w.slot, startUs: w.startUs, lengthUs: w.lengthUs })) }, engines, nvml };
}

/** The runs of one scenario and mode as one result: each figure the median of the runs. */
function medianOfRuns(runs: LlamaResult[]): LlamaResult {
  const first = runs[0];
  if (first === undefined) throw new Error('no runs');
  if (runs.length === 1) return first;
  const m = (pick: (r: LlamaResult) => number | null, digits = 3): number | null => {
    const values = runs.map(pick).filter((v): v is number => v !== null);
    return values.length === 0 ? null : round(median(values), digits);
  };
  const perEngine = (pick: (r: LlamaResult, i: number) => number | null, digits = 1): number[] => first.weights.map((_, i) => m((r) => pick(r, i), digits) ?? 0);
  return {
    ...first,
    tokps: perEngine((r, i) => r.tokps[i] ?? null),
    ratio: m((r) => r.ratio),
    whole_request_tokps: first.weights.map((_, i) => m((r) => r.whole_request_tokps[i] ?? null, 1)),
    whole_requests: first.weights.map((_, i) => m((r) => r.whole_requests[i] ?? null, 0) ?? 0),
    ratio_whole_requests: m((r) => r.ratio_whole_requests),
    equal_pair_ratio_whole_requests: m((r) => r.equal_pair_ratio_whole_requests),
    equal_pair_ratio: m((r) => r.equal_pair_ratio),
    cpu_pct: first.cpu_pct === null ? null : perEngine((r, i) => r.cpu_pct?.[i] ?? null),
    cpu_ratio: m((r) => r.cpu_ratio),
    cpu_ms_per_token: first.cpu_ms_per_token === null ? null : perEngine((r, i) => r.cpu_ms_per_token?.[i] ?? null, 2),
    window_ms_per_token:
      first.window_ms_per_token === null
        ? null
        : first.weights.map((_, i) => ({
            first: m((r) => r.window_ms_per_token?.[i]?.first ?? null, 2),
            second: m((r) => r.window_ms_per_token?.[i]?.second ?? null, 2),
            rest: m((r) => r.window_ms_per_token?.[i]?.rest ?? null, 2),
            perWindow: m((r) => r.window_ms_per_token?.[i]?.perWindow ?? null, 1),
            start: m((r) => r.window_ms_per_token?.[i]?.start ?? null, 2),
            startToNext: m((r) => r.window_ms_per_token?.[i]?.startToNext ?? null, 2),
          })),
    solo_tokps: m((r) => r.solo_tokps, 1) ?? 0,
    aggregate_pct_of_solo: m((r) => r.aggregate_pct_of_solo, 1) ?? 0,
    itl_max_ms: perEngine((r, i) => r.itl_max_ms[i] ?? null, 2),
    release_s: m((r) => r.release_s, 2),
    release_90_s: m((r) => r.release_90_s, 2),
    wake_ms: first.wake_ms.map((_, i) => m((r) => r.wake_ms[i] ?? null, 1)),
    runs: runs.map((r) => ({ ratio: r.ratio, ratio_whole_requests: r.ratio_whole_requests, equal_pair_ratio_whole_requests: r.equal_pair_ratio_whole_requests, cpu_ratio: r.cpu_ratio, equal_pair_ratio: r.equal_pair_ratio, aggregate_pct_of_solo: r.aggregate_pct_of_solo, release_s: r.release_s, release_90_s: r.release_90_s, wake_ms: r.wake_ms, itl_max_ms: r.itl_max_ms })),
  };
}

export function llamaTable(results: readonly LlamaResult[]): string {
  const header = ['scenario', 'mode', 'tok/s', 'token split', 'whole req (n)', 'time split', 'target', '2:1:1 pair', 'CPU ms/tok', 'ms/tok in window 1st/2nd/rest', 'solo tok/s (before→after)', 'agg % solo', 'max gap ms', 'bound ms', 'release s', 'release 90% s (target)', 'wake ms (period)', 'GPU util % solo/shared/after'];
  const f = (x: number | null, d = 3): string => (x === null ? '—' : x.toFixed(d));
  const rows = results.map((r) => [
    r.name,
    r.mode,
    r.tokps.map((t) => t.toFixed(1)).join(' / '),
    f(r.ratio),
    `${f(r.ratio_whole_requests)} (${r.whole_requests.join('/')})`,
    f(r.cpu_ratio),
    r.target_ratio.toFixed(3),
    r.equal_pair_ratio === null ? '—' : `${f(r.equal_pair_ratio)} (whole req ${f(r.equal_pair_ratio_whole_requests)})`,
    r.cpu_ms_per_token === null ? '—' : r.cpu_ms_per_token.map((c) => c.toFixed(2)).join(' / '),
    r.window_ms_per_token === null ? '—' : r.window_ms_per_token.map((w) => [w.first, w.second, w.rest].map((x) => (x === null ? '—' : x.toFixed(1))).join('/')).join(' | '),
    `${r.solo_tokps.toFixed(1)} (${r.solo_before_after_tokps.map((s) => s.toFixed(1)).join('→')})`,
    r.aggregate_pct_of_solo.toFixed(1),
    r.itl_max_ms.map((m) => m.toFixed(1)).join(' / '),
    r.bound_ms.map((b) => b.toFixed(0)).join(' / '),
    f(r.release_s, 2),
    `${f(r.release_90_s, 2)} (${r.mode === 'gate' || r.mode === 'coop' ? `≤ ${HANDOVER_TARGETS.knownIdleReleaseS}` : '—'})`,
    `${r.wake_ms.map((w) => f(w, 0)).join(' / ') || '—'} (${round(buildSchedule(computeShares(r.weights).map((share, slot) => ({ slot, share }))).periodUs / 1000, 0)})`,
    r.gpu_util_pct === null ? '—' : [r.gpu_util_pct.solo_before, r.gpu_util_pct.shared, r.gpu_util_pct.solo_after].map((u) => (u === null ? '—' : u.toFixed(0))).join(' / '),
  ]);
  return textTable(header, rows);
}

/**
 * The resume-cost probe (`--resume-cost`): what starting a window costs one engine, whoever does
 * the stopping. Engine 0 decodes in windows of RESUME_WINDOW_MS and is stopped (SIGSTOP) for
 * `stopMs` between them, the device idle meanwhile or, with `busy`, decoding for a second engine
 * (as the other peers do at 2:1:1). Against the same engine unstopped (stopMs 0), a window's cost
 * is the device time it lost (its length less what its tokens take unstopped) and, on the CPU,
 * the CPU it spent beyond its tokens. A fixed cost c per window turns a 2:1 split of time into
 * (2W − c)/(W − c) in tokens.
 */
export interface ResumeCostCase {
  stopMs: number;
  busy: boolean;
}

export const RESUME_WINDOW_MS = 40;
export const RESUME_COST_CASES: readonly ResumeCostCase[] = [
  { stopMs: 0, busy: false },
  { stopMs: 40, busy: false },
  { stopMs: 120, busy: false },
  { stopMs: 360, busy: false },
  { stopMs: 120, busy: true },
];
/** Seconds engine 0 runs in each case (the interval is longer by the stops): a few whole requests
 *  on the CPU, so that a token's place in its request (its cost grows with it) averages out. */
export const RESUME_RUNNING_S: Readonly<Record<LlamaDevice, number>> = { cpu: 6, gpu: 2 };

export interface ResumeCostResult {
  mode: ResumeMode;
  stop_ms: number;
  busy: boolean;
  window_ms: number;
  interval_s: number;
  tokens: number;
  /** Windows in the interval (null unstopped). */
  windows: number | null;
  tokens_per_window: number | null;
  /** Tokens per second of engine 0's own running time. */
  tokps_running: number;
  cpu_ms_per_token: number | null;
  window_ms_per_token: WindowPositionCost | null;
  lost_ms_per_window: number | null;
  extra_cpu_ms_per_window: number | null;
  /** Per window, its length less its tokens at its own later cadence; the median over windows. */
  start_ms_per_window: number | null;
  /** The same counting every token that arrives before the window comes round again (one that
   *  reached the client after its end, one whose step ran past it): what starting it costs,
   *  without what its end did (WindowPositionCost.startToNext). */
  start_ms_per_window_to_next: number | null;
  /** The same from the engine's own step log, where each token is decoded rather than where the
   *  client reads it (the built-in engine only; null for others). */
  engine_start_ms_per_window: number | null;
}

/** How the probe stops engine 0 between its windows: SIGSTOP from this harness (any engine), or
 *  the built-in engine's own cooperative gate, with the stop another registry peer's window. */
export type ResumeMode = 'naive' | 'coop';

/** The probe's modes for an engine (coop needs the built-in engine's gate). */
export const RESUME_MODES: Readonly<Record<LlamaEngineKind, readonly ResumeMode[]>> = { 'llama-server': ['naive'], builtin: ['coop', 'naive'] };

/** The weight of the peer whose window is the stop, beside engine 0's weight 1: 40 ms windows and
 *  stops of 40, 120 and 360 ms are weights 1:1, 1:3 and 1:9 (periods 80, 160 and 400 ms). */
export function stopPeerWeight(stopMs: number): number {
  return stopMs / RESUME_WINDOW_MS;
}

/** A registry peer kept active by this harness, standing for an engine whose window is the stop
 *  while the device idles (coop, device idle). */
function holdWindow(helper: ReturnType<typeof loadRegistryHelper>, gpuKey: string, weight: number): { slot: number; leave: () => void } {
  const clock = systemClock(() => helper.wallUs());
  const segment = RegistrySegment.openForJoin(helper, gpuKey);
  const member = new RegistryMember(segment, clock, { pid: process.pid, ownerPid: process.pid, bootUs: processBootUs(clock.wallUs()), name: 'stop', weight, active: true });
  const slot = member.join();
  const heartbeat = startHeartbeat(member, () => undefined);
  return {
    slot,
    leave: () => {
      heartbeat.stop();
      member.leave();
      segment.close();
    },
  };
}

async function slotOf(engine: Engine): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const slot = engine.slot();
    if (slot !== null) return slot;
    if (Date.now() > deadline) throw new Error(`the built-in engine on port ${engine.port} never said which registry slot it joined`);
    await sleep(20);
  }
}

/** The step log's file is written once a second (trace.ts): this long after the interval it holds
 *  every step of it. */
const STEP_LOG_FLUSH_MS = 1_200;

/** The step ends in a built-in engine's step log, once its last second is written; null (and the
 *  column says —) when there is none to read. */
async function stepEndsOf(path: string): Promise<number[] | null> {
  await sleep(STEP_LOG_FLUSH_MS);
  try {
    return stepEndsUs(parseGateTrace(readFileSync(path, 'utf8')).events);
  } catch {
    return null;
  }
}

/** A case as measured, before it is set against the unstopped run of its mode. */
type ResumeCostMeasured = Omit<ResumeCostResult, 'lost_ms_per_window' | 'extra_cpu_ms_per_window'>;

async function resumeCostOnce(options: LlamaBenchOptions, model: string, c: ResumeCostCase, mode: ResumeMode): Promise<ResumeCostMeasured> {
  const { device, server } = options;
  const config = LLAMA_MODELS[device];
  const helper = loadRegistryHelper();
  const wallUs = (): number => helper.wallUs();
  const pin = device === 'cpu';
  const engines: Engine[] = [];
  const gpuKey = `bench-resume-${process.pid}-${c.stopMs}${c.busy ? 'b' : 'i'}`.slice(0, 40);
  let held: { slot: number; leave: () => void } | null = null;
  // The built-in engine 0 logs its steps: the window's start counted where its tokens are decoded
  // (a JSON line a step, the same in every mode).
  const stepLogDir = options.engine === 'builtin' ? mkdtempSync(join(tmpdir(), 'gpushare-resume-')) : null;
  try {
    for (let i = 0; i < (c.busy ? 2 : 1); i++) {
      const port = await freePort();
      const args: LlamaServerArgs = { model, port, ctx: config.ctx, threads: pin ? 1 : 4, gpuLayers: device === 'gpu' ? 999 : 0 };
      const peer = mode === 'coop' ? { gpuKey, weight: i === 0 ? 1 : stopPeerWeight(c.stopMs), name: `e${i}` } : null;
      const env = i === 0 && stepLogDir !== null ? { [PACER_TRACE_ENV]: join(stepLogDir, 'steps') } : undefined;
      engines.push(await startEngine(pin ? ['taskset', '-c', String(options.cores.engine)] : [], options.engine, engineArgv(options.engine, server, args, peer), port, args.threads, false, env));
    }
    for (const engine of engines) await streamCompletion(engine.port, Math.min(200, config.requestTokens), wallUs, { body: options.engine });
    const windowUs = RESUME_WINDOW_MS * 1000;
    const stopUs = c.stopMs * 1000;
    const e0 = engines[0];
    if (e0 === undefined) throw new Error('no engine');
    let schedule: Schedule;
    if (mode === 'coop') {
      // The engines' own schedule, from their slots: engine 0 at weight 1, the stop the other peer's.
      const slot0 = await slotOf(e0);
      const e1 = engines[1];
      if (stopUs > 0 && e1 === undefined) held = holdWindow(helper, gpuKey, stopPeerWeight(c.stopMs));
      const other = e1 !== undefined ? await slotOf(e1) : held?.slot;
      const shares = computeShares(other === undefined ? [1] : [1, stopPeerWeight(c.stopMs)]);
      schedule = buildSchedule([{ slot: slot0, share: shares[0] ?? 1 }, ...(other === undefined ? [] : [{ slot: other, share: shares[1] ?? 0 }])]);
      const mine = schedule.windows.find((w) => w.slot === slot0);
      if (stopUs > 0 && (schedule.periodUs !== windowUs + stopUs || mine?.lengthUs !== windowUs)) throw new Error(`coop: the registry's schedule (period ${schedule.periodUs} µs, window ${mine?.lengthUs ?? '—'} µs) is not ${RESUME_WINDOW_MS} ms windows with ${c.stopMs} ms stops`);
      // Let the engines' copies of the registry see the holder.
      await sleep(300);
    } else {
      // Slot 0 is engine 0's window; slot 1 the stop (the second engine's window when busy).
      schedule = {
        periodUs: windowUs + stopUs,
        windows: [
          { slot: 0, share: 0, windowShare: 0, startUs: 0, lengthUs: windowUs },
          ...(stopUs > 0 ? [{ slot: 1, share: 0, windowShare: 0, startUs: windowUs, lengthUs: stopUs }] : []),
        ],
      };
    }
    const slot0 = schedule.windows[0]?.slot ?? 0;
    for (const engine of engines) startClient(engine, config.requestTokens, wallUs);
    let stopPacer: (() => void) | null = null;
    if (stopUs > 0 && mode === 'naive') {
      stopPacer = naivePacer(serverPids(engines), schedule, wallUs);
    }
    // Measured after the warm-up (LLAMA_WARM_S), in the case's own windows.
    const fromUs = Math.ceil((wallUs() + 1e6 + options.warmS * 1e6) / schedule.periodUs) * schedule.periodUs;
    const windows = Math.max(1, Math.round((RESUME_RUNNING_S[device] * 1e6) / windowUs));
    const toUs = fromUs + windows * schedule.periodUs;
    await sleep((fromUs - wallUs()) / 1000);
    const cpuFrom = pin ? treeCpuUs(e0.serverPid() ?? -1) : 0;
    await sleep((toUs - wallUs()) / 1000);
    const cpuTo = pin ? treeCpuUs(e0.serverPid() ?? -1) : 0;
    await sleep(250);
    stopPacer?.();
    for (const engine of engines) stopClient(engine, wallUs);
    const x = counterAt(e0.counter, fromUs);
    const y = counterAt(e0.counter, toUs);
    if (x === null || y === null) throw new Error(`engine on port ${e0.port}: its token count does not span the interval`);
    const tokens = Math.round(y - x);
    const runningS = stopUs > 0 ? (windows * windowUs) / 1e6 : (toUs - fromUs) / 1e6;
    const byPosition = stopUs > 0 ? costByWindowPosition(e0.tokens, schedule, slot0, fromUs, toUs) : null;
    const stepEnds = stopUs > 0 && stepLogDir !== null ? await stepEndsOf(join(stepLogDir, `steps.${e0.serverPid() ?? -1}`)) : null;
    return {
      mode,
      stop_ms: c.stopMs,
      busy: c.busy,
      window_ms: RESUME_WINDOW_MS,
      interval_s: round((toUs - fromUs) / 1e6, 1),
      tokens,
      windows: stopUs > 0 ? windows : null,
      tokens_per_window: stopUs > 0 ? round(tokens / windows, 2) : null,
      tokps_running: round(tokens / runningS, 1),
      cpu_ms_per_token: pin ? round((cpuTo - cpuFrom) / 1000 / Math.max(1, tokens), 2) : null,
      window_ms_per_token: byPosition,
      start_ms_per_window: byPosition?.start ?? null,
      start_ms_per_window_to_next: byPosition?.startToNext ?? null,
      engine_start_ms_per_window: stepEnds === null ? null : costByWindowPosition(stepEnds, schedule, slot0, fromUs, toUs).start,
    };
  } finally {
    held?.leave();
    await endEngines(engines);
    if (stepLogDir !== null) rmSync(stepLogDir, { recursive: true, force: true });
    try {
      if (mode === 'coop') helper.unlink(gpuKey);
    } catch {
      // never created
    }
  }
}

/** Every case in every mode, then each stopped case's cost per window against the unstopped one
 *  of its mode. */
export async function runResumeCost(options: LlamaBenchOptions, modes: readonly ResumeMode[]): Promise<ResumeCostResult[]> {
  const model = llamaBenchModel(options.device);
  const out: ResumeCostResult[] = [];
  for (const mode of modes) {
    const measured: ResumeCostMeasured[] = [];
    for (const c of RESUME_COST_CASES) {
      const result = await resumeCostOnce(options, model, c, mode);
      options.log(`  ${mode.padEnd(5)} stopped ${String(c.stopMs).padStart(3)} ms${c.busy ? ' (device busy)' : ' (device idle)'}: ${result.tokps_running} tok/s while running, ${result.tokens_per_window ?? '—'} tokens per ${RESUME_WINDOW_MS} ms window, ${result.cpu_ms_per_token ?? '—'} CPU ms per token`);
      measured.push(result);
    }
    const unstopped = measured.find((r) => r.stop_ms === 0);
    for (const r of measured) {
      const cost = unstopped === undefined || r.windows === null ? null : windowStartCost({ windowMs: r.window_ms, windows: r.windows, tokens: r.tokens, cpuMs: r.cpu_ms_per_token === null ? null : r.cpu_ms_per_token * r.tokens }, { msPerToken: 1000 / unstopped.tokps_running, cpuMsPerToken: unstopped.cpu_ms_per_token });
      out.push({ ...r, lost_ms_per_window: cost?.lostMsPerWindow ?? null, extra_cpu_ms_per_window: cost?.extraCpuMsPerWindow ?? null });
    }
  }
  return out;
}

export function resumeCostTable(results: readonly ResumeCostResult[]): string {
  const header = ['stopped by', 'stopped ms', 'device meanwhile', 'interval s', 'tok/s running', 'tokens / window', 'ms/tok in window 1st/2nd/rest', 'CPU ms/tok', 'lost ms / window', 'extra CPU ms / window', 'start ms / window', "start ms / window, engine's steps", 'start ms / window, tokens to its next start'];
  const rows = results.map((r) => [
    r.mode === 'coop' ? 'coop gate' : 'SIGSTOP',
    String(r.stop_ms),
    r.stop_ms === 0 ? '— (never stopped)' : r.busy ? 'busy (2nd engine)' : 'idle',
    String(r.interval_s),
    String(r.tokps_running),
    r.tokens_per_window === null ? '—' : String(r.tokens_per_window),
    r.window_ms_per_token === null ? '—' : `${r.window_ms_per_token.first ?? '—'}/${r.window_ms_per_token.second ?? '—'}/${r.window_ms_per_token.rest ?? '—'}`,
    r.cpu_ms_per_token === null ? '—' : String(r.cpu_ms_per_token),
    r.lost_ms_per_window === null ? '—' : String(r.lost_ms_per_window),
    r.extra_cpu_ms_per_window === null ? '—' : String(r.extra_cpu_ms_per_window),
    r.start_ms_per_window === null ? '—' : String(r.start_ms_per_window),
    r.engine_start_ms_per_window === null ? '—' : String(r.engine_start_ms_per_window),
    r.start_ms_per_window_to_next === null ? '—' : String(r.start_ms_per_window_to_next),
  ]);
  return textTable(header, rows);
}

export async function runLlamaBench(options: LlamaBenchOptions): Promise<LlamaResult[]> {
  const model = llamaBenchModel(options.device);
  const results: LlamaResult[] = [];
  for (const scenario of options.scenarios) {
    const byMode = new Map<LlamaMode, LlamaResult[]>();
    for (let run = 0; run < options.repeat; run++) {
      for (const mode of options.modes) {
        let result: LlamaResult;
        try {
          result = await runOnce(options, scenario, mode, model);
        } catch (error) {
          options.log(`  ${scenario.name} ${mode}: failed: ${error instanceof Error ? error.message : String(error)}`);
          continue;
        }
        byMode.set(mode, [...(byMode.get(mode) ?? []), result]);
        options.log(`  ${scenario.name.padEnd(6)} ${mode.padEnd(5)}${options.repeat > 1 ? ` run ${run + 1}/${options.repeat}` : ''} tok/s ${result.tokps.join(' / ')}  tokens ${result.ratio ?? '—'} (whole requests ${result.ratio_whole_requests ?? '—'}, ${result.whole_requests.join('/')})${result.cpu_ratio !== null ? `  time ${result.cpu_ratio}` : ''}${result.equal_pair_ratio !== null ? `  pair ${result.equal_pair_ratio}` : ''}  agg ${result.aggregate_pct_of_solo}% of ${result.solo_tokps} (${result.solo_before_after_tokps.join(' → ')})  max gap ${result.itl_max_ms.join('/')} ms (bound ${result.bound_ms.join('/')})  release ${result.release_s ?? '—'} s (90 %: ${result.release_90_s ?? '—'} s)  wake ${result.wake_ms.map((w) => w ?? '—').join('/')} ms${result.gpu_util_pct ? `  GPU ${result.gpu_util_pct.solo_before}/${result.gpu_util_pct.shared}/${result.gpu_util_pct.solo_after} %` : ''}`);
      }
    }
    for (const runs of byMode.values()) results.push(medianOfRuns(runs));
    options.onScenario?.(results);
  }
  return results;
}

/** Whether node-llama-cpp's CUDA build is installed (the built-in engine's coop mode on a GPU). */
export function builtinCudaInstalled(): boolean {
  return existsSync(join(ROOT, 'node_modules', '@node-llama-cpp', 'linux-x64-cuda'));
}

/** The GPU's name and driver, for the report (null where nvidia-smi does not answer). */
export function gpuDescription(): string | null {
  const result = spawnSync('nvidia-smi', ['--query-gpu=name,driver_version,memory.total', '--format=csv,noheader'], { encoding: 'utf8' });
  return result.status === 0 ? (result.stdout.split('\n')[0] ?? '').trim() : null;
}

/** The report's name: gpu, llama-server (CPU), gpu-builtin, builtin-cpu. */
export function benchName(device: LlamaDevice, engine: LlamaEngineKind): string {
  if (engine === 'builtin') return device === 'gpu' ? 'gpu-builtin' : 'builtin-cpu';
  return device === 'gpu' ? 'gpu' : 'llama-server';
}

export interface LlamaMainArgs {
  device: LlamaDevice;
  /** --engine: llama-server (default) or builtin. */
  engine?: string | undefined;
  modes: string | undefined;
  scenarios: string | undefined;
  measureS: number | undefined;
  /** --warm-s: seconds of warm-up before each run is measured (LLAMA_WARM_S unless told). */
  warmS?: number | undefined;
  repeat: number;
  json: boolean;
  /** CPU: "ENGINE,HARNESS" cores (default 0,1). */
  cores?: string | undefined;
  /** The resume-cost probe instead of the scenarios. */
  resumeCost?: boolean | undefined;
  /** --trace FILE: every run's per-window trace and its analysis (pacing-trace.ts) as JSON. */
  trace?: string | undefined;
  /** --stop-method sigstop|cuda-lock: how `gate` stops an engine. */
  stopMethod?: string | undefined;
}

/** `bench:pacing --llama-server` and `--gpu`: the exit code (2, with one line, when the machine
 *  lacks what the device needs). */
export async function llamaBenchMain(args: LlamaMainArgs): Promise<number> {
  const flag = args.device === 'gpu' ? '--gpu' : '--llama-server';
  const fail = (line: string): number => {
    console.error(`bench:pacing ${flag}: ${line}`);
    return 2;
  };
  if (process.platform !== 'linux') return fail('needs Linux (procfs, signals)');
  if (args.device === 'gpu' && !nvidiaSmiListsGpu()) return fail('no NVIDIA GPU here (`nvidia-smi -L` lists none)');
  if (args.device === 'cpu' && spawnSync('sh', ['-c', 'command -v taskset']).status !== 0) return fail('needs taskset (util-linux) to pin every engine to one core');
  const engine = (args.engine ?? 'llama-server') as LlamaEngineKind;
  if (!LLAMA_ENGINES.includes(engine)) return fail(`--engine: unknown engine ${args.engine} (engines: ${LLAMA_ENGINES.join(', ')})`);
  let server = '';
  if (engine === 'llama-server') {
    const found = await findLlamaServer({ cuda: args.device === 'gpu' });
    if (found === null) return fail(`no ${args.device === 'gpu' ? 'CUDA ' : ''}llama-server: ${args.device === 'gpu' ? 'npm run llama-server:build -- --cuda' : LLAMA_SERVER_HINT}`);
    server = found;
  } else if (!existsSync(BUILTIN_HOST)) return fail(`the built-in engine is not built (${BUILTIN_HOST}): npm run build`);
  else if (args.device === 'gpu' && !builtinCudaInstalled()) return fail('the built-in engine needs node-llama-cpp\'s CUDA build (@node-llama-cpp/linux-x64-cuda), which is not installed here');
  const allowed: readonly string[] = args.resumeCost === true ? RESUME_MODES[engine] : LLAMA_MODES[engine];
  const modes = args.modes?.split(',') ?? [...(args.resumeCost === true ? RESUME_MODES[engine] : defaultLlamaModes(args.device, engine))];
  const unknownMode = modes.find((m) => !allowed.includes(m));
  if (unknownMode !== undefined) return fail(`--modes: mode ${unknownMode} is not one the ${engine} engine runs${args.resumeCost === true ? ' in --resume-cost' : ''} (${allowed.join(', ')})`);
  if (args.stopMethod !== undefined && !(STOP_METHODS as readonly string[]).includes(args.stopMethod)) return fail(`--stop-method: ${STOP_METHODS.join(' or ')} (got ${args.stopMethod})`);
  if (args.trace !== undefined && args.resumeCost === true) return fail('--trace: goes with the scenarios, not --resume-cost');
  if (args.trace !== undefined && (args.trace === '' || !existsSync(dirname(resolvePath(args.trace))))) return fail(`--trace: ${JSON.stringify(args.trace)} is not a file in an existing folder`);
  const names = args.scenarios?.split(',') ?? LLAMA_SCENARIOS.map((s) => s.name);
  const unknownScenario = names.find((n) => !LLAMA_SCENARIOS.some((s) => s.name === n));
  if (unknownScenario !== undefined) return fail(`--scenarios: unknown scenario ${unknownScenario} (with real llama-servers: ${LLAMA_SCENARIOS.map((s) => s.name).join(', ')})`);
  const log = (line: string): void => {
    if (args.json) process.stderr.write(`${line}\n`);
    else console.log(line);
  };
  const coreList = (args.cores ?? '0,1').split(',').map(Number);
  const [engineCore = -1, harnessCore = -1] = coreList;
  if (coreList.length !== 2 || !coreList.every((c) => Number.isInteger(c) && c >= 0) || engineCore === harnessCore) return fail(`--cores: two different core numbers, the engines' and the harness's, e.g. 0,1 (got ${args.cores})`);
  if (args.device === 'cpu') spawnSync('taskset', ['-a', '-p', '-c', String(harnessCore), String(process.pid)], { stdio: 'ignore' });
  const model = LLAMA_MODELS[args.device];
  const gpu = args.device === 'gpu' ? gpuDescription() : null;
  log(`pacing benchmark on ${engine === 'llama-server' ? `llama-server (${server})` : 'the built-in engine (node-llama-cpp)'}, ${args.device === 'gpu' ? `GPU: ${gpu}, all layers offloaded` : `all engines on core ${engineCore}, the rest on core ${harnessCore}`}; model E${model.spec.embedding}/L${model.spec.layers}/FF${model.spec.feedForward} ${model.spec.type}${model.sparse ? ' (sparse: zero weights)' : ''}, ${model.requestTokens}-token requests`);
  const started = Date.now();
  const outDir = join(ROOT, 'bench-results');
  const options = { ...(args.stopMethod === 'cuda-lock' ? { stopMethod: 'cuda-lock' as const } : {}), device: args.device, engine, server, modes: modes as LlamaMode[], scenarios: LLAMA_SCENARIOS.filter((s) => names.includes(s.name)), measureS: args.measureS ?? LLAMA_MEASURE_S[args.device], warmS: args.warmS ?? LLAMA_WARM_S[args.device], repeat: args.repeat, cores: { engine: engineCore, harness: harnessCore }, log };
  if (args.resumeCost === true) {
    const results = await runResumeCost(options, modes as ResumeMode[]);
    const name = `resume-cost-${benchName(args.device, engine)}`;
    const file = `${name}.json`;
    const report = { benchmark: name, date: new Date().toISOString(), engine, server, gpu, model: { ...model.spec, sparse: model.sparse, ctx: model.ctx, request_tokens: model.requestTokens }, warm_s: options.warmS, duration_s: round((Date.now() - started) / 1000, 1), cases: results };
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, file), `${JSON.stringify(report, null, 2)}\n`);
    if (args.json) process.stdout.write(`${JSON.stringify(report)}\n`);
    else {
      console.log('');
      console.log(resumeCostTable(results));
      console.log(`\none engine decoding in ${RESUME_WINDOW_MS} ms windows, stopped between them (SIGSTOP from this harness, or coop: its own cooperative gate waiting out another registry peer's window); lost ms / window = the window's length less what its tokens take unstopped; extra CPU = CPU per window beyond its tokens' unstopped cost; start ms / window = per window, its length less its tokens at its own later cadence (second token to last), the median over windows (what starting it costs, whatever the machine's speed did since the unstopped run or in the next window); engine's steps = the same over the built-in engine's own step log, each token where it was decoded rather than where the client read it; tokens to its next start = the same counting every token the client reads before the window comes round again: a token decoded before the end that reaches the client after it, one whose step ran past the end (coop lets a last step go when half of it fits; SIGSTOP lands a little after the end), all of them the window's work. Counted in the window only, they charge its start with what its end did (0.5–1.3 ms per window on this VM, either way of stopping).\nA fixed cost c per window makes a 2:1 split of time read (80 − c)/(40 − c) in tokens: c = 1 ms → 2.03, c = 5 ms → 2.14, c = 10 ms → 2.33.\n${report.duration_s} s; wrote bench-results/${file}`);
    }
    return 0;
  }
  const name = `pacing-${benchName(args.device, engine)}`;
  const file = `${name}.json`;
  const reportOf = (results: readonly LlamaResult[], complete: boolean) => ({ benchmark: name, date: new Date().toISOString(), engine, server, gpu, stop_method: args.stopMethod ?? 'sigstop', model: { ...model.spec, sparse: model.sparse, ctx: model.ctx, request_tokens: model.requestTokens }, measure_s: options.measureS, warm_s: options.warmS, repeat: args.repeat, duration_s: round((Date.now() - started) / 1000, 1), complete, scenarios: results });
  const write = (results: readonly LlamaResult[], complete: boolean): void => {
    mkdirSync(outDir, { recursive: true });
    writeFileSync(join(outDir, file), `${JSON.stringify(reportOf(results, complete), null, 2)}\n`);
  };
  const traces: PacingTrace[] = [];
  const findings: TraceFindings[] = [];
  const traceFile = args.trace;
  const onTrace =
    traceFile === undefined
      ? undefined
      : (taken: Omit<PacingTrace, 'run'>): void => {
          const trace: PacingTrace = { ...taken, run: traces.filter((t) => t.scenario === taken.scenario && t.mode === taken.mode).length + 1 };
          const found = analyseTrace(trace);
          traces.push(trace);
          findings.push(found);
          log(`  trace ${trace.scenario} ${trace.mode} run ${trace.run} (${found.intervalS} s):`);
          for (const line of found.lines) log(`    ${line}`);
          writeFileSync(traceFile, `${JSON.stringify({ benchmark: name, date: new Date().toISOString(), gpu, findings, traces })}\n`);
        };
  const results = await runLlamaBench({ ...options, onScenario: (so) => write(so, false), ...(onTrace === undefined ? {} : { onTrace }) });
  const seconds = round((Date.now() - started) / 1000, 1);
  write(results, true);
  const report = reportOf(results, true);
  if (args.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else {
    console.log('');
    console.log(llamaTable(results));
    console.log(`\ntoken split = engine 0's tok/s over engine 1's (the servers' own counts) over the measured interval; whole req = the same over the whole requests each engine started inside it (n: request cycles per engine); time split = the same for CPU time of each engine's process tree (CPU only); 2:1:1 pair = engine 2 over engine 1;\nsolo = engine 0 alone before the others start and after they stop; bound = (1 − share)·period; release = from the others' stop until engine 0 was last held for their windows (gate and coop); release 90% = from the others' last token until engine 0 decodes at ≥ 90 % of its solo rate (target ≤ ${HANDOVER_TARGETS.knownIdleReleaseS} s paced: both engines know their idleness); wake = from the first request at each idle other engine to its first token while engine 0 is busy (target ≤ one period, in brackets, + its prefill);\nms/tok in window = per engine, wall ms per token by its place in its own windows (1st: from the window's start), paced modes only`);
    if (args.repeat > 1) console.log(`every figure is the median of ${args.repeat} runs (each run's in the JSON, under "runs")`);
    console.log(`${seconds} s; wrote bench-results/${file}`);
  }
  return results.length > 0 ? 0 : 1;
}
