/**
 * The built-in engine host: one process per model, serving a GGUF through node-llama-cpp with the
 * HTTP API of llama.cpp's llama-server (the OpenAI-compatible subset the app uses), so that the
 * supervisor and the gateway treat it like any other engine.
 *
 *   node dist/electron/core/engines/builtin/engine-host.js --model FILE --ctx N [--gpu-layers N|auto|max]
 *     [--threads N] [--port 0] [--host 127.0.0.1] [--gpu-key K [--weight W] [--name N]] [--alias NAME]
 *
 * - stdout carries the host protocol only (host-protocol.ts): progress while loading, ready with the
 *   real port, log lines, fatal. Bad flags: one line on stderr naming the flag, exit 2.
 * - With --gpu-key it joins the registry as its own peer (pid = owner = this process), heartbeats,
 *   is active while a request is in flight or queued (idle 150 ms after the last), and passes the
 *   cooperative gate after every decode step.
 * - HTTP (node:http): GET /health, GET /v1/models, GET /metrics (Prometheus, llama-server's names),
 *   POST /v1/chat/completions and /v1/completions, streaming (SSE) or not; and llama-server's own
 *   POST /completion, GET /props and GET /gpu/peers, for tools written for it. One context
 *   sequence; requests are served one at a time, the others wait in FIFO order.
 * - Prompts and generated text are never logged: only counts, lengths and durations.
 * - It exits when its parent goes away (ppid changes, or stdin, when a pipe, ends), and on
 *   SIGTERM/SIGINT: stop accepting, let in-flight requests finish (briefly), leave the registry, exit 0.
 *
 * This file is the process: its flags, the stdout protocol, the registry, loading the model and
 * the lifecycle. The HTTP side is http.ts, the request and response shapes
 * openai-api.ts, the token loop decode.ts and the Prometheus text metrics.ts.
 */
