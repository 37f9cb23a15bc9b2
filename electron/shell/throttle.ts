/**
 * At most one run per interval, and never a lost request: the first request runs at once, any
 * during the interval fold into one run at its end. The tray rebuilds its menu this way on state
 * events (several a second) without rebuilding it for each.
 */
export interface ThrottleTimers {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: ThrottleTimers = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface Throttled {
  request(): void;
  cancel(): void;
}

export function throttle(run: () => void, intervalMs: number, timers: ThrottleTimers = realTimers): Throttled {
  let lastRunAt = -Infinity;
  let pending: unknown = null;
  const fire = (): void => {
    pending = null;
    lastRunAt = timers.now();
    run();
  };
  return {
    request() {
      if (pending !== null) return;
      const wait = lastRunAt + intervalMs - timers.now();
      if (wait <= 0) fire();
      else pending = timers.setTimeout(fire, wait);
    },
    cancel() {
      if (pending !== null) timers.clearTimeout(pending);
      pending = null;
    },
  };
}
