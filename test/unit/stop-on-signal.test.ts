/** What a benchmark does on SIGINT, SIGTERM or SIGHUP (test/bench/stop-on-signal.ts), with its
 *  effects recorded. */
import { describe, expect, it } from 'vitest';
import { stopStartedOnSignal, type SignalStopDeps, type StoppingSignal } from '../bench/stop-on-signal.js';

function recorder(descendants: number[], gone: ReadonlySet<number> = new Set()) {
  const handlers = new Map<StoppingSignal, () => void>();
  const calls: string[] = [];
  const deps: SignalStopDeps = {
    descendants: () => descendants,
    kill: (pid, signal) => {
      if (gone.has(pid)) throw Object.assign(new Error('kill ESRCH'), { code: 'ESRCH' });
      calls.push(`kill ${pid} ${signal}`);
    },
    once: (signal, handler) => void handlers.set(signal, handler),
    log: (line) => void calls.push(`log ${line}`),
    exit: (code) => void calls.push(`exit ${code}`),
  };
  return { deps, handlers, calls };
}

describe('stopStartedOnSignal', () => {
  it('listens for SIGINT, SIGTERM and SIGHUP and does nothing before one comes', () => {
    const { deps, handlers, calls } = recorder([11, 12]);
    stopStartedOnSignal('bench:x', deps);
    expect([...handlers.keys()]).toEqual(['SIGINT', 'SIGTERM', 'SIGHUP']);
    expect(calls).toEqual([]);
  });

  it('ends every process below with SIGTERM, then SIGCONT for one held stopped, and exits with the signal status', () => {
    const { deps, handlers, calls } = recorder([11, 12, 13]);
    stopStartedOnSignal('bench:x', deps);
    handlers.get('SIGTERM')?.();
    expect(calls).toEqual(['kill 11 SIGTERM', 'kill 11 SIGCONT', 'kill 12 SIGTERM', 'kill 12 SIGCONT', 'kill 13 SIGTERM', 'kill 13 SIGCONT', 'log bench:x: SIGTERM: stopped 3 processes it had started', 'exit 143']);
  });

  it('counts only the processes still there, and exits as a shell would say for each signal', () => {
    const { deps, handlers, calls } = recorder([21, 22], new Set([21]));
    stopStartedOnSignal('bench:y', deps);
    handlers.get('SIGINT')?.();
    expect(calls).toEqual(['kill 22 SIGTERM', 'kill 22 SIGCONT', 'log bench:y: SIGINT: stopped 1 process it had started', 'exit 130']);
  });

  it('exits with nothing to stop when it started nothing', () => {
    const { deps, handlers, calls } = recorder([]);
    stopStartedOnSignal('bench:z', deps);
    handlers.get('SIGHUP')?.();
    expect(calls).toEqual(['log bench:z: SIGHUP: stopped 0 processes it had started', 'exit 129']);
  });
});
