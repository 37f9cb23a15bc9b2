/**
 * Noticing that the process that started us is gone, however it died (SIGKILL included): our
 * stdin pipe from it reaches end-of-file, or our parent pid changes (we were re-parented). Used by
 * the processes a supervisor starts, so that none outlives it.
 */
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
  // Only a pipe says anything: a terminal or /dev/null is not our parent.
  const watchesPipe = !stdin.isTTY;
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
