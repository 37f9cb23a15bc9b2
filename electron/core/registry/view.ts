/**
 * The registry as its readers see it: which peers are alive, their shares, and the public view
 * objects (`/gpu/peers`, the props block, the boot log line). Pure: a decoded read plus liveness
 * in, plain data out.
 */
import type { DecodedSegment, SlotRecord } from './codec.js';
import type { Liveness } from './liveness.js';
import { computeShares } from './shares.js';
import { segmentName } from './abi.js';

export interface AlivePeer {
  readonly record: SlotRecord;
  /** Heartbeat age in µs as this reader judged it. */
  readonly ageUs: number;
  /** Share of the device in [0, 1]; 0 when idle. */
  readonly share: number;
}

/** Alive peers in slot order, each with its share among the alive and active ones. */
export function resolvePeers(decoded: DecodedSegment, liveness: ReadonlyMap<number, Liveness>): AlivePeer[] {
  const alive = decoded.slots.filter((record) => liveness.get(record.slot)?.alive === true);
  const active = alive.filter((record) => record.active);
  const shares = computeShares(active.map((record) => record.weight));
  const shareBySlot = new Map(active.map((record, i) => [record.slot, shares[i] ?? 0]));
  return alive.map((record) => ({
    record,
    ageUs: liveness.get(record.slot)?.ageUs ?? 0,
    share: shareBySlot.get(record.slot) ?? 0,
  }));
}

export interface SelfView {
  pid: number;
  name: string;
  weight: number;
  share_pct: number;
  busy_pct: number;
  active: boolean;
}

export interface PeerView extends SelfView {
  heartbeat_age_ms: number;
}

/** The `/gpu/peers` object. `self` is null for an observer that holds no slot; `peers` excludes
 *  self. */
export interface GpuPeersView {
  gpu_key: string;
  self: SelfView | null;
  peers: PeerView[];
}

/** The `/props` block: the `/gpu/peers` view and whether the engine is paced. */
export interface GpuShareBlock {
  /** false when the engine runs unpaced: no registry, or one refused, full or broken. */
  enabled: boolean;
  gpu_key: string;
  self: SelfView | null;
  peers: PeerView[];
  /** Why it is not enabled (only then). */
  reason?: string;
}

export interface GpuShareProps {
  opencoti: {
    gpu_share: GpuShareBlock;
  };
}

const round = (value: number, digits: number): number => {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
};

/** f32 weights print as what the user typed (1.5, 0.1), not as 0.10000000149011612. */
const displayWeight = (weight: number): number => Number(weight.toPrecision(6));

function selfView(peer: AlivePeer): SelfView {
  return {
    pid: peer.record.pid,
    name: peer.record.name,
    weight: displayWeight(peer.record.weight),
    share_pct: round(peer.share * 100, 2),
    busy_pct: round(peer.record.busyPpm / 10_000, 1),
    active: peer.record.active,
  };
}

/** @param selfSlot the slot this process holds, or null for an observer */
export function buildPeersView(gpuKey: string, peers: readonly AlivePeer[], selfSlot: number | null): GpuPeersView {
  const self = selfSlot === null ? undefined : peers.find((peer) => peer.record.slot === selfSlot);
  return {
    gpu_key: gpuKey,
    self: self === undefined ? null : selfView(self),
    peers: peers
      .filter((peer) => peer !== self)
      .map((peer) => ({ ...selfView(peer), heartbeat_age_ms: Math.round(peer.ageUs / 1000) })),
  };
}

export function buildPropsBlock(view: GpuPeersView, enabled: boolean): GpuShareProps {
  return { opencoti: { gpu_share: { enabled, gpu_key: view.gpu_key, self: view.self, peers: view.peers } } };
}

/** The block of an engine that runs unpaced, with the reason; gpu_key is '' when it has none. */
export function unpacedPropsBlock(gpuKey: string | null, reason: string): GpuShareProps {
  return { opencoti: { gpu_share: { enabled: false, gpu_key: gpuKey ?? '', self: null, peers: [], reason } } };
}

/** `gpu-share: joined /opencoti-gpu-<key> slot 2 (weight 1.5, 3 peers alive)`; the count includes
 *  the joiner itself. */
export function bootLogLine(gpuKey: string, slot: number, weight: number, aliveCount: number): string {
  const peers = aliveCount === 1 ? '1 peer alive' : `${aliveCount} peers alive`;
  return `gpu-share: joined ${segmentName(gpuKey)} slot ${slot} (weight ${displayWeight(weight)}, ${peers})`;
}
