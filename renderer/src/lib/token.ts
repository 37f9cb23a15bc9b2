/**
 * The browser dashboard's token: `gpu-share serve` prints `http://127.0.0.1:PORT/#token=…`. The
 * fragment never reaches the server (nor its logs, nor a Referer); we read it once, keep it in
 * sessionStorage for reloads of this tab, and take it out of the address bar so that it is not
 * left in the history or on a screenshot.
 */

export const TOKEN_STORAGE_KEY = 'gpu-share.token';

export interface TokenEnvironment {
  location: Pick<Location, 'hash' | 'pathname' | 'search'>;
  storage: Pick<Storage, 'getItem' | 'setItem'>;
  history: Pick<History, 'replaceState' | 'state'>;
}

/** `#token=abc` (or `#a=1&token=abc`) → "abc"; null when absent or empty. */
export function tokenFromFragment(hash: string): string | null {
  const params = new URLSearchParams(hash.startsWith('#') ? hash.slice(1) : hash);
  const token = params.get('token');
  return token === null || token.trim() === '' ? null : token.trim();
}

/** The token for this tab: from the fragment (stored, then removed from the address bar), else
 *  from an earlier load of the tab; null when the page was opened without one. */
export function takeToken(env: TokenEnvironment): string | null {
  const fromFragment = tokenFromFragment(env.location.hash);
  if (fromFragment !== null) {
    try {
      env.storage.setItem(TOKEN_STORAGE_KEY, fromFragment);
    } catch {
      // Storage refused (a private window's quota): the token still works until a reload.
    }
    env.history.replaceState(env.history.state, '', `${env.location.pathname}${env.location.search}`);
    return fromFragment;
  }
  try {
    const stored = env.storage.getItem(TOKEN_STORAGE_KEY);
    return stored === null || stored === '' ? null : stored;
  } catch {
    return null;
  }
}
