/**
 * An engine process that paces itself: joins the registry as its own peer (pid = this process),
 * heartbeats, re-judges its activity every 50 ms (unless the gate is napping, mid-generation) and
 * hands out the cooperative gate to call after every decode step. The built-in engine host and the
 * burn engine both use it.
 *
 * Activity: an engine that knows its requests (`knowRequests`: the built-in engine's own queue) is
 * active while one is in flight or queued — set at its first step, or within 50 ms of its arrival —
 * and idle KNOWN_IDLE_HYSTERESIS_US (150 ms) after the last one ends, so that its window goes to the
 * others at once. Otherwise the gate's own rule holds: active until 2 s after the last step.
 */
import type { RegistryHelper } from '../../../native/helper.js';
import { systemClock } from '../clock.js';
import { RegistryMember, processBootUs, startHeartbeat } from '../registry/member.js';
import { RegistryObserver } from '../registry/observer.js';
import { RegistrySegment } from '../registry/segment.js';
import type { AlivePeer, GpuPeersView } from '../registry/view.js';
import { BrokenRegistryNotice } from '../registry/broken.js';
import { KNOWN_IDLE_HYSTERESIS_US } from './busy.js';
import { CooperativeGate, sleepUs, type GateDecision, type Sleep } from './gate.js';

export interface PacedPeer {
  readonly gate: CooperativeGate;
  /** Call after each decode step: our known activity first (see knowRequests), then the gate. */
  afterStep(stepUs?: number): Promise<GateDecision>;
  /** From now on `active` follows `pending()`, the requests in flight or queued (see above). */
  knowRequests(pending: () => number): void;
  readonly slot: number;
  /** A new weight, written to our slot at once (the supervisor's slider). */
  setWeight(weight: number): void;
  /** Our device's `/gpu/peers` view, with us as self (the one `serve` builds, buildPeersView).
   *  Throws RegistryError when the segment's header is no longer ABI v1, or it is broken. */
  view(): GpuPeersView;
  /** Why we run unpaced now (the registry is broken: truncated under us); null while paced. */
  unpacedBecause(): string | null;
  /** Free the slot and stop the timers (safe to call twice). */
  leave(): void;
}

export type PacedPeerLog = (level: 'warn' | 'error', message: string) => void;

/** Throws RegistryError when the registry cannot be joined (full, foreign segment). */
export function joinAsPacedPeer(helper: RegistryHelper, options: { gpuKey: string; weight: number; name: string }, log: PacedPeerLog = () => undefined): PacedPeer {
  const clock = systemClock(() => helper.wallUs());
  const segment = RegistrySegment.openForJoin(helper, options.gpuKey);
  const member = new RegistryMember(segment, clock, { pid: process.pid, ownerPid: process.pid, bootUs: processBootUs(clock.wallUs()), name: options.name, weight: options.weight, active: false });
  let slot: number;
  try {
    slot = member.join();
  } catch (error) {
    segment.close();
    throw error;
  }
  const observer = new RegistryObserver(clock, true);
  // A registry truncated under us is broken: no peers (never waits) until it is valid again.
  const broken = new BrokenRegistryNotice((line, state) => log('warn', state === 'broken' ? `${line}; running unpaced until it is valid again` : `${line}; paced again`));
  const peers = (): AlivePeer[] => broken.read(() => observer.peers(segment), []);
  const setFields = (fields: Parameters<RegistryMember['set']>[0]): void => {
    try {
      member.set(fields);
    } catch (error) {
      if (!broken.failed(error)) throw error;
    }
  };
  // Known activity: null until the engine says it knows its requests. A request is seen by its
  // decode steps (`stepped`, set at every step without reading a clock) or by `pendingOf()` at a
  // tick, so that one that begins and ends between two ticks still counts.
  let pendingOf: (() => number) | null = null;
  let lastBusyMonoUs: number | null = null;
  let stepped = false;
  let written: boolean | null = null;
  const knownActive = (): boolean | null => {
    if (pendingOf === null) return null;
    const now = clock.monoUs();
    if (stepped || pendingOf() > 0) {
      stepped = false;
      lastBusyMonoUs = now;
      return true;
    }
    return lastBusyMonoUs !== null && now - lastBusyMonoUs < KNOWN_IDLE_HYSTERESIS_US;
  };
  const writeActive = (active: boolean | null): void => {
    if (active === null || active === written) return;
    written = active;
    setFields({ active });
  };
  const publish = (fields: Parameters<RegistryMember['set']>[0]): void => {
    const active = knownActive() ?? fields.active;
    written = active ?? null;
    setFields({ ...fields, ...(active === undefined ? {} : { active }) });
  };
  // The gate's naps hold the 50 ms tick off: a waiting engine's every wake-up is taken from the
  // working engine's window (sleepUs), and in the middle of a generation the tick has nothing to
  // do that our next step does not (it publishes; the step marks us active). A nap of a whole
  // 50 ms ends in the same turn of the event loop as the tick, which then leaves it to the gate.
  let napping = false;
  const nap: Sleep = async (us, precise) => {
    tick.refresh();
    napping = true;
    try {
      await sleepUs(us, precise);
    } finally {
      napping = false;
    }
  };
  const gate = new CooperativeGate({ peers, selfSlot: () => member.slot, publish }, clock, nap);
  const heartbeat = startHeartbeat(member, (result) => {
    if (result === 'rejoined') log('warn', `our registry slot was reclaimed (stopped for more than 3 s?); rejoined slot ${String(member.slot)}`);
    else if (result instanceof Error) {
      if (!broken.failed(result)) log('error', `registry heartbeat failed: ${result.message}`);
    }
  });
  const tick = setInterval(() => {
    if (napping) return;
    try {
      gate.refresh();
      writeActive(knownActive());
    } catch (error) {
      log('error', `registry update failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }, 50);
  let left = false;
  return {
    gate,
    afterStep: (stepUs) => {
      stepped = true;
      // A request that arrived since the last tick: active from its first step.
      if (pendingOf !== null && written !== true) writeActive(knownActive());
      return gate.afterStep(stepUs);
    },
    knowRequests: (pending) => {
      pendingOf = pending;
      writeActive(knownActive());
    },
    slot,
    setWeight: (weight) => setFields({ weight }),
    view: () => observer.view(options.gpuKey, segment, member.slot),
    unpacedBecause: () => broken.brokenReason,
    leave: () => {
      if (left) return;
      left = true;
      clearInterval(tick);
      heartbeat.stop();
      try {
        member.leave();
        segment.close();
      } catch {
        // the slot ages out in 3 s anyway
      }
    },
  };
}
