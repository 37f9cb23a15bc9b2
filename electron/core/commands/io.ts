/** Where a command writes; the CLI passes process streams, tests a recorder. */
export interface CommandIo {
  out(text: string): void;
  err(text: string): void;
}

export const processIo: CommandIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
};

/** Resolves on the first SIGINT or SIGTERM; the handlers are removed afterwards. */
export function untilStopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      resolve(signal);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
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
