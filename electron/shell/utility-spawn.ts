/**
 * Engine processes in the app: Node scripts (the built-in engine host, `gpu-share run`) start as
 * Electron utility processes, so the app never needs ELECTRON_RUN_AS_NODE (packaging turns that
 * fuse off); anything else starts as an ordinary process (spawn.ts).
 *
 * What a utility process gives, and what that means for the child:
 * - stdout and stderr can be pipes; stdin cannot (utilityProcess only accepts 'ignore' for it).
 *   The child's stdin is /dev/null (NUL), so its end says nothing about the parent, and the
 *   control lines spawn.ts writes to stdin travel here as `postMessage(line)` instead: the child
 *   reads them from `process.parentPort` ('message', `event.data` a string).
 * - The child's parent is this main process. Chromium ends its utility processes when the main
 *   process goes away (their IPC channel closes), and the engine host also notices that its
 *   parent pid changed; a kill -9 of the app therefore takes the engine host with it. The
 *   command a `gpu-share run` paces is its own child (the leader of its own process group), not a
 *   utility process: `run` ends the command's whole tree when the app goes away, and when `run`
 *   is ended without a chance to do so (the SIGKILL escalation below), its watchdog does.
 * - The pid is known only once the process has spawned (the 'spawn' event): until then `pid`
 *   reads 0, and signals asked for before it are delivered when it has spawned.
 * - Utility processes share the app's process group, so a group signal would reach the app:
 *   `signalGroup` signals the process and then its descendants, one by one.
 */
import { utilityProcess } from 'electron';
import { execFileSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { SpawnRequest, SpawnedProcess } from '../core/engines/supervisor.js';
import { signalPid, spawnEngineProcess } from '../core/engines/spawn.js';
import { descendantsOf, parseProcessTable, utilityForkPlan, type UtilityForkPlan } from './utility-fork.js';

/** How long after 'exit' the last output lines may still arrive before the exit is reported. */
const OUTPUT_DRAIN_MS = 500;

/** The app's spawn: utility processes for `nodePath <script>`, ordinary processes otherwise. */
export function createAppSpawn(nodePath: string): (request: SpawnRequest) => SpawnedProcess {
  return (request) => {
    const plan = utilityForkPlan(request, nodePath, process.env);
    return plan === null ? spawnEngineProcess(request) : forkUtilityProcess(plan);
  };
}

function descendants(pid: number): number[] {
  if (process.platform === 'win32') return [];
  try {
    return descendantsOf(pid, parseProcessTable(execFileSync('ps', ['-A', '-o', 'pid=,ppid='], { encoding: 'utf8', timeout: 2_000 })));
  } catch {
    return [];
  }
}

export function forkUtilityProcess(plan: UtilityForkPlan): SpawnedProcess {
  const child = utilityProcess.fork(plan.modulePath, plan.args, { env: plan.env, stdio: 'pipe', serviceName: plan.serviceName, ...(plan.execArgv.length === 0 ? {} : { execArgv: plan.execArgv }) });
  let pid = 0;
  let exited = false;
  const pendingSignals: { signal: NodeJS.Signals; group: boolean }[] = [];
  const lineListeners: ((stream: 'stdout' | 'stderr', line: string) => void)[] = [];
  const exitListeners: ((code: number | null, signal: string | null) => void)[] = [];
  const openStreams: Promise<void>[] = [];
  for (const stream of ['stdout', 'stderr'] as const) {
    const source = child[stream];
    if (source === null) continue;
    const lines = createInterface({ input: source, crlfDelay: Infinity });
    lines.on('line', (line) => {
      for (const listener of lineListeners) listener(stream, line);
    });
    openStreams.push(new Promise((resolve) => lines.once('close', () => resolve())));
  }

  const deliver = (signal: NodeJS.Signals, group: boolean): boolean => {
    if (exited) return false;
    if (pid === 0) {
      pendingSignals.push({ signal, group });
      return true;
    }
    // Listed before the process goes, while its children are still its children.
    const below = group ? descendants(pid) : [];
    const sent = signal === 'SIGTERM' ? child.kill() : signalPid(pid, signal);
    for (const descendant of below) signalPid(descendant, signal);
    return sent;
  };

  child.once('spawn', () => {
    pid = child.pid ?? 0;
    for (const { signal, group } of pendingSignals.splice(0)) deliver(signal, group);
  });
  child.once('exit', (code) => {
    exited = true;
    // Report the exit once the output has been read, as spawn.ts does with 'close'.
    const drained = Promise.all(openStreams).then(() => undefined);
    const late = new Promise<void>((resolve) => setTimeout(resolve, OUTPUT_DRAIN_MS).unref());
    void Promise.race([drained, late]).then(() => {
      for (const listener of exitListeners) listener(code, null);
    });
  });

  return {
    get pid() {
      return pid;
    },
    onLine: (listener) => void lineListeners.push(listener),
    onExit: (listener) => void exitListeners.push(listener),
    signal: (signal) => deliver(signal, false),
    signalGroup: (signal) => deliver(signal, true),
    send: (line) => {
      if (exited) return false;
      child.postMessage(line);
      return true;
    },
  };
}
