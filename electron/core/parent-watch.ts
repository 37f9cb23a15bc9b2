import { fstatSync } from 'node:fs';

/**
 * Noticing that the process that started us is gone, however it died (SIGKILL included): our
 * stdin pipe from it reaches end-of-file, or our parent pid changes (we were re-parented). Used by
 * the processes a supervisor starts, so that none outlives it.
 */
/** Is fd 0 a pipe or a socket (a supervisor's lifeline)? */
export function stdinIsPipe(): boolean {
  try {
    const stat = fstatSync(0);
    return stat.isFIFO() || stat.isSocket();
  } catch {
    return false; // no stdin at all
  }
}

export function onParentGone(callback: () => void, pollMs = 500): () => void {
  const parent = process.ppid;
  let fired = false;
  const fire = (): void => {
    if (fired) return;
    fired = true;
    stop();
    callback();
  };
  const timer = setInterval(() => {
    if (process.ppid !== parent) fire();
  }, pollMs);
  timer.unref();
  const stdin = process.stdin;
  const onEnd = (): void => fire();
  // Only a pipe (or socket) says anything: a terminal, /dev/null or an ignored stdin (as Electron's
  // utility processes get) is not our parent, and would read as ended at once.
  const watchesPipe = stdinIsPipe();
  if (watchesPipe) {
    stdin.on('end', onEnd);
    stdin.on('close', onEnd);
    stdin.resume();
    (stdin as unknown as { unref?: () => void }).unref?.();
  }
  function stop(): void {
    clearInterval(timer);
    if (watchesPipe) {
      stdin.off('end', onEnd);
      stdin.off('close', onEnd);
    }
  }
  return stop;
}
