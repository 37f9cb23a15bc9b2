/**
 * A benchmark stopped by a signal stops what it started. Left to Node's default, a benchmark given
 * SIGINT, SIGTERM or SIGHUP dies at once and its children live on: a `serve` and its two engines
 * still decoding, supervisors, llama-servers (some held with SIGSTOP by a gate), which then take
 * the cores from whatever runs next on the machine, the next benchmark included. So each process
 * below the benchmark gets SIGTERM and then SIGCONT (one held by a gate ends too), and each one's
 * own handler does the rest: serve stops its engines, a supervisor resumes and ends its tree.
 * The processes below are found in procfs (Linux, where the benchmarks pin and read procfs
 * anyway); elsewhere none are found and only the signal's own reach (a terminal's Ctrl-C reaches
 * the whole foreground group) stops them. (`ProcessControl.signal` ends a tree too, but one whose
 * root leads its own process group and is signalled with it: here the root is the benchmark
 * itself, which npm leaves in its group.)
 */
import { exitCodeOf } from '../../electron/core/commands/exit-code.js';
import { linuxTreePids } from '../../native/process-tree-linux.js';

export const STOPPING_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
export type StoppingSignal = (typeof STOPPING_SIGNALS)[number];

export interface SignalStopDeps {
  /** The processes below this one now (itself not included). */
  descendants(): number[];
  kill(pid: number, signal: NodeJS.Signals): void;
  once(signal: StoppingSignal, handler: () => void): void;
  log(line: string): void;
  exit(code: number): void;
}

/** The processes below `pid` now, at any depth (itself not included); none off Linux. */
export function processesBelow(pid: number): number[] {
  return process.platform === 'linux' ? linuxTreePids(pid).filter((member) => member !== pid) : [];
}

const defaultDeps: SignalStopDeps = {
  descendants: () => processesBelow(process.pid),
  kill: (pid, signal) => process.kill(pid, signal),
  once: (signal, handler) => process.once(signal, handler),
  log: (line) => console.error(line),
  exit: (code) => process.exit(code),
};

/** From now on, the first of SIGINT, SIGTERM or SIGHUP stops every process below this one and
 *  exits with the signal's status (128 + its number, as a shell says). */
export function stopStartedOnSignal(what: string, deps: SignalStopDeps = defaultDeps): void {
  for (const signal of STOPPING_SIGNALS) {
    deps.once(signal, () => {
      const pids = deps.descendants();
      let stopped = 0;
      for (const pid of pids) {
        try {
          deps.kill(pid, 'SIGTERM');
          deps.kill(pid, 'SIGCONT');
          stopped += 1;
        } catch {
          // Gone since the walk: nothing to stop.
        }
      }
      deps.log(`${what}: ${signal}: stopped ${stopped} process${stopped === 1 ? '' : 'es'} it had started`);
      deps.exit(exitCodeOf(null, signal));
    });
  }
}

/** A benchmark's entry point, run as a script: it stops what it started on a signal (above), and a
 *  failure of `main` is one line naming the benchmark and exit status 1. */
export function runBenchScript(what: string, main: () => Promise<void>): void {
  stopStartedOnSignal(what);
  void main().catch((error: unknown) => {
    process.stderr.write(`${what}: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
