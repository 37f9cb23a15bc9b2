/**
 * A benchmark stopped by a signal stops what it started. Left to Node's default, a benchmark given
 * SIGINT, SIGTERM or SIGHUP dies at once and its children live on: a `serve` and its two engines
 * still decoding, supervisors, llama-servers (some held with SIGSTOP by a gate), which then take
 * the cores from whatever runs next on the machine, the next benchmark included. So each process
 * below the benchmark gets SIGTERM and then SIGCONT (one held by a gate ends too), and each one's
 * own handler does the rest: serve stops its engines, a supervisor resumes and ends its tree.
 * The processes below are found in procfs (Linux, where the benchmarks pin and read procfs
 * anyway); elsewhere none are found and only the signal's own reach (a terminal's Ctrl-C reaches
 * the whole foreground group) stops them.
 */
import { constants } from 'node:os';
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

const defaultDeps: SignalStopDeps = {
  descendants: () => (process.platform === 'linux' ? linuxTreePids(process.pid).filter((pid) => pid !== process.pid) : []),
  kill: (pid, signal) => process.kill(pid, signal),
  once: (signal, handler) => process.once(signal, handler),
  log: (line) => console.error(line),
  exit: (code) => process.exit(code),
};

/** The exit status of a process that ends because of `signal` (128 + its number, as a shell says). */
export function signalExitCode(signal: StoppingSignal): number {
  return 128 + constants.signals[signal];
}

/** From now on, the first of SIGINT, SIGTERM or SIGHUP stops every process below this one and
 *  exits with the signal's status. */
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
      deps.exit(signalExitCode(signal));
    });
  }
}