import { accessSync, constants as fsConstants, fstatSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';
import { loadRegistryHelper, RegistryError } from '../../../../native/helper.js';
import { cpuList, keepingThreadCpus, loadThreadCpus } from '../../../../native/thread-affinity.js';
import { monotonicUs, systemClock, type Clock } from '../../clock.js';
import { checkGpuKey, checkName, checkWeight, parseWholeNumber } from '../../registry/validate.js';
import { formatHostEvent, type HostEvent, type HostLogLevel } from '../host-protocol.js';
import { joinAsPacedPeer } from '../../pacer/paced-peer.js';
import type { CooperativeGate } from '../../pacer/gate.js';
import type { GpuPeersView } from '../../registry/view.js';
import { OVERSHOOT_REPORT_INTERVAL_MS } from '../../pacer/overshoot.js';
import { traceFromEnv } from '../../pacer/trace.js';
import { readControlLines } from '../control-protocol.js';
import { stdinIsPipe } from '../../parent-watch.js';
import { allowedHosts, applyRequestTimeouts, SERVER_OPTIONS } from '../../api/http.js';
import type { AfterStep, Engine, StepLog } from './decode.js';
import { Host, sendError } from './http.js';
import { errorText } from '../../error-text.js';
import { ENGINE_SECRET_ENV } from '../engine-secret.js';
import { vulkanPinningWarning } from '../device-pinning.js';
import { bindingKeepsThreads, defaultFlashAttention, defaultThreads, decodesWithCpuTeam } from './defaults.js';
import { chooseStepPath } from './steps.js';
import { isEntryPoint } from '../../entry-point.js';

// ---------------------------------------------------------------------------------------------
// Flags

export interface HostRegistryOptions {
  gpuKey: string;
  weight: number;
  name: string;
}

export interface HostOptions {
  model: string;
  ctx: number;
  /** 0 = CPU only (no GPU backend is even probed). */
  gpuLayers: number | 'auto' | 'max';
  /** null = defaults.ts decides (every physical core with an OpenMP binding, one less with the prebuilt one, 1 with every layer on a GPU). */
  threads: number | null;
  /** `--flash-attn on|off`; null = defaults.ts decides (off while attention runs on the CPU). */
  flashAttention: boolean | null;
  port: number;
  host: string;
  alias: string;
  registry: HostRegistryOptions | null;
}

export type ParsedHostArgs = { ok: true; options: HostOptions } | { ok: false; message: string };

const MIN_CTX = 16;
const MAX_CTX = 1 << 24;


/** Parse the host's flags (node:util parseArgs, strict). Pure: argv in, options or a one-line
 *  message that names the flag out. */
export function parseHostArgs(argv: readonly string[]): ParsedHostArgs {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        model: { type: 'string' },
        ctx: { type: 'string' },
        'gpu-layers': { type: 'string' },
        threads: { type: 'string' },
        'flash-attn': { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'gpu-key': { type: 'string' },
        weight: { type: 'string' },
        name: { type: 'string' },
        alias: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, message: message.split('\n')[0] ?? message };
  }
  const fail = (flag: string, what: string, raw?: string): ParsedHostArgs => ({
    ok: false,
    message: `--${flag} ${what}${raw === undefined ? '' : ` (got ${JSON.stringify(raw)})`}`,
  });

  const model = values['model'];
  if (model === undefined || model.trim() === '') return fail('model', 'is required: the GGUF file to serve');
  const ctxRaw = values['ctx'];
  if (ctxRaw === undefined) return fail('ctx', 'is required: the context size in tokens');
  const ctx = parseWholeNumber(ctxRaw, MIN_CTX, MAX_CTX);
  if (ctx === null) return fail('ctx', `must be a whole number of tokens between ${MIN_CTX} and ${MAX_CTX}`, ctxRaw);

  let gpuLayers: HostOptions['gpuLayers'] = 'auto';
  const gpuLayersRaw = values['gpu-layers'];
  if (gpuLayersRaw !== undefined) {
    if (gpuLayersRaw === 'auto' || gpuLayersRaw === 'max') gpuLayers = gpuLayersRaw;
    else {
      const layers = parseWholeNumber(gpuLayersRaw, 0, 100_000);
      if (layers === null) return fail('gpu-layers', 'must be a whole number ≥ 0, "auto" or "max"', gpuLayersRaw);
      gpuLayers = layers;
    }
  }

  let threads: number | null = null;
  const threadsRaw = values['threads'];
  if (threadsRaw !== undefined) {
    threads = parseWholeNumber(threadsRaw, 1, 1024);
    if (threads === null) return fail('threads', 'must be a whole number between 1 and 1024', threadsRaw);
  }

  const flashRaw = values['flash-attn'];
  let flashAttention: boolean | null = null;
  if (flashRaw !== undefined) {
    if (flashRaw !== 'on' && flashRaw !== 'off' && flashRaw !== 'auto') return fail('flash-attn', 'must be "on", "off" or "auto"', flashRaw);
    flashAttention = flashRaw === 'auto' ? null : flashRaw === 'on';
  }

  const portRaw = values['port'] ?? '0';
  const port = parseWholeNumber(portRaw, 0, 65_535);
  if (port === null) return fail('port', 'must be a whole number between 0 and 65535 (0: any free port)', portRaw);

  const host = values['host'] ?? '127.0.0.1';
  if (host.trim() === '' || /\s/.test(host)) return fail('host', 'must be an address to listen on', host);

  const alias = values['alias'] ?? (basename(model).replace(/\.gguf$/i, '') || 'model');
  if (alias.trim() === '' || alias.length > 256 || /[\u0000-\u001f\u007f]/.test(alias)) return fail('alias', 'must be 1 to 256 printable characters', alias);

  const gpuKeyRaw = values['gpu-key'];
  const weightRaw = values['weight'];
  const nameRaw = values['name'];
  let registry: HostRegistryOptions | null = null;
  if (gpuKeyRaw === undefined) {
    if (weightRaw !== undefined) return fail('weight', 'needs --gpu-key (the registry to join)');
    if (nameRaw !== undefined) return fail('name', 'needs --gpu-key (the registry to join)');
  } else {
    const gpuKey = checkGpuKey(gpuKeyRaw);
    if (!gpuKey.ok) return fail('gpu-key', gpuKey.message, gpuKeyRaw);
    const weight = checkWeight(weightRaw ?? '1');
    if (!weight.ok) return fail('weight', weight.message);
    const name = checkName(nameRaw ?? truncateUtf8(alias, 47));
    if (!name.ok) return fail('name', name.message, nameRaw);
    registry = { gpuKey: gpuKey.value, weight: weight.value, name: name.value };
  }
  return { ok: true, options: { model, ctx, gpuLayers, threads, flashAttention, port, host, alias, registry } };
}

