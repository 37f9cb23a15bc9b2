/**
 * An engine process that paces itself: joins the registry as its own peer (pid = this process),
 * heartbeats, re-judges its activity every 100 ms (so that going idle releases its window 2.0–2.1 s
 * after its last step rather than at the next 500 ms heartbeat) and hands out the cooperative gate
 * to call after every decode step. The built-in engine host and the burn engine both use it.
 */
import type { RegistryHelper } from '../../../native/helper.js';
import { systemClock } from '../clock.js';
import { RegistryMember, processBootUs, startHeartbeat } from '../registry/member.js';
import { RegistryObserver } from '../registry/observer.js';
import { RegistrySegment } from '../registry/segment.js';
import type { AlivePeer, GpuPeersView } from '../registry/view.js';
import { BrokenRegistryNotice } from '../registry/broken.js';
import { CooperativeGate, sleepUs } from './gate.js';

export interface PacedPeer {
  readonly gate: CooperativeGate;
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
  const peers = (): AlivePeer[] => {
    try {
      const alive = observer.peers(segment);
      broken.succeeded();
      return alive;
    } catch (error) {
      if (broken.failed(error)) return [];
      throw error;
    }
  };
  const publish = (fields: Parameters<RegistryMember['set']>[0]): void => {
    try {
      member.set(fields);
    } catch (error) {
      if (!broken.failed(error)) throw error;
    }
  };
  const gate = new CooperativeGate({ peers, selfSlot: () => member.slot, publish }, clock, sleepUs);
  const heartbeat = startHeartbeat(member, (result) => {
    if (result === 'rejoined') log('warn', `our registry slot was reclaimed (stopped for more than 3 s?); rejoined slot ${String(member.slot)}`);
    else if (result instanceof Error) {
      if (!broken.failed(result)) log('error', `registry heartbeat failed: ${result.message}`);
    }
  });
  const refresh = setInterval(() => {
    try {
      gate.refresh();
    } catch (error) {
      log('error', `registry update failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }, 100);
  let left = false;
  return {
    gate,
    slot,
    setWeight: (weight) => publish({ weight }),
    view: () => observer.view(options.gpuKey, segment, member.slot),
    unpacedBecause: () => broken.brokenReason,
    leave: () => {
      if (left) return;
      left = true;
      clearInterval(refresh);
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
