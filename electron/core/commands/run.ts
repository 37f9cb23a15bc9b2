/**
 * `gpu-share run -- <command>`: start any command as a paced peer through the process gate. The
 * command leads a process group of its own (POSIX; a job object on Windows), and its whole tree is
 * what is paced and measured (native/process-control.ts). We hold its slot (pid = the command,
 * owner_pid = us), suspend and resume the tree at window edges, forward SIGINT/SIGTERM/SIGHUP to
 * the tree (as a terminal does to its foreground group), and exit with the command's exit code.
 * Once we were told to stop (a forwarded SIGINT/SIGTERM, or our parent gone with
 * --exit-with-parent), the tree runs unpaced, its /metrics is no longer polled, and nothing of it
 * outlives the grace: what still runs TREE_GRACE_MS after SIGTERM gets SIGKILL, the command
 * included (a SIGINT gets the grace, then SIGTERM and the grace again). Signals are handled from
 * before the command starts, so that one arriving at any moment is acted on. If we are killed
 * outright, the watchdog ends the tree the same way.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { RegistryError, type RegistryHelper } from '../../../native/helper.js';
import type { ProcessControl } from '../../../native/process-control.js';
import { monotonicUs, systemClock } from '../clock.js';
import { segmentName } from '../registry/abi.js';
import { BrokenRegistryNotice } from '../registry/broken.js';
import { RegistryMember, startHeartbeat } from '../registry/member.js';
import { RegistryObserver } from '../registry/observer.js';
import { RegistrySegment } from '../registry/segment.js';
import { bootLogLine } from '../registry/view.js';
import { ProcessGate, cpuActivity, type ActivitySource } from '../pacer/process-gate.js';
import { metricsActivity } from '../pacer/metrics-activity.js';
import { requestActivity } from '../pacer/request-activity.js';
import { describeActivity, detectLlamaServer, serverKeyOf } from '../pacer/server-activity.js';
import { NAP_SLACK_US, PREPARE_US, sleepUs } from '../pacer/gate.js';
import { startWatchdog, type Watchdog } from '../pacer/watchdog.js';
import type { CommandIo } from './io.js';
import { exitCodeOf } from './exit-code.js';
import { onParentGone } from '../parent-watch.js';
import { readControlLines } from '../engines/control-protocol.js';
import { formatPacerLine, OVERSHOOT_REPORT_INTERVAL_MS } from '../pacer/overshoot.js';
import { traceFromEnv, type TraceRecorder } from '../pacer/trace.js';
import { cudaLockControl, type StopMethod } from '../pacer/stop-method.js';

export interface RunOptions {
  gpuKey: string;
  weight: number;
  name: string | undefined;
  command: string;
  args: string[];
  /** Stop the command (SIGTERM, then SIGKILL after 3 s) when whoever started us dies: for a
   *  supervisor's children, so that none outlives it. */
  exitWithParent: boolean;
  /** A llama.cpp-style /metrics URL to judge activity by (CPU time when it does not answer).
   *  Without it, a llama.cpp server is recognised on the command line (server-activity.ts). */
  activityUrl: string | undefined;
  /** The key the server's /metrics asks for (a server started with an API key); when absent, the
   *  key on the command line (`--api-key`, `--api-key-file`) or in LLAMA_API_KEY, if any. */
  activityApiKey?: string | undefined;
  /** How the command is stopped outside its window (pacer/stop-method.ts); sigstop when absent. */
  stopMethod?: StopMethod | undefined;
}

/** The activity signal for a command: the given URL, a recognised llama.cpp server, or none (CPU
 *  time), with the command line to start (a recognised llama-server gets `--metrics`) and the key
 *  its /metrics asks for (given, or the one it is started with). */
function chooseActivity(options: RunOptions, io: CommandIo): { url: string | undefined; apiKey: string | undefined; detected: boolean; args: string[] } {
  const server = options.activityUrl === undefined ? detectLlamaServer(options.command, options.args, process.env) : null;
  const url = options.activityUrl ?? server?.metricsUrl;
  if (url === undefined) return { url, apiKey: undefined, detected: false, args: options.args };
  const key = serverKeyOf(options.args, process.env);
  let apiKey = options.activityApiKey ?? key.apiKey;
  if (apiKey === undefined && key.apiKeyFile !== undefined) {
    try {
      apiKey = readFileSync(key.apiKeyFile, 'utf8').split(/\r?\n/)[0]?.trim() || undefined;
    } catch (error) {
      io.err(`gpu-share: cannot read --api-key-file ${key.apiKeyFile} (${error instanceof Error ? error.message : String(error)}); its /metrics will refuse us`);
    }
  }
  return { url, apiKey, detected: server !== null, args: [...options.args, ...(server?.addArgs ?? [])] };
}

