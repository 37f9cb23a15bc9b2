/**
 * The app's main process: one instance, living in the tray. At ready it opens the settings,
 * starts the core, then the tray and the IPC bridge; the dashboard window is made when first
 * asked for. Quitting stops the engines the app started before the process ends.
 */
import { app, dialog } from 'electron';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadRegistryHelper } from '../native/helper.js';
import { startApiServer, type ApiServer } from './core/api/server.js';
import { startCore } from './core/app.js';
import type { Core } from './core/app-types.js';
import { DEFAULT_API_PORT, type Verdict } from './core/contract.js';
import { builtinHostPath, defaultDataDir, rendererDir } from './core/paths.js';
import { openNodeSettings } from './core/settings.js';
import { setupIpc } from './shell/ipc.js';
import { openDataDir } from './core/data-lock.js';
import { createShellExtras } from './shell/shell-extras.js';
import { setupTray } from './shell/tray.js';
import { createAppSpawn } from './shell/utility-spawn.js';
import { setupDashboardWindow, type DashboardWindow } from './shell/window.js';
import { devRendererOrigin, type RendererLocation } from './shell/window-security.js';

/** This file runs as dist/electron/main.js: the preload, the CLI and the engine host beside it. */
const here = dirname(fileURLToPath(import.meta.url));
/** How long quitting waits for the engines to stop (they get SIGKILL after 10 s themselves). */
const QUIT_LIMIT_MS = 15_000;

const log = (line: string): void => void process.stderr.write(`gpu-share: ${line}\n`);

/** The dashboard, once the core is up; a request to show it before then is kept. */
let dashboard: DashboardWindow | null = null;
let showWhenReady = false;
const showDashboard = (): void => {
  if (dashboard === null) showWhenReady = true;
  else dashboard.show();
};

function setupSingleInstance(): boolean {
  if (!app.requestSingleInstanceLock()) return false;
  // A second launch (from the menu, or at login twice) brings this one's window forward.
  app.on('second-instance', () => showDashboard());
  return true;
}

/** macOS: a Dock icon only while the window is open (the tray is the app's home). */
function setupDock(): (visible: boolean) => void {
  const dock = app.dock;
  if (dock === undefined) return () => undefined;
  dock.hide();
  return (visible) => {
    if (visible) void dock.show();
    else dock.hide();
  };
}

function rendererLocation(): RendererLocation {
  // A development server only in an unpackaged app, and only on loopback.
  const origin = app.isPackaged ? null : devRendererOrigin(process.env['GPU_SHARE_RENDERER_URL']);
  return origin === null ? { kind: 'file', indexPath: join(rendererDir(), 'index.html') } : { kind: 'origin', origin };
}

/** GPU_SHARE_API_PORT: the API's port for this run instead of the settings' (a second copy of the
 *  app beside another, a test on a free port); the settings file keeps its own. */
function apiPortOverride(): number | null {
  const text = process.env['GPU_SHARE_API_PORT'];
  if (text === undefined || text === '') return null;
  const port = Number(text);
  if (Number.isInteger(port) && port >= 1 && port <= 65_535) return port;
  log(`GPU_SHARE_API_PORT=${text.slice(0, 40)} is not a port (1–65535); using the settings' port`);
  return null;
}

/** The loopback API (the gateway, /gpu/peers, the dashboard in a browser). Without it (its port
 *  taken, say by a `gpu-share serve`) the tray and the window still work: it is logged, not
 *  fatal. */
async function setupApiServer(core: Core, staticDir: string): Promise<ApiServer | null> {
  const port = apiPortOverride() ?? core.settings.get().apiPort;
  try {
    return await startApiServer({ core, port, staticDir, log });
  } catch (error) {
    log(`api: not listening on 127.0.0.1:${port}: ${error instanceof Error ? error.message : String(error)}; engines' gateway and /gpu/peers are off until the app restarts`);
    return null;
  }
}

/** Quit (from the tray, the OS, a signal): once, the API and the engines are stopped first. */
function setupQuit(close: () => Promise<void>, beforeClose: () => void): void {
  let phase: 'running' | 'closing' | 'closed' = 'running';
  app.on('before-quit', (event) => {
    if (phase === 'closed') return;
    event.preventDefault();
    if (phase === 'closing') return;
    phase = 'closing';
    beforeClose();
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        log(`engines still stopping after ${QUIT_LIMIT_MS / 1000} s; quitting anyway`);
        resolve();
      }, QUIT_LIMIT_MS);
    });
    const closed = close().catch((error: unknown) => log(`stopping: ${error instanceof Error ? error.message : String(error)}`));
    void Promise.race([closed, limit]).then(() => {
      clearTimeout(timer);
      phase = 'closed';
      app.quit();
    });
  });
}

async function start(): Promise<void> {
  const onVisibility = setupDock();
  const dataDir = defaultDataDir();
  // Ours (created 0700; another user's refused), held (one server per data folder), and tidied.
  openDataDir(dataDir, 'app', log); // held for as long as the app runs
  // The same file as `gpu-share serve`, through conf as there (electron-store would add an IPC
  // listener of its own, outside the contract, that hands any page the userData path).
  const settings = openNodeSettings(dataDir, DEFAULT_API_PORT, (line) => process.stderr.write(`${line}\n`));
  const core = await startCore({
    dataDir,
    settings,
    helper: loadRegistryHelper(),
    // `nodePath` scripts run as utility processes (createAppSpawn): the app's own executable
    // never has to act as Node.
    launchers: { nodePath: process.execPath, cliPath: join(here, 'cli.js'), builtinHostPath: builtinHostPath() },
    spawn: createAppSpawn(process.execPath),
    log,
  });

  const api = await setupApiServer(core, rendererDir());
  const location = rendererLocation();
  const dashboardWindow = setupDashboardWindow({ location, preloadPath: join(here, 'preload.cjs'), onVisibility, log });
  const verdicts = new Map<string, Verdict>();
  const tray = setupTray({ core, verdicts, appRoot: app.getAppPath(), openDashboard: showDashboard, quit: () => app.quit(), log });
  const launchCommand = app.isPackaged ? [process.env['APPIMAGE'] ?? process.execPath] : [process.execPath, app.getAppPath()];
  setupIpc({
    core,
    shell: createShellExtras({ settings, dataDir, window: () => dashboardWindow.current(), launchCommand }),
    trusted: { webContentsIds: () => dashboardWindow.webContentsIds(), location },
    windows: () => dashboardWindow.webContents(),
    onPlan: (profileId, verdict) => {
      verdicts.set(profileId, verdict);
      tray.refresh();
    },
  });
  const close = async (): Promise<void> => {
    await api?.close();
    await core.close();
  };
  setupQuit(close, () => {
    dashboardWindow.allowClose();
    tray.destroy();
  });

  dashboard = dashboardWindow;
  if (showWhenReady) dashboardWindow.show();
}

if (setupSingleInstance()) {
  // The app lives in the tray: closing its last window does not quit it.
  app.on('window-all-closed', () => undefined);
  app.on('activate', () => showDashboard());
  app
    .whenReady()
    .then(start)
    .catch((error: unknown) => {
      const message = error instanceof Error ? error.message : String(error);
      log(`could not start: ${message}`);
      dialog.showErrorBox('GPU Share could not start', message);
      app.exit(1);
    });
} else {
  app.quit();
}
