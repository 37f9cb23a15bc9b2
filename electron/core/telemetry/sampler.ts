/**
 * Samples a provider every SAMPLE_INTERVAL_MS and keeps the latest sample of each device and the
 * last error. A failing provider does not stop the sampling: its devices keep their last figures,
 * with the time they were read, marked `failure` from the failed query on (stale at once: the
 * planner then treats the device as UNKNOWN and nothing is schedulable on it), and the next good
 * sample replaces them. A device that disappears from the provider's answer is marked the same way.
 * Figures are never stamped with a later time than the one they were read at.
 *
 * Time comes in from outside: `tick()` samples once (tests call it with a fake clock), `start()`
 * runs tick() on a timer (injectable).
 */
import { isStale, SAMPLE_INTERVAL_MS, TelemetryError, type DeviceSample, type TelemetryProvider } from './types.js';

/** The staleness limit when the caller gives none: m10-v1's (the planner policy holds it). */
const DEFAULT_STALE_AFTER_US = 2_000_000;
import { foldEngineTrees, type EngineTrees } from './engine-trees.js';
import { trackEngineTrees } from './resident.js';

/** The subset of setInterval/clearInterval the sampler uses. */
export interface SamplerTimer {
  setInterval(callback: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

/** The global timers, unref'd so that sampling alone does not keep the process alive. */
export const systemTimer: SamplerTimer = {
  setInterval(callback, ms) {
    const handle = setInterval(callback, ms);
    handle.unref();
    return handle;
  },
  clearInterval(handle) {
    clearInterval(handle as ReturnType<typeof setInterval>);
  },
};

export interface SamplerOptions {
  provider: TelemetryProvider;
  /** Wall-clock µs: when errors happened (samples carry their own time). */
  wallUs: () => number;
  intervalMs?: number;
  timer?: SamplerTimer;
  /** After each good sample. */
  onSample?: (samples: readonly DeviceSample[]) => void;
  /** After each failed sample. */
  onError?: (error: TelemetryError) => void;
  /** The process trees of the engines we run, read before each sample: every process of a tree is
   *  counted as its engine (engine-trees.ts). */
  engineTrees?: () => EngineTrees;
  /** The planner policy's staleness limit (staleAfterUs), for fresh(). */
  staleAfterUs?: number | (() => number);
}

export interface SamplerError {
  error: TelemetryError;
  atUs: number;
}

export class TelemetrySampler {
  readonly provider: TelemetryProvider;
  readonly intervalMs: number;
  private readonly wallUs: () => number;
  private readonly timer: SamplerTimer;
  private readonly onSample: ((samples: readonly DeviceSample[]) => void) | undefined;
  private readonly onError: ((error: TelemetryError) => void) | undefined;
  private readonly engineTrees: (() => EngineTrees) | undefined;
  private readonly staleAfterUs: () => number;
  private readonly latestByKey = new Map<string, DeviceSample>();
  private error: SamplerError | null = null;
  private lastOk = false;
  private failures = 0;
  private handle: unknown = null;

  constructor(options: SamplerOptions) {
    this.provider = options.provider;
    this.wallUs = options.wallUs;
    this.intervalMs = options.intervalMs ?? SAMPLE_INTERVAL_MS;
    this.timer = options.timer ?? systemTimer;
    this.onSample = options.onSample;
    this.onError = options.onError;
    this.engineTrees = options.engineTrees;
    const limit = options.staleAfterUs ?? DEFAULT_STALE_AFTER_US;
    this.staleAfterUs = typeof limit === 'number' ? () => limit : limit;
  }

  /** Samples once now, then every intervalMs. */
  start(): void {
    if (this.handle !== null) return;
    this.tick();
    this.handle = this.timer.setInterval(() => this.tick(), this.intervalMs);
  }

  stop(): void {
    if (this.handle === null) return;
    this.timer.clearInterval(this.handle);
    this.handle = null;
  }

  get running(): boolean {
    return this.handle !== null;
  }

  /** One sample; never throws. Returns the samples, or null when the provider failed. */
  tick(): DeviceSample[] | null {
    let samples: DeviceSample[];
    try {
      const trees = this.engineTrees?.() ?? null;
      if (trees !== null) trackEngineTrees(this.provider, trees);
      samples = this.provider.sample();
      if (trees !== null) samples = samples.map((sample) => foldEngineTrees(sample, trees));
    } catch (thrown) {
      const error =
        thrown instanceof TelemetryError
          ? thrown
          : new TelemetryError('DRIVER_ERROR', `the ${this.provider.source} provider failed: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
      const atUs = this.wallUs();
      this.error = { error, atUs };
      this.lastOk = false;
      this.failures++;
      for (const key of this.latestByKey.keys()) this.markFailed(key, atUs, error.message);
      this.onError?.(error);
      return null;
    }
    const listed = new Set<string>();
    for (const sample of samples) {
      this.latestByKey.set(sample.key, sample);
      listed.add(sample.key);
    }
    if (listed.size < this.latestByKey.size) {
      const atUs = this.wallUs();
      for (const key of this.latestByKey.keys()) if (!listed.has(key)) this.markFailed(key, atUs, `the ${this.provider.source} provider no longer lists this device`);
    }
    this.lastOk = true;
    this.onSample?.(samples);
    return samples;
  }

  /** The device's figures are not live from `atUs` on: its last figures stay, with their own time
   *  (never re-stamped), and say so. A sample already marked keeps its first failure's time. */
  private markFailed(key: string, atUs: number, message: string): void {
    const sample = this.latestByKey.get(key);
    if (sample === undefined || sample.failure !== undefined) return;
    this.latestByKey.set(key, { ...sample, processes: null, utilizationPct: null, temperatureC: null, powerW: null, failure: { atUs, lastGood: true, message } });
  }

  /** The latest sample of a device, however old or failed (check isStale), or null if never seen. */
  latest(key: string): DeviceSample | null {
    return this.latestByKey.get(key) ?? null;
  }

  /** The latest sample of every device seen, in the order first seen. */
  all(): DeviceSample[] {
    return [...this.latestByKey.values()];
  }

  /** The latest sample of a device if it is live at nowUs (not failed, not too old), else null. */
  fresh(key: string, nowUs: number): DeviceSample | null {
    const sample = this.latest(key);
    return sample !== null && !this.isStale(sample, nowUs) ? sample : null;
  }

  isStale(sample: Pick<DeviceSample, 'sampledAtUs' | 'failure'>, nowUs: number): boolean {
    return isStale(sample, nowUs, this.staleAfterUs());
  }

  /** The most recent failure (kept after later successes; see ok). */
  lastError(): SamplerError | null {
    return this.error;
  }

  /** Whether the last tick succeeded. */
  get ok(): boolean {
    return this.lastOk;
  }

  /** How many ticks failed in all. */
  get failureCount(): number {
    return this.failures;
  }

  /** Stops sampling and closes the provider. */
  close(): void {
    this.stop();
    this.provider.close();
  }
}
