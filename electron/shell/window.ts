/**
 * The dashboard window: created when first asked for, hidden (not closed) when the user closes
 * it, destroyed only when the app quits. Its security (options, CSP, navigation) comes from
 * window-security.ts; here it is applied.
 */
import { BrowserWindow, session, type WebContents } from 'electron';
import { contentSecurityPolicy, isRendererResource, mainWindowOptions, mayNavigate, type RendererLocation } from './window-security.js';

export interface DashboardWindow {
  /** Create (first time), show and focus the window. */
  show(): void;
  /** The window while it exists (for dialogs parented on it). */
  current(): BrowserWindow | null;
  /** The webContents of the windows this app created (IPC answers only these). */
  webContentsIds(): ReadonlySet<number>;
  /** Their webContents, to push events to. */
  webContents(): WebContents[];
  /** From now on a close closes (the app is quitting). */
  allowClose(): void;
}

export interface DashboardWindowOptions {
  location: RendererLocation;
  preloadPath: string;
  /** Called when the window is shown or hidden (the macOS Dock icon follows it). */
  onVisibility(visible: boolean): void;
  log(line: string): void;
}

/** Session-wide rules, set once: the CSP header on the renderer's pages, no permissions. */
function secureSession(location: RendererLocation): void {
  const policy = contentSecurityPolicy();
  session.defaultSession.webRequest.onHeadersReceived((details, callback) => {
    if (!isRendererResource(details.url, location)) {
      callback({});
      return;
    }
    const headers = { ...details.responseHeaders };
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'content-security-policy') delete headers[name];
    callback({ responseHeaders: { ...headers, 'Content-Security-Policy': [policy] } });
  });
  // The dashboard needs no camera, notifications, clipboard reads or anything else of the kind.
  session.defaultSession.setPermissionRequestHandler((_webContents, _permission, callback) => callback(false));
  session.defaultSession.setPermissionCheckHandler(() => false);
}

export function setupDashboardWindow(options: DashboardWindowOptions): DashboardWindow {
  secureSession(options.location);
  let window: BrowserWindow | null = null;
  let closing = false;
  const ids = new Set<number>();

  const create = (): BrowserWindow => {
    const created = new BrowserWindow(mainWindowOptions(options.preloadPath));
    const contents = created.webContents;
    const id = contents.id;
    ids.add(id);
    contents.setWindowOpenHandler(() => ({ action: 'deny' }));
    contents.on('will-navigate', (event, url) => {
      if (!mayNavigate(url, options.location)) event.preventDefault();
    });
    contents.on('will-redirect', (event, url) => {
      if (!mayNavigate(url, options.location)) event.preventDefault();
    });
    contents.on('will-attach-webview', (event) => event.preventDefault());
    contents.on('render-process-gone', (_event, details) => {
      options.log(`dashboard renderer gone: ${details.reason} (exit code ${details.exitCode})`);
      if (details.reason !== 'clean-exit' && !created.isDestroyed()) contents.reload();
    });
    created.once('ready-to-show', () => created.show());
    created.on('show', () => options.onVisibility(true));
    created.on('hide', () => options.onVisibility(false));
    created.on('close', (event) => {
      if (closing) return;
      // Closing the window leaves the app in the tray.
      event.preventDefault();
      created.hide();
    });
    created.on('closed', () => {
      ids.delete(id);
      if (window === created) window = null;
      options.onVisibility(false);
    });
    const load = options.location.kind === 'file' ? created.loadFile(options.location.indexPath) : created.loadURL(`${options.location.origin}/`);
    load.catch((error: unknown) => options.log(`dashboard did not load: ${error instanceof Error ? error.message : String(error)}`));
    return created;
  };

  return {
    show() {
      if (window === null || window.isDestroyed()) {
        window = create();
        return; // shown on ready-to-show
      }
      if (window.isMinimized()) window.restore();
      window.show();
      window.focus();
    },
    current: () => (window !== null && !window.isDestroyed() ? window : null),
    webContentsIds: () => ids,
    webContents: () => (window !== null && !window.isDestroyed() ? [window.webContents] : []),
    allowClose() {
      closing = true;
    },
  };
}