function truncateUtf8(text: string, maxBytes: number): string {
  let out = '';
  for (const char of text) {
    if (Buffer.byteLength(out + char, 'utf8') > maxBytes) break;
    out += char;
  }
  return out.replace(/[\u0000-\u001f\u007f]/g, '_') || 'model';
}

// ---------------------------------------------------------------------------------------------
// The host protocol on stdout

function emit(event: HostEvent): void {
  try {
    process.stdout.write(`${formatHostEvent(event)}\n`);
  } catch {
    // stdout is gone (the supervisor died): nothing to tell.
  }
}

function log(level: HostLogLevel, message: string): void {
  emit({ event: 'log', level, message });
}

// ---------------------------------------------------------------------------------------------
// main

/** Every decode step into the pacer's trace (FILE.PID: serve starts several hosts), when
 *  GPU_SHARE_PACER_TRACE asks for it, at the wall time every peer reads (CLOCK_REALTIME through
 *  the helper) so that steps line up with the registry's windows; null otherwise, or when it
 *  cannot be written (said in the log). */
function openStepLog(log: (level: HostLogLevel, message: string) => void): { record: StepLog; close: () => void } | null {
  const traced = traceFromEnv(process.env, `.${process.pid}`);
  if (traced === null) return null;
  if ('problem' in traced) {
    log('warn', `${traced.problem}; running without a trace`);
    return null;
  }
  const { recorder } = traced;
  let clock: Clock;
  try {
    const helper = loadRegistryHelper();
    clock = systemClock(() => helper.wallUs());
  } catch (error) {
    recorder.close();
    log('warn', `the pacer's trace needs the registry helper's clock: ${errorText(error)}; running without a trace`);
    return null;
  }
  return {
    record: (startMonoUs, stepUs) => recorder.record({ k: 'step', t: clock.wallUs() - (clock.monoUs() - startMonoUs), pid: process.pid, mono: startMonoUs, us: stepUs }),
    close: () => recorder.close(),
  };
}

function flushAndExit(code: number): void {
  const timer = setTimeout(() => process.exit(code), 300);
  try {
    process.stdout.write('', () => {
      clearTimeout(timer);
      process.exit(code);
    });
  } catch {
    process.exit(code);
  }
}

/** How the "model loaded" line names one-call decode steps (steps.ts), which run on the
 *  JavaScript thread (the benchmark reads it there). */
export const ONE_CALL_STEPS_LOGGED = 'direct, one call a token';

