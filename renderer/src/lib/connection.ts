/** The event stream's state as the top bar shows it, and the reconnect schedule. */
import { tokenFromFragment } from './token.js';

/** `refused`: the server answered but refused the token (it was changed, or the address is another
 *  server's): retrying cannot help, the user must open the address with the current token. */
export type ConnectionState = 'connecting' | 'live' | 'lost' | 'refused';

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
    case 'refused':
      return 'token refused';
  }
}

export type PastedAddress = { ok: true; origin: string; token: string } | { ok: false; message: string };

/** The address a user pastes after their token was refused: the one `gpu-share serve` printed,
 *  `http://127.0.0.1:PORT/#token=…`. Only http(s) addresses that carry a token are taken. */
export function parsePastedAddress(text: string): PastedAddress {
  const trimmed = text.trim();
  if (trimmed === '') return { ok: false, message: 'paste the address gpu-share serve printed (http://127.0.0.1:PORT/#token=…)' };
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    return { ok: false, message: 'that is not an address: paste the whole line gpu-share serve printed, starting with http://' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, message: `an address starting with ${url.protocol} is not GPU Share's: it starts with http://` };
  const token = tokenFromFragment(url.hash);
  if (token === null) return { ok: false, message: 'this address has no token: the one gpu-share serve printed ends with #token=…' };
  return { ok: true, origin: url.origin, token };
}
