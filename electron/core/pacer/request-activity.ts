/**
 * Activity from a count of requests kept by someone in front of the engine (GPU Share's gateway,
 * through the supervisor's control pipe): while it has a request in flight or waiting for this
 * engine, the engine is working; with none, it is known idle, so `active` clears after the short
 * hysteresis instead of the 2 s window.
 *
 * The count sees only what comes through the gateway. A client may also talk to the engine's own
 * port; such work shows as CPU time, and once it has (CPU advancing while the gateway has had
 * nothing for this engine for a while), the engine's activity is judged by CPU time again for the
 * activity window: "cannot say" rather than a wrong "idle". A better signal below (a llama.cpp
 * server's /metrics, which counts every client) wins whenever it answers.
 */
import { ACTIVITY_WINDOW_US } from './busy.js';
import { workedDuring, type ActivitySource } from './process-gate.js';

/** CPU time in the first moments after the gateway's last request ended is that request's tail
 *  (its last tokens, freeing its slot), not a client of the engine's own port. */
export const REQUEST_TAIL_US = 300_000;

export interface RequestActivity extends ActivitySource {
  /** The gateway's count for this engine (requests answered now or waiting for their turn). */
  setInFlight(count: number): void;
}

/**
 * `inner`: the signal used when the gateway has said nothing yet (an engine nobody sent a request
 * through) and the one that says more when it answers. `monoUs`: a monotonic clock.
 */
export function requestActivity(inner: ActivitySource, monoUs: () => number): RequestActivity {
  let inFlight: number | null = null;
  let idleSinceUs = 0;
  let lastSample: { work: number; atUs: number } | null = null;
  let directWorkAtUs: number | null = null;
  return {
    setInFlight(count) {
      if (count === 0 && inFlight !== 0) idleSinceUs = monoUs();
      inFlight = count;
    },
    workUs: (pid) => inner.workUs(pid),
    busyNow(pid, sampled) {
      const said = inner.busyNow?.(pid, sampled) ?? null;
      if (inFlight === null) return said;
      if (inFlight > 0) return true;
      if (said !== null) return said;
      const now = monoUs();
      // The process gate hands over the sample's reading (a walk of the process tree), not taken twice.
      const work = sampled === undefined ? inner.workUs(pid) : sampled;
      if (work !== null && lastSample !== null && lastSample.atUs - idleSinceUs >= REQUEST_TAIL_US) {
        // The process gate's own test of a sample (it was allowed to run all along, or this is
        // an overestimate of its runnable time, which only makes the test stricter).
        if (workedDuring(work - lastSample.work, now - lastSample.atUs)) directWorkAtUs = now;
      }
      lastSample = work === null ? null : { work, atUs: now };
      return directWorkAtUs !== null && now - directWorkAtUs <= ACTIVITY_WINDOW_US ? null : false;
    },
  };
}
