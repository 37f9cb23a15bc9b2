/** Where a command writes; the CLI passes process streams, tests a recorder. */
export interface CommandIo {
  out(text: string): void;
  err(text: string): void;
}

export const processIo: CommandIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
};

export interface StopSignals {
  /** Resolves on the first SIGINT or SIGTERM. */
  readonly stopped: Promise<NodeJS.Signals>;
  /** Remove the listeners (the command is done). */
  release(): void;
}

/**
 * SIGINT and SIGTERM for a command that shuts down gracefully. The listeners stay installed until
 * `release()`: a signal during the shutdown calls `onRepeat` instead of killing us half-way. (Also,
 * some libraries' exit hooks re-raise a signal when they see no other listener — node-llama-cpp's
 * do, once `plan` or `launch` has estimated a model.)
 */
export function stopSignals(onRepeat: () => void = () => undefined): StopSignals {
  let first = true;
  let resolveStopped: (signal: NodeJS.Signals) => void = () => undefined;
  const stopped = new Promise<NodeJS.Signals>((resolve) => (resolveStopped = resolve));
  const onSignal = (signal: NodeJS.Signals): void => {
    if (first) {
      first = false;
      resolveStopped(signal);
    } else {
      onRepeat();
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    stopped,
    release: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/** The first failure of a long-running command's timers: `fail` records it (later ones are
 *  ignored), `failed` resolves when it happens. */
export interface FailureLatch {
  fail(error: unknown): void;
  readonly failed: Promise<void>;
  readonly error: Error | null;
}

export function failureLatch(): FailureLatch {
  let error: Error | null = null;
  let wake: () => void = () => undefined;
  const failed = new Promise<void>((resolve) => (wake = resolve));
  return {
    fail(cause) {
      error ??= cause instanceof Error ? cause : new Error(String(cause));
      wake();
    },
    failed,
    get error() {
      return error;
    },
  };
}
