/**
 * Time comes in through a Clock so that tests can step it. Wall time is CLOCK_REALTIME read
 * through the native helper (the clock every peer shares); monotonic time is this process's own
 * and only ever compared with itself.
 */
export interface Clock {
  /** Wall-clock µs since the Unix epoch (CLOCK_REALTIME). */
  wallUs(): number;
  /** Monotonic µs, for ages and intervals inside this process. */
  monoUs(): number;
}

export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

export function systemClock(wallUs: () => number): Clock {
  return { wallUs, monoUs: monotonicUs };
}

/** A clock that tests step by hand. */
export class FakeClock implements Clock {
  constructor(
    private wall = 1_800_000_000_000_000,
    private mono = 1_000_000,
  ) {}
  wallUs(): number {
    return this.wall;
  }
  monoUs(): number {
    return this.mono;
  }
  /** Both clocks move forward together. */
  advance(us: number): void {
    this.wall += us;
    this.mono += us;
  }
  /** The wall clock jumps (NTP step, user changed the time); the monotonic clock does not. */
  stepWall(us: number): void {
    this.wall += us;
  }
}
