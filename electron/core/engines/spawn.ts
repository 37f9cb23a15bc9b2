/**
 * The supervisor's one way to start a process: in its own process group (so that a SIGKILL
 * escalation reaches an engine under a wrapper too; `gpu-share run` puts the command it paces in a
 * group of its own, which its watchdog ends when `run` is killed), with a stdin pipe that is its lifeline (the
 * engine host and `gpu-share run --exit-with-parent` stop when it closes), and its output read line
 * by line.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { SpawnRequest, SpawnedProcess } from './supervisor.js';

/** Signal a process (or, with a negative pid, a process group); false when it is gone. */
export function signalPid(target: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(target, signal);
    return true;
  } catch {
    return false;
  }
}

export function spawnEngineProcess(request: SpawnRequest): SpawnedProcess {
  const child = spawn(request.command, request.args, {
    env: { ...process.env, ...request.env },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: process.platform !== 'win32',
    windowsHide: true,
  });
  if (child.pid === undefined) throw new Error(`could not start ${request.command}`);
  const pid = child.pid;
  const lineListeners: ((stream: 'stdout' | 'stderr', line: string) => void)[] = [];
  const exitListeners: ((code: number | null, signal: string | null) => void)[] = [];
  for (const stream of ['stdout', 'stderr'] as const) {
    const source = child[stream];
    if (source === null) continue;
    createInterface({ input: source, crlfDelay: Infinity }).on('line', (line) => {
      for (const listener of lineListeners) listener(stream, line);
    });
  }
  child.stdin?.on('error', () => undefined); // the child closed its end: nothing to tell it
  // 'close' (not 'exit'): all its output has been read by then.
  child.on('close', (code, signal) => {
    for (const listener of exitListeners) listener(code, signal);
  });
  return {
    pid,
    onLine: (listener) => void lineListeners.push(listener),
    onExit: (listener) => void exitListeners.push(listener),
    signal: (signal) => signalPid(pid, signal),
    signalGroup: (signal) => (process.platform === 'win32' ? signalPid(pid, signal) : signalPid(-pid, signal)),
    send: (line) => {
      const stdin = child.stdin;
      if (stdin === null || stdin.destroyed || !stdin.writable) return false;
      stdin.write(`${line}\n`);
      return true;
    },
  };
}
