/** The event stream's state as the top bar shows it, and the reconnect schedule. */

export type ConnectionState = 'connecting' | 'live' | 'lost';

export interface ConnectionStatus {
  state: ConnectionState;
  /** Why the stream is not live (the last error), for the tooltip; null when live. */
  detail: string | null;
  /** When the next attempt starts (ms since epoch), while lost. */
  retryAtMs: number | null;
}

export interface Backoff {
  initialMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: Backoff = { initialMs: 250, maxMs: 5000 };

/** Delay before reconnect attempt `attempt` (0 = the first retry): doubling, capped. */
export function backoffDelayMs(attempt: number, backoff: Backoff = DEFAULT_BACKOFF): number {
  const n = Math.max(0, Math.floor(Number.isFinite(attempt) ? attempt : 0));
  return Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(n, 30));
}

export function connectionWords(status: ConnectionStatus): string {
  switch (status.state) {
    case 'connecting':
      return 'connecting…';
    case 'live':
      return 'live';
    case 'lost':
      return 'connection lost: retrying';
  }
}
