/**
 * `gpu-share run -- <command>`: start any command as a paced peer through the process gate. We
 * hold its slot (pid = the command, owner_pid = us), suspend and resume it at window edges,
 * forward SIGINT/SIGTERM/SIGHUP to it, and exit with its exit code. The watchdog resumes it if we
 * are killed outright.
 */
import { spawn } from 'node:child_process';
import { basename } from 'node:path';
import { constants as osConstants } from 'node:os';
import { RegistryError, type RegistryHelper } from '../../../native/helper.js';
import type { ProcessControl } from '../../../native/process-control.js';
import { monotonicUs, systemClock } from '../clock.js';
import { segmentName } from '../registry/abi.js';
import { RegistryMember, startHeartbeat } from '../registry/member.js';
import { RegistryObserver } from '../registry/observer.js';
import { RegistrySegment } from '../registry/segment.js';
import { bootLogLine } from '../registry/view.js';
import { ProcessGate, cpuActivity } from '../pacer/process-gate.js';
import { metricsActivity } from '../pacer/metrics-activity.js';
import { PREPARE_US, sleepUs } from '../pacer/gate.js';
import { startWatchdog } from '../pacer/watchdog.js';
import type { CommandIo } from './io.js';
import { onParentGone } from '../parent-watch.js';
import { readControlLines } from '../engines/control-protocol.js';
import { formatPacerLine, OVERSHOOT_REPORT_INTERVAL_MS } from '../pacer/overshoot.js';

export interface RunOptions {
  gpuKey: string;
  weight: number;
  name: string | undefined;
  command: string;
  args: string[];
  /** Stop the command (SIGTERM, then SIGKILL after 3 s) when whoever started us dies: for a
   *  supervisor's children, so that none outlives it. */
  exitWithParent: boolean;
  /** A llama.cpp-style /metrics URL to judge activity by (CPU time when it does not answer). */
  activityUrl: string | undefined;
}

/** With --exit-with-parent: how long the command has to stop after SIGTERM before SIGKILL. */
const PARENT_GONE_GRACE_MS = 3_000;

const FORWARDED: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
/** How long a command runs unpaced after a forwarded signal, to act on it. */
const SIGNAL_GRACE_MS = 2_000;

/** The shell's convention: 128 + signal number for a child killed by a signal. */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const number = signal === null ? undefined : osConstants.signals[signal];
  return number === undefined ? 1 : 128 + number;
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
  // Under a supervisor our stdin is its lifeline pipe (see onParentGone): the command does not get it.
  const child = spawn(options.command, options.args, { stdio: [options.exitWithParent ? 'ignore' : 'inherit', 'inherit', 'inherit'] });
  const spawned = await new Promise<Error | null>((resolve) => {
    child.once('spawn', () => resolve(null));
    child.once('error', (error) => resolve(error));
  });
  if (spawned !== null || child.pid === undefined) {
    segment?.close();
    io.err(`gpu-share: cannot start ${JSON.stringify(options.command)}: ${spawned?.message ?? 'no pid'}`);
    return 127;
  }
  const pid = child.pid;
  const exited = new Promise<number>((resolve) => child.once('exit', (code, signal) => resolve(exitCodeOf(code, signal))));

  let gate: ProcessGate | null = null;
  let member: RegistryMember | null = null;
  let repace: NodeJS.Timeout | null = null;
  const forward = (signal: NodeJS.Signals): void => {
    // A stopped process cannot act on a signal: let it run, pass the signal on, and give it time
    // to act before pacing it again (it may ignore the signal, or treat SIGHUP as "reload").
    gate?.remove(pid);
    child.kill(signal);
    if (repace !== null) clearTimeout(repace);
    repace = setTimeout(() => {
      if (gate !== null && member !== null) gate.add(pid, member);
    }, SIGNAL_GRACE_MS);
  };
  // Installed before anything is announced: a signal from now on reaches the command.
  for (const signal of FORWARDED) process.on(signal, forward);
  const stopWatchingParent = options.exitWithParent
    ? onParentGone(() => {
        forward('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), PARENT_GONE_GRACE_MS).unref();
      })
    : () => undefined;
  const cleanupSignals = (): void => {
    stopWatchingParent();
    if (repace !== null) clearTimeout(repace);
    for (const signal of FORWARDED) process.off(signal, forward);
  };

  if (segment === null) {
    io.err(`gpu-share: ${unpacedBecause}; running ${options.command} unpaced`);
    const code = await exited;
    cleanupSignals();
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
    registry.close();
    return code;
  }
  const observer = new RegistryObserver(clock, false);
  io.err(bootLogLine(options.gpuKey, slot, options.weight, observer.peers(registry).length));

  const metrics = options.activityUrl === undefined ? null : metricsActivity(options.activityUrl, cpuActivity(control));
  const activity = metrics ?? cpuActivity(control);
  const watchdog = startWatchdog();
  const watcher = new RegistryObserver(clock, true);
  const pacer = new ProcessGate({
    clock,
    control,
    activity,
    peers: () => watcher.peers(registry),
    watchdog,
  });
  pacer.add(pid, paced);
  gate = pacer;
  // Under a supervisor: overshoot figures for its metrics, in batches on stderr.
  const reporting = options.exitWithParent
    ? setInterval(() => {
        const overshoots = pacer.overshoot.take();
        if (overshoots.length > 0) io.err(formatPacerLine(overshoots));
      }, OVERSHOOT_REPORT_INTERVAL_MS)
    : null;
  reporting?.unref();
  // Under a supervisor, its commands (a new weight) arrive on our stdin, the lifeline pipe.
  if (options.exitWithParent) void readControlLines(process.stdin, (command) => void paced.set({ weight: command.weight }));
  // Whatever happens to us from here on, the command is not left stopped.
  const resumeOnExit = (): void => pacer.stopAll();
  process.on('exit', resumeOnExit);

  // The pacing loop: decide, apply, sleep precisely until the next edge. It ends when the
  // command exits (or pacing fails, and the command then runs unpaced).
  let pacing = true;
  const loop = async (): Promise<void> => {
    await sleepUs(1_000); // let the watchdog hear about the command before the first suspend
    while (pacing) {
      try {
        const nextUs = pacer.step();
        // Two naps, as in the cooperative gate: the bookkeeping just before the edge, so that
        // the edge itself only decides and signals.
        const edgeMonoUs = monotonicUs() + nextUs;
        if (nextUs > PREPARE_US) {
          await sleepUs(nextUs - PREPARE_US);
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
    else if (result instanceof Error) io.err(`gpu-share: heartbeat failed: ${result.message}`);
  });


  const code = await exited;
  cleanupSignals();
  if (reporting !== null) clearInterval(reporting);
  pacing = false;
  await looping;
  metrics?.stop();
  heartbeat.stop();
  pacer.remove(pid);
  paced.leave();
  watchdog.close();
  registry.close();
  process.off('exit', resumeOnExit);
  return code;
}
