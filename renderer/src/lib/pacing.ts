/** The top bar's words for the device: how it is being paced, and its pressure. */
import type { DeviceView, PressureLevel } from '../../../electron/core/contract.js';

export function pacingSummary(device: Pick<DeviceView, 'peers' | 'schedule'>): string {
  const active = device.peers.filter((peer) => peer.active).length;
  if (active === 0) return device.peers.length === 0 ? 'no peers' : 'all peers idle';
  if (active === 1 || device.schedule === null) return 'alone: full speed';
  return `${active} active peers · period ${Math.round(device.schedule.periodUs / 1000)} ms`;
}

export type Tone = 'ok' | 'info' | 'warn' | 'high' | 'bad' | 'muted';

export function pressureTone(level: PressureLevel): Tone {
  switch (level) {
    case 'NORMAL':
      return 'ok';
    case 'ELEVATED':
      return 'warn';
    case 'HIGH':
      return 'high';
    case 'CRITICAL':
      return 'bad';
  }
}

export function pressureWords(level: PressureLevel): string {
  switch (level) {
    case 'NORMAL':
      return 'memory pressure normal';
    case 'ELEVATED':
      return 'memory pressure elevated: background work may wait';
    case 'HIGH':
      return 'memory pressure high: background and lab work waits';
    case 'CRITICAL':
      return 'memory pressure critical: nothing new is placed';
  }
}

/** Shares of the active peers as one stacked bar, in slot order; the parts sum to 100 %
 *  (or the bar is empty when nobody is active). */
export interface ShareSegment {
  slot: number;
  name: string;
  pct: number;
}

export function shareSegments(peers: readonly { slot: number; name: string; sharePct: number; active: boolean }[]): ShareSegment[] {
  const parts = peers
    .filter((peer) => peer.active && Number.isFinite(peer.sharePct) && peer.sharePct > 0)
    .sort((a, b) => a.slot - b.slot)
    .map((peer) => ({ slot: peer.slot, name: peer.name, pct: peer.sharePct }));
  const total = parts.reduce((sum, part) => sum + part.pct, 0);
  if (total <= 0) return [];
  // The core rounds each share to 0.01 %: scale so the bar closes exactly.
  return parts.map((part) => ({ ...part, pct: (part.pct / total) * 100 }));
}
