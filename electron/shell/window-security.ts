/**
 * The dashboard window's security, as data and predicates (no Electron at run time, so tests
 * import it): the window's options, the Content-Security-Policy its pages get, and which URLs
 * count as the app's own renderer (for navigation, for IPC senders, for the CSP header).
 */
import type { BrowserWindowConstructorOptions } from 'electron';
import { pathToFileURL } from 'node:url';
import { DASHBOARD_CSP } from '../core/contract.js';

/** Where the renderer comes from: the Vite build on disk, or (development only) a dev server. */
export type RendererLocation = { kind: 'file'; indexPath: string } | { kind: 'origin'; origin: string };

export const WINDOW_SIZE = { width: 1100, height: 720, minWidth: 800, minHeight: 600 } as const;

export function mainWindowOptions(preloadPath: string): BrowserWindowConstructorOptions {
  return {
    width: WINDOW_SIZE.width,
    height: WINDOW_SIZE.height,
    minWidth: WINDOW_SIZE.minWidth,
    minHeight: WINDOW_SIZE.minHeight,
    title: 'GPU Share',
    // Shown once the first paint is ready, so the user never sees a blank frame.
    show: false,
    autoHideMenuBar: true,
    webPreferences: {
      preload: preloadPath,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInSubFrames: false,
      nodeIntegrationInWorker: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      experimentalFeatures: false,
      webviewTag: false,
      navigateOnDragDrop: false,
      spellcheck: false,
    },
  };
}

/**
 * The policy for the app's pages. It has to allow what the renderer's own <meta> policy allows
 * (both apply, so the stricter wins everywhere): style attributes the components set (a peer's
 * colour, a bar's width) count as inline style, and icons may be data: URLs. Nothing may be evaluated, framed, posted or fetched from elsewhere: the
 * dashboard talks to the core over IPC only.
 */
export function contentSecurityPolicy(): string {
  return DASHBOARD_CSP;
}

const parse = (url: string): URL | null => {
  try {
    return new URL(url);
  } catch {
    return null;
  }
};

/** The renderer's entry page (hash and query aside: the dashboard routes by hash). */
export function isAppRendererUrl(url: string, location: RendererLocation): boolean {
  const parsed = parse(url);
  if (parsed === null) return false;
  if (location.kind === 'origin') return parsed.origin === location.origin;
  const index = pathToFileURL(location.indexPath);
  return parsed.protocol === 'file:' && parsed.host === index.host && parsed.pathname === index.pathname;
}

/** A file the renderer loads (its scripts, styles, icons): under the entry page's folder. */
export function isRendererResource(url: string, location: RendererLocation): boolean {
  const parsed = parse(url);
  if (parsed === null) return false;
  if (location.kind === 'origin') return parsed.origin === location.origin;
  const index = pathToFileURL(location.indexPath);
  const folder = index.pathname.slice(0, index.pathname.lastIndexOf('/') + 1);
  // URL parsing has already resolved any `..`, so a prefix check cannot be walked out of.
  return parsed.protocol === 'file:' && parsed.host === index.host && parsed.pathname.startsWith(folder);
}

/** will-navigate: only a reload of the app's own page; links elsewhere never replace the app. */
export function mayNavigate(url: string, location: RendererLocation): boolean {
  return isAppRendererUrl(url, location);
}

/** A development renderer origin from the environment: only http(s) on a loopback host; anything
 *  else is ignored (null), so a stray variable cannot point the window at the network. */
export function devRendererOrigin(value: string | undefined): string | null {
  if (value === undefined || value === '') return null;
  const parsed = parse(value);
  if (parsed === null || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) return null;
  const host = parsed.hostname;
  if (host !== '127.0.0.1' && host !== 'localhost' && host !== '[::1]') return null;
  return parsed.origin;
}