/** How long the tree has to stop after SIGTERM before SIGKILL, when we end it (our parent gone, or
 *  what is left after the command exited on a stop signal), and when the watchdog does. */
export const TREE_GRACE_MS = 3_000;

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
/** Forwarded signals that mean "stop": after them, nothing of the tree may outlive the command. */
const STOPPING: ReadonlySet<NodeJS.Signals> = new Set(['SIGINT', 'SIGTERM']);
/** How long a command runs unpaced after a forwarded signal, to act on it. */
const SIGNAL_GRACE_MS = 2_000;

/** Whether nothing of the tree runs within `ms` (checked every 50 ms). */
async function goneWithin(control: ProcessControl, rootPid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (!control.alive(rootPid)) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * End a tree: resume it (a stopped process does not act on a signal), send `first` (SIGTERM by
 * default; a SIGINT is followed by SIGTERM when the tree outlives the grace), and SIGKILL to what is
 * left `graceMs` after SIGTERM. Resolves once nothing of it runs (or a second after SIGKILL).
 */
export async function endTree(control: ProcessControl, rootPid: number, graceMs: number, first: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  for (const signal of first === 'SIGTERM' ? (['SIGTERM'] as const) : ([first, 'SIGTERM'] as const)) {
    control.resume(rootPid);
    if (!control.signal(rootPid, signal)) return;
    control.resume(rootPid);
    if (await goneWithin(control, rootPid, graceMs)) return;
  }
  control.signal(rootPid, 'SIGKILL');
  await goneWithin(control, rootPid, 1_000);
}

/** Keeps the watchdog told about the tree's members outside its process group (setsid). */
class TreeReport {
  private reported = new Map<number, number>();

  constructor(
    private readonly watchdog: Watchdog,
    private readonly control: ProcessControl,
    private readonly rootPid: number,
  ) {
    watchdog.watchGroup(rootPid);
  }

  /** Tell the watchdog what changed since the last call (members come from the last walk: no
   *  procfs read here). */
  sync(): void {
    const now = new Map(this.control.outsideGroup(this.rootPid).map((m) => [m.pid, m.startTicks] as const));
    for (const [pid, start] of now) if (this.reported.get(pid) !== start) this.watchdog.watchProcess(pid, start);
    for (const pid of this.reported.keys()) if (!now.has(pid)) this.watchdog.unwatchProcess(pid);
    this.reported = now;
  }

  /** The tree is let go (the command exited and was not told to stop): the watchdog ends nothing. */
  forget(): void {
    for (const pid of this.reported.keys()) this.watchdog.unwatchProcess(pid);
    this.reported.clear();
    this.watchdog.unwatchGroup(this.rootPid);
  }
}

export async function runPaced(options: RunOptions, io: CommandIo, helper: RegistryHelper, control: ProcessControl): Promise<number> {
  const clock = systemClock(() => helper.wallUs());
  // A registry that cannot be opened (refused: another user's, a FIFO, a link; foreign) leaves the
  // command unpaced, as a full one does: it runs either way, with one warning line.
  let segment: RegistrySegment | null = null;
  let unpacedBecause = '';
  try {
    segment = RegistrySegment.openForJoin(helper, options.gpuKey);
  } catch (error) {
    if (!(error instanceof RegistryError)) throw error;
    unpacedBecause = error.message;
  }
  // Started before the command: from its first instant, our death ends its tree.
  const watchdog = startWatchdog(TREE_GRACE_MS);
  // Signals are ours from before the command starts (Node's default would end us and leave the
  // command running, as nothing is announced to the watchdog yet): one that arrives before the
  // command runs is passed on once it does. `forward` is replaced once there is a tree.
  const early: NodeJS.Signals[] = [];
  let onSignal = (signal: NodeJS.Signals): void => void early.push(signal);
  const handler = (signal: NodeJS.Signals): void => onSignal(signal);
  for (const signal of FORWARDED) process.on(signal, handler);
  // Under a supervisor our stdin is its lifeline pipe (see onParentGone): the command does not get
  // it. On POSIX the command leads a new process group (Node's detached start also makes it a
  // session leader: terminal signals reach it through us, below).
  const activityChoice = chooseActivity(options, io);
  const child = spawn(options.command, activityChoice.args, { stdio: [options.exitWithParent ? 'ignore' : 'inherit', 'inherit', 'inherit'], detached: process.platform !== 'win32' });
  const spawned = await new Promise<Error | null>((resolve) => {
    child.once('spawn', () => resolve(null));
    child.once('error', (error) => resolve(error));
  });
  if (spawned !== null || child.pid === undefined) {
    for (const signal of FORWARDED) process.off(signal, handler);
    watchdog.close();
    segment?.close();
    io.err(`gpu-share: cannot start ${JSON.stringify(options.command)}: ${spawned?.message ?? 'no pid'}`);
    return 127;
  }
  const pid = child.pid;
  const tree = new TreeReport(watchdog, control, pid);
  const exited = new Promise<number>((resolve) => child.once('exit', (code, signal) => resolve(exitCodeOf(code, signal))));
  try {
    control.hold(pid);
  } catch (error) {
    io.err(`gpu-share: ${error instanceof Error ? error.message : String(error)}; only the command itself is paced`);
  }

  let gate: ProcessGate | null = null;
  let member: RegistryMember | null = null;
  let metrics: (ActivitySource & { stop(): void }) | null = null;
  let repace: NodeJS.Timeout | null = null;
  /** Told to stop: the tree is ended (endTree) whether or not the command exits of itself. */
  let stopping = false;
  let ending: Promise<void> | null = null;
  /** Stop: unpaced for good (a stopped process cannot act on a signal), no more polling (a
   *  server closing gracefully waits for our keep-alive connection, which a poll every 100 ms
   *  would keep busy for ever), and the tree ended within the grace. */
  const beginStop = (first: NodeJS.Signals): void => {
    stopping = true;
    metrics?.stop();
    gate?.remove(pid);
    if (repace !== null) clearTimeout(repace);
    ending = endTree(control, pid, TREE_GRACE_MS, first);
  };
  const forward = (signal: NodeJS.Signals): void => {
    if (STOPPING.has(signal) && !stopping) return beginStop(signal);
    if (!control.signal(pid, signal)) child.kill(signal);
    if (stopping) return;
    // Not a stop (SIGHUP: it may mean "reload"): let it run to act on it, and pace it again after.
    gate?.remove(pid);
    if (repace !== null) clearTimeout(repace);
    repace = setTimeout(() => {
      if (gate !== null && member !== null && !stopping) gate.add(pid, member);
    }, SIGNAL_GRACE_MS);
  };
  onSignal = forward;
  for (const signal of early.splice(0)) forward(signal);
  const stopWatchingParent = options.exitWithParent
    ? onParentGone(() => {
        if (!stopping) beginStop('SIGTERM');
      })
    : () => undefined;
  const cleanupSignals = (): void => {
    stopWatchingParent();
    if (repace !== null) clearTimeout(repace);
    for (const signal of FORWARDED) process.off(signal, handler);
  };
  /** After the command exited: end the rest of the tree if we were told to stop, or let it go. */
  const settleTree = async (): Promise<void> => {
    if (stopping) await (ending ?? endTree(control, pid, TREE_GRACE_MS));
    tree.forget();
    watchdog.close();
    control.release(pid);
  };

  if (segment === null) {
    io.err(`gpu-share: ${unpacedBecause}; running ${options.command} unpaced`);
    const code = await exited;
    cleanupSignals();
    await settleTree();
    return code;
  }
  const registry = segment;
  const paced = new RegistryMember(registry, clock, {
    pid,
    ownerPid: process.pid,
    bootUs: clock.wallUs(),
    name: options.name ?? basename(options.command).slice(0, 47),
    weight: options.weight,
    active: false,
  });
  member = paced;
  let slot: number;
  try {
    slot = paced.join();
  } catch (error) {
    // No slot: the command runs unpaced rather than not at all; say so.
    io.err(`gpu-share: ${error instanceof Error ? error.message : String(error)}; running ${options.command} unpaced`);
    const code = await exited;
    cleanupSignals();
    await settleTree();
    registry.close();
    return code;
  }
  const observer = new RegistryObserver(clock, false);
  // The gate's trace (bench:pacing --trace): only when asked for, so that the gate's path is
  // unchanged otherwise.
  const traced = traceFromEnv(process.env);
  if (traced !== null && 'problem' in traced) io.err(`gpu-share: ${traced.problem}; running without a trace`);
  const recorder: TraceRecorder | null = traced !== null && 'recorder' in traced ? traced.recorder : null;
  const trace = recorder === null ? undefined : recorder.record.bind(recorder);
  // Not polled once told to stop (see beginStop).
  const cpu = cpuActivity(control);
  metrics = activityChoice.url === undefined || stopping ? null : metricsActivity(activityChoice.url, cpu, { apiKey: activityChoice.apiKey, trace, wallUs: () => clock.wallUs() });
  const activityLine = describeActivity(activityChoice.url, activityChoice.detected, control.cpuTimeUs(pid) !== null);
  io.err(`${bootLogLine(options.gpuKey, slot, options.weight, observer.peers(registry).length)}; activity: ${activityLine}`);

  // Under a supervisor, the gateway's count of our requests comes on the control pipe.
  const requests = options.exitWithParent ? requestActivity(metrics ?? cpu, () => clock.monoUs()) : null;
  const activity = requests ?? metrics ?? cpu;
  const watcher = new RegistryObserver(clock, true);
  // A registry truncated under us is broken: the command runs unpaced (no peers: never
  // suspended) with one line, and is paced again once the segment is valid again.
  const broken = new BrokenRegistryNotice((line, state) =>
    io.err(state === 'broken' ? `gpu-share: ${line}; running ${options.command} unpaced until it is valid again` : `gpu-share: ${line}; pacing ${options.command} again`),
  );
  // --stop-method cuda-lock: the CUDA driver's lock, SIGSTOP where it is not to be had.
  let stopControl: Pick<ProcessControl, 'suspend' | 'resume'> = control;
  if (options.stopMethod === 'cuda-lock') {
    // Loaded only here: koffi and the driver stay out of every other run.
    const { loadCudaCheckpoint } = await import('../../../native/cuda-checkpoint.js');
    const cuda = loadCudaCheckpoint();
    if ('why' in cuda) io.err(`gpu-share: --stop-method cuda-lock: ${cuda.why}; stopping by SIGSTOP`);
    else stopControl = cudaLockControl(control, cuda, (line) => io.err(line));
  }
  const pacer = new ProcessGate({
    clock,
    control: stopControl,
    activity,
    ...(trace === undefined ? {} : { trace }),
    peers: () => broken.read(() => watcher.peers(registry), []),
  });
  if (!stopping) pacer.add(pid, paced);
  gate = pacer;
  // Under a supervisor: overshoot figures for its metrics, in batches on stderr.
  const reporting = options.exitWithParent
    ? setInterval(() => {
        const overshoots = pacer.overshoot.take();
        if (overshoots.length > 0) io.err(formatPacerLine(overshoots));
      }, OVERSHOOT_REPORT_INTERVAL_MS)
    : null;
  reporting?.unref();
  // Under a supervisor, its commands (a new weight, the gateway's count of requests) arrive on our
  // stdin, the lifeline pipe.
  if (options.exitWithParent) {
    void readControlLines(process.stdin, (command) => {
      if (command.cmd === 'weight') paced.set({ weight: command.weight });
      else requests?.setInFlight(command.inFlight);
    });
  }
  // Whatever happens to us from here on, the command is not left stopped.
  const resumeOnExit = (): void => {
    pacer.stopAll();
    recorder?.close();
  };
  process.on('exit', resumeOnExit);

  // The pacing loop: decide, apply, sleep precisely until the next edge. It ends when the
  // command exits (or pacing fails, and the command then runs unpaced).
  let pacing = true;
  const loop = async (): Promise<void> => {
    while (pacing) {
      try {
        const nextUs = pacer.step();
        tree.sync();
        // Two naps, as in the cooperative gate: the bookkeeping just before the edge, so that
        // the edge itself only decides and signals. The first is a timer alone (one wake-up).
        const edgeMonoUs = monotonicUs() + nextUs;
        if (nextUs > PREPARE_US + NAP_SLACK_US) {
          await sleepUs(nextUs - PREPARE_US, false);
          if (!pacing) break;
          pacer.prepare();
        }
        await sleepUs(Math.max(0, edgeMonoUs - monotonicUs()));
      } catch (error) {
        io.err(`gpu-share: pacing error, running unpaced: ${error instanceof Error ? error.message : String(error)}`);
        pacer.stopAll();
        return;
      }
    }
  };
  const looping = loop();

  const heartbeat = startHeartbeat(paced, (result) => {
    if (result === 'rejoined') io.err(`gpu-share: slot was reclaimed; rejoined ${segmentName(options.gpuKey)} slot ${paced.slot}`);
    else if (result instanceof Error && !broken.failed(result)) io.err(`gpu-share: heartbeat failed: ${result.message}`);
  });

  const code = await exited;
  cleanupSignals();
  if (reporting !== null) clearInterval(reporting);
  pacing = false;
  await looping;
  metrics?.stop();
  heartbeat.stop();
  pacer.remove(pid);
  await settleTree();
  paced.leave();
  registry.close();
  process.off('exit', resumeOnExit);
  recorder?.close();
  return code;
}