async function main(argv: readonly string[]): Promise<void> {
  const parsed = parseHostArgs(argv);
  if (!parsed.ok) {
    process.stderr.write(`engine-host: ${parsed.message}\n`);
    process.exitCode = 2;
    return;
  }
  const options = parsed.options;
  process.stdout.on('error', () => undefined);
  emit({ event: 'progress', pct: 0 });

  let cleanupRegistry: () => void = () => undefined;
  let exiting = false;
  const fatal = (message: string): void => {
    if (exiting) return;
    exiting = true;
    emit({ event: 'fatal', message });
    cleanupRegistry();
    flushAndExit(1);
  };
  process.on('uncaughtException', (error) => fatal(`uncaught: ${errorText(error)}`));
  process.on('unhandledRejection', (error) => fatal(`unhandled rejection: ${errorText(error)}`));

  try {
    accessSync(options.model, fsConstants.R_OK);
  } catch {
    fatal(`model file not found or not readable: ${options.model}`);
    return;
  }

  // The registry: our own peer, heartbeating, active while a request is in flight or queued.
  let afterStep: AfterStep | null = null;
  let slot: number | null = null;
  let setWeight: ((weight: number) => void) | null = null;
  let peersView: (() => GpuPeersView) | null = null;
  let knowRequests: ((pending: () => number) => void) | null = null;
  let pacedGate: CooperativeGate | null = null;
  let unpacedBecause: () => string | null = () => 'started without a GPU registry (no --gpu-key)';
  if (options.registry !== null) {
    const { gpuKey, weight, name } = options.registry;
    try {
      const peer = joinAsPacedPeer(loadRegistryHelper(), { gpuKey, weight, name }, log);
      slot = peer.slot;
      afterStep = (stepUs) => peer.afterStep(stepUs);
      knowRequests = (pending) => peer.knowRequests(pending);
      pacedGate = peer.gate;
      setWeight = (w) => peer.setWeight(w);
      peersView = () => peer.view();
      unpacedBecause = () => peer.unpacedBecause();
      // Overshoot figures for the supervisor's metrics, in batches.
      const reporting = setInterval(() => {
        const overshoots = peer.gate.overshoot.take();
        if (overshoots.length > 0) emit({ event: 'pacer', overshoots_us: overshoots });
      }, OVERSHOOT_REPORT_INTERVAL_MS);
      reporting.unref();
      cleanupRegistry = () => {
        clearInterval(reporting);
        peer.leave();
      };
      log('info', `joined registry ${gpuKey} slot ${slot} as ${JSON.stringify(name)} (weight ${weight})`);
    } catch (error) {
      // A registry we may not use (another user's, a FIFO or a link at its name; full; foreign)
      // leaves the engine unpaced, as `gpu-share run` does: it serves either way, with one warning.
      if (!(error instanceof RegistryError)) {
        fatal(`could not join the registry ${gpuKey}: ${errorText(error)}`);
        return;
      }
      log('warn', `${error.message}; running unpaced`);
      const reason = error.message;
      unpacedBecause = () => reason;
    }
  }

  const stepLog = openStepLog(log);
  const host = new Host({ alias: options.alias, modelPath: options.model }, afterStep, log, peersView, { gpuKey: options.registry?.gpuKey ?? null, unpacedBecause }, stepLog?.record ?? null);
  // Its own queue says when it is idle: its window goes to the others 150 ms after the last request.
  knowRequests?.((): number => host.pendingRequests);
  // The secret comes in the environment (never argv, which any local user can read) and leaves it.
  const secret = process.env[ENGINE_SECRET_ENV];
  delete process.env[ENGINE_SECRET_ENV];
  if (secret !== undefined && secret !== '') host.door.secret = secret;
  // The same request timeouts as serve's port: a client that holds the port open without a token
  // (slow headers, a slow body, an idle socket) is cut off.
  const server: Server = createServer(SERVER_OPTIONS, (req, res) => {
    host.handle(req, res).catch((error: unknown) => {
      log('error', `request failed: ${errorText(error)}`);
      if (!res.headersSent) sendError(res, 500, 'internal_error', errorText(error));
      else res.destroy();
    });
  });
  applyRequestTimeouts(server);

  let stopping: Promise<void> | null = null;
  const stop = (reason: string, graceMs: number): void => {
    if (stopping !== null || exiting) return;
    log('info', `stopping: ${reason}`);
    stopping = (async () => {
      server.close();
      await host.drain(graceMs);
      server.closeAllConnections();
      cleanupRegistry();
      stepLog?.close();
      exiting = true;
      flushAndExit(0);
    })();
  };
  process.on('SIGTERM', () => stop('SIGTERM', 1_500));
  process.on('SIGINT', () => stop('SIGINT', 1_500));

  // Exit with the parent: it may die without a word (kill -9), leaving us reparented.
  const parentPid = process.ppid;
  setInterval(() => {
    if (process.ppid !== parentPid) stop(`parent ${parentPid} went away`, 0);
  }, 500);
  // The supervisor's commands (a new weight from the slider): on the lifeline pipe, or as messages
  // when we run as an Electron utility process.
  if (stdinIsPipe() || 'parentPort' in process) {
    void readControlLines(process.stdin, (command) => {
      // Its own queue tells its activity: the gateway's count of requests is not needed here.
      if (command.cmd !== 'weight') return;
      setWeight?.(command.weight);
      log('info', `weight set to ${command.weight}`);
    });
  }
  try {
    const stdin = fstatSync(0);
    if (stdin.isFIFO() || stdin.isSocket()) {
      process.stdin.on('end', () => stop('stdin closed (parent went away)', 0));
      process.stdin.on('error', () => stop('stdin failed (parent went away)', 0));
      process.stdin.resume();
    }
  } catch {
    // No stdin at all.
  }

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    fatal(`could not listen on ${options.host}:${options.port}: ${errorText(error)}`);
    return;
  }
  const port = (server.address() as AddressInfo).port;
  host.door.allowedHosts = allowedHosts(port);
  log('info', `listening on ${options.host}:${port} (loading the model)${host.door.secret === null ? '' : ', requests need its secret'}`);

  // Load: progress is monotonic 0..99 while loading, 100 once the context exists.
  let lastPct = 0;
  const progress = (fraction: number): void => {
    const pct = Math.min(99, Math.max(0, Math.floor(fraction * 100)));
    if (pct > lastPct) {
      lastPct = pct;
      emit({ event: 'progress', pct });
    }
  };
  const loadStarted = monotonicUs();
  let engine: Engine;
  try {
    const { getLlama, LlamaLogLevel, resolveChatWrapper } = await import('node-llama-cpp');
    // An OpenMP binding binds the thread that loads it (OMP_PROC_BIND, builtinHostEnv): this one
    // gets its CPUs back, so that only the decode threads stay bound.
    const loaded = await keepingThreadCpus(loadThreadCpus(), () => getLlama({
      gpu: options.gpuLayers === 0 ? false : 'auto',
      build: 'never',
      skipDownload: true,
      usePrebuiltBinaries: true,
      progressLogs: false,
      logLevel: LlamaLogLevel.warn,
      logger: (level, message) => {
        const text = message.trim();
        if (text === '') return;
        if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) log('error', `llama.cpp: ${text}`);
        else if (level === LlamaLogLevel.warn) log('warn', `llama.cpp: ${text}`);
      },
    }));
    const llama = loaded.value;
    if (loaded.cpus.kind === 'restored') log('info', `llama.cpp's OpenMP bound the engine's main thread to CPU ${cpuList(loaded.cpus.narrowed)}; it runs on CPUs ${cpuList(loaded.cpus.restored)} again (the decode threads stay bound)`);
    else if (loaded.cpus.kind === 'unknown' && process.env['OMP_PROC_BIND'] !== undefined) log('warn', `OMP_PROC_BIND is set but the engine's main thread's CPUs cannot be checked: ${loaded.cpus.why}`);
    if (host.isStopping) return;
    const vulkanWarning = vulkanPinningWarning(llama.gpu, process.env);
    if (vulkanWarning !== null) log('warn', vulkanWarning);
    progress(0.05);
    const model = await llama.loadModel({
      modelPath: options.model,
      gpuLayers: llama.gpu === false ? 0 : options.gpuLayers,
      onLoadProgress: (fraction) => progress(0.05 + fraction * 0.85),
      loadSignal: host.loadAbort.signal,
    });
    if (host.isStopping) return;
    progress(0.9);
    const layers = { offloadedLayers: model.gpuLayers, totalLayers: model.fileInsights.totalLayers };
    const keepsThreads = bindingKeepsThreads(llama.systemInfo);
    const threads = options.threads ?? defaultThreads({ mathCores: llama.cpuMathCores, keepsThreads, ...layers });
    const flashAttention = options.flashAttention ?? defaultFlashAttention(layers);
    const context = await model.createContext({ contextSize: options.ctx, sequences: 1, threads, ...(flashAttention === undefined ? {} : { flashAttention }) });
    if (host.isStopping) return;
    if (pacedGate !== null) pacedGate.cpuTeam = decodesWithCpuTeam({ threads, ...layers });
    const sequence = context.getSequence();
    const stepPath = chooseStepPath({ llama, model, context, sequence });
    engine = { llama, model, context, sequence, chatWrapper: resolveChatWrapper(model), stepPath };
    log(
      'info',
      `model loaded: ${options.alias} (${model.fileInsights.totalLayers} layers, ctx ${context.contextSize}, ${threads} threads, flash attention ${flashAttention === undefined ? 'auto' : flashAttention ? 'on' : 'off'}, ` +
        `gpu ${llama.gpu === false ? 'none' : llama.gpu}, ${llama.buildType === 'localBuild' ? 'binding built here' : 'prebuilt binding'}${keepsThreads ? ' with OpenMP' : ''}, chat template ${engine.chatWrapper.wrapperName}, decode steps ${stepPath.path === 'direct' && stepPath.internals.oneCallStep ? ONE_CALL_STEPS_LOGGED : stepPath.path}) in ${((monotonicUs() - loadStarted) / 1e6).toFixed(2)} s`,
    );
    if (stepPath.path === 'evaluate') log('info', `decode steps through node-llama-cpp's sequence.evaluate: ${stepPath.why}`);
  } catch (error) {
    if (host.isStopping) return;
    fatal(`could not load the model ${options.model}: ${errorText(error)}`);
    return;
  }
  host.setEngine(engine);
  emit({ event: 'progress', pct: 100 });
  emit({ event: 'ready', port, slot });
}


if (isEntryPoint(import.meta.url)) void main(process.argv.slice(2));
