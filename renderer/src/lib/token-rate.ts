/**
 * The one tokens-per-second figure of the dashboard: the engine's own decode counter over the
 * last 2 s (read every 2 s from its /metrics), named and worded the same in every view. Views
 * find the engine behind a peer by the peer's engine id, never by slot or name.
 */
import type { EngineView, PeerRow } from '../../../electron/core/contract.js';
import type { Shown } from './format.js';

/** The figure's name wherever it is shown (a column header, a tooltip's term). */
export const TOKEN_RATE_LABEL = 'tok/s';
export const TOKEN_RATE_MEANING = "tokens decoded per second over the last 2 s, from the engine's own /metrics (read every 2 s)";

export function tokenRate(engine: Pick<EngineView, 'kind' | 'tokensPerSecond'> | null): Shown {
  if (engine === null) return { text: '—', title: 'measured only for engines GPU Share started' };
  if (engine.tokensPerSecond === null) return { text: '—', title: engine.kind === 'command' ? 'a plain command reports no token counter' : 'not read yet (every 2 s from its /metrics)' };
  return { text: engine.tokensPerSecond.toFixed(1), title: TOKEN_RATE_MEANING };
}

/** The engine GPU Share started behind a peer of a device; null for a foreign peer. */
export function engineOfPeer<E extends Pick<EngineView, 'id'>>(peer: Pick<PeerRow, 'engineId'> | undefined, engines: readonly E[]): E | null {
  if (peer === undefined || peer.engineId === null) return null;
  return engines.find((e) => e.id === peer.engineId) ?? null;
}
