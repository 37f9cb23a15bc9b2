/**
 * A registry member: holds one slot for one engine, heartbeats it, and leaves. The member is
 * driven from outside (`tick()` every 500 ms): tests call it with a fake clock, the CLI and the app
 * from a timer (see startHeartbeat).
 */
import { RegistryError } from '../../../native/helper.js';
import type { Clock } from '../clock.js';
import { SLOT_COUNT } from './abi.js';
import type { DecodedSegment } from './codec.js';
import { isBrokenRegistry } from './broken.js';
import { isAliveOneShot } from './liveness.js';
import { headerProblemError, type SegmentPort } from './segment.js';

export const HEARTBEAT_INTERVAL_MS = 500;
/** Rounds of read-then-CAS before a join gives up (each round lost every race it tried). */
const JOIN_ROUNDS = 64;

export interface MemberIdentity {
  /** The engine's pid (stored in the slot). */
  pid: number;
  /** The process writing the slot: the engine itself or its supervisor. */
  ownerPid: number;
  /** Wall-clock µs when the engine process started. */
  bootUs: number;
  name: string;
  weight: number;
  active: boolean;
}

export interface SlotCandidate {
  slot: number;
  expectedPid: number;
  expectedHeartbeatUs: number;
}

/** Slots a joiner may take, lowest index first: free ones, and ones whose heartbeat is dead on
 *  the wall clock (torn slots included, as read: pid and heartbeat are atomic words). Pure. */
export function claimCandidates(decoded: DecodedSegment, wallNowUs: number, self: { pid: number }): SlotCandidate[] {
  const candidates: SlotCandidate[] = decoded.free.map((slot) => ({ slot, expectedPid: 0, expectedHeartbeatUs: 0 }));
  for (const record of decoded.slots) {
    // A dead slot holding our own pid is skipped: a CAS of pid → pid proves nothing.
    if (record.pid !== self.pid && !isAliveOneShot(record.heartbeatUs, wallNowUs)) {
      candidates.push({ slot: record.slot, expectedPid: record.pid, expectedHeartbeatUs: record.heartbeatUs });
    }
  }
  return candidates.sort((a, b) => a.slot - b.slot);
}

export function registryFullError(): RegistryError {
  return new RegistryError('REGISTRY_FULL', `registry full (${SLOT_COUNT} slots)`);
}

export type TickResult = 'ok' | 'rejoined';

export class RegistryMember {
  private slotIndex: number | null = null;
  private identity: MemberIdentity;
  private busyPpm = 0;

  constructor(
    private readonly segment: SegmentPort,
    private readonly clock: Clock,
    identity: MemberIdentity,
  ) {
    this.identity = { ...identity };
  }

  get slot(): number | null {
    return this.slotIndex;
  }

  get gpuKey(): string {
    return this.segment.gpuKey;
  }

  get current(): Readonly<MemberIdentity> {
    return this.identity;
  }

  /** Claim the lowest free or dead slot. Throws RegistryError REGISTRY_FULL when there is none. */
  join(): number {
    for (let round = 0; round < JOIN_ROUNDS; round++) {
      const decoded = this.segment.read();
      if (decoded.headerProblem !== null) throw headerProblemError(this.segment.gpuKey, decoded.headerProblem);
      const now = this.clock.wallUs();
      const candidates = claimCandidates(decoded, now, this.identity);
      if (candidates.length === 0) throw registryFullError();
      for (const candidate of candidates) {
        const claimed = this.segment.claim({
          ...candidate,
          pid: this.identity.pid,
          ownerPid: this.identity.ownerPid,
          bootUs: this.identity.bootUs,
          weight: this.identity.weight,
          active: this.identity.active,
          name: this.identity.name,
          nowUs: this.clock.wallUs(),
        });
        if (claimed) {
          this.slotIndex = candidate.slot;
          this.busyPpm = 0;
          return candidate.slot;
        }
      }
    }
    throw registryFullError();
  }

  /** Store the heartbeat; if the slot was reclaimed while we were stopped past 3 s, join again. */
  tick(): TickResult {
    if (this.slotIndex === null) {
      this.join();
      return 'rejoined';
    }
    const { pid, bootUs } = this.identity;
    if (this.segment.heartbeat(this.slotIndex, pid, bootUs, this.clock.wallUs())) return 'ok';
    this.slotIndex = null;
    this.join();
    return 'rejoined';
  }

  /** Change what others see of us: one seq-bracketed update. In a broken registry (truncated
   *  under us) nothing can be written: the fields are kept for when it is valid again, and
   *  'broken' says so (the heartbeat, which rejoins, reports the breakage). */
  set(fields: Partial<Pick<MemberIdentity, 'weight' | 'active' | 'name'>> & { busyPpm?: number }): TickResult | 'broken' {
    const { busyPpm, ...rest } = fields;
    this.identity = { ...this.identity, ...rest };
    if (busyPpm !== undefined) this.busyPpm = busyPpm;
    try {
      if (this.slotIndex === null) {
        this.join();
        return 'rejoined';
      }
      const { pid, bootUs, weight, active, ownerPid, name } = this.identity;
      const ok = this.segment.update(this.slotIndex, pid, bootUs, {
        weight,
        active,
        busyPpm: this.busyPpm,
        ownerPid,
        ...(fields.name !== undefined ? { name } : {}),
      });
      if (ok) return 'ok';
      this.slotIndex = null;
      this.join();
      return 'rejoined';
    } catch (error) {
      if (isBrokenRegistry(error)) return 'broken';
      throw error;
    }
  }

  /** Free the slot (if it is still ours). In a broken registry there is nothing to free: the
   *  slot, if it ever comes back, ages out in 3 s. */
  leave(): void {
    if (this.slotIndex === null) return;
    const slot = this.slotIndex;
    this.slotIndex = null;
    try {
      this.segment.release(slot, this.identity.pid, this.identity.bootUs);
    } catch (error) {
      if (!isBrokenRegistry(error)) throw error;
    }
  }
}

export interface HeartbeatLoop {
  stop(): void;
}

/** Tick the member every interval; `onTick` hears about rejoins and errors (a full registry after
 *  losing our slot, a segment that turned foreign). */
export function startHeartbeat(
  member: RegistryMember,
  onTick: (result: TickResult | RegistryError | Error) => void,
  intervalMs = HEARTBEAT_INTERVAL_MS,
): HeartbeatLoop {
  const timer = setInterval(() => {
    try {
      onTick(member.tick());
    } catch (error) {
      onTick(error instanceof Error ? error : new Error(String(error)));
    }
  }, intervalMs);
  return { stop: () => clearInterval(timer) };
}

/** Wall-clock µs at which this process started. */
export function processBootUs(wallNowUs: number): number {
  return Math.round(wallNowUs - process.uptime() * 1e6);
}
