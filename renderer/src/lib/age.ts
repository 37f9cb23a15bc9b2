/**
 * Heartbeat ages and departures. The registry declares a peer dead when its heartbeat is more
 * than 3 s old; the Peers view warns before that (amber past 1 s: a missed beat or two; red past
 * 2 s: likely stopped), fades the row at 3 s, and keeps a departed row on screen briefly with an
 * "aged out" notice so that a peer does not just vanish.
 */
import type { EngineView, PeerRow } from '../../../electron/core/contract.js';

export const AGE_AMBER_MS = 1000;
export const AGE_RED_MS = 2000;
export const AGE_DEAD_MS = 3000;
/** How long a departed row stays (faded) with its notice. */
export const DEPARTED_VISIBLE_MS = 5000;
/** How long the row of an engine of ours that crashed stays, with its Restart button. */
export const CRASHED_VISIBLE_MS = 120_000;

export type AgeLevel = 'fresh' | 'amber' | 'red' | 'dead';

export function ageLevel(ageMs: number): AgeLevel {
  if (!Number.isFinite(ageMs)) return 'dead';
  if (ageMs >= AGE_DEAD_MS) return 'dead';
  if (ageMs > AGE_RED_MS) return 'red';
  if (ageMs > AGE_AMBER_MS) return 'amber';
  return 'fresh';
}

/** A row's opacity: full while alive, faded from 3 s on and for a departed row. */
export function rowOpacity(ageMs: number, departed: boolean): number {
  return departed || ageLevel(ageMs) === 'dead' ? 0.4 : 1;
}

export function ageTitle(ageMs: number): string {
  switch (ageLevel(ageMs)) {
    case 'fresh':
      return 'heartbeat on time (every ~0.5 s)';
    case 'amber':
      return 'heartbeat late: the peer missed a beat or is stalled';
    case 'red':
      return 'heartbeat very late: the peer will age out at 3 s';
    case 'dead':
      return 'no heartbeat for 3 s: the peer has aged out';
  }
}

/** A peer is the same peer while it holds the same slot with the same pid. */
export const peerIdentity = (peer: Pick<PeerRow, 'slot' | 'pid'>): string => `${peer.slot}:${peer.pid}`;

export type DepartureKind =
  /** An engine GPU Share started died: the supervisor saw it exit and freed its slot at once. */
  | 'crashed'
  /** Its heartbeat stopped: the registry reaped it after 3 s (killed, hung, stopped past 3 s). */
  | 'aged-out'
  /** It left while its heartbeat was fresh: a clean exit. */
  | 'left';

export interface DisplayRow {
  peer: PeerRow;
  /** When the renderer saw it leave (ms on the renderer's clock); null while it is present. */
  departedAtMs: number | null;
  departedHow: DepartureKind | null;
}

export interface Departure {
  slot: number;
  pid: number;
  name: string;
  atMs: number;
  how: DepartureKind;
}

/** Milliseconds until the registry reaps a peer whose heartbeat is this old, once it is late
 *  (amber or red); null while it is on time or already gone. */
export function ageOutInMs(ageMs: number): number | null {
  const level = ageLevel(ageMs);
  return level === 'amber' || level === 'red' ? AGE_DEAD_MS - ageMs : null;
}

const visibleFor = (how: DepartureKind): number => (how === 'crashed' ? CRASHED_VISIBLE_MS : DEPARTED_VISIBLE_MS);

/**
 * The rows to show after a new registry view: present peers as they are now, departed ones kept
 * (faded, with their last figures) for DEPARTED_VISIBLE_MS, in slot order. A peer that vanishes
 * while the engine of ours behind it has crashed crashed (kept CRASHED_VISIBLE_MS, for its Restart
 * button); otherwise one that vanishes with a late heartbeat (past 2 s) aged out, and one that
 * vanishes with a fresh heartbeat left. A slot taken over by a new pid shows the new peer only.
 */
export function reconcileRows(
  previous: readonly DisplayRow[],
  current: readonly PeerRow[],
  nowMs: number,
  engines: readonly Pick<EngineView, 'id' | 'state'>[] = [],
): { rows: DisplayRow[]; departures: Departure[] } {
  const crashed = new Set(engines.filter((engine) => engine.state === 'crashed').map((engine) => engine.id));
  const present = new Set(current.map(peerIdentity));
  const occupiedSlots = new Set(current.map((peer) => peer.slot));
  const rows: DisplayRow[] = current.map((peer) => ({ peer, departedAtMs: null, departedHow: null }));
  const departures: Departure[] = [];
  for (const row of previous) {
    if (present.has(peerIdentity(row.peer))) continue;
    if (occupiedSlots.has(row.peer.slot)) continue;
    const departedAtMs = row.departedAtMs ?? nowMs;
    const departedHow =
      row.departedHow ?? (row.peer.engineId !== null && crashed.has(row.peer.engineId) ? 'crashed' : row.peer.heartbeatAgeMs > AGE_RED_MS ? 'aged-out' : 'left');
    if (row.departedAtMs === null) departures.push({ slot: row.peer.slot, pid: row.peer.pid, name: row.peer.name, atMs: nowMs, how: departedHow });
    if (nowMs - departedAtMs < visibleFor(departedHow)) rows.push({ peer: { ...row.peer, active: false, sharePct: 0 }, departedAtMs, departedHow });
  }
  rows.sort((a, b) => a.peer.slot - b.peer.slot);
  return { rows, departures };
}

/** The core says a peer aged out: its row leaves now (if it is still listed) as aged out. */
export function markAgedOut(rows: readonly DisplayRow[], slot: number, pid: number, nowMs: number): DisplayRow[] {
  return rows.map((row) =>
    row.peer.slot === slot && row.peer.pid === pid ? { peer: { ...row.peer, active: false, sharePct: 0 }, departedAtMs: row.departedAtMs ?? nowMs, departedHow: 'aged-out' } : row,
  );
}

/** Departed rows whose notice has run its time: drop them without a new registry view. */
export function expireRows(rows: readonly DisplayRow[], nowMs: number): DisplayRow[] {
  return rows.filter((row) => row.departedAtMs === null || row.departedHow === null || nowMs - row.departedAtMs < visibleFor(row.departedHow));
}
