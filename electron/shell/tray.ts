/**
 * The tray: its menu is tray-menu.ts's model of the current state, rebuilt at most four times a
 * second as state events arrive; its icon is tray-icon.ts's. A click's action becomes one core
 * call; a failure or a refused launch becomes a notification that says why.
 */
import { Menu, Notification, Tray, nativeImage, type MenuItemConstructorOptions, type NativeImage } from 'electron';
import { join } from 'node:path';
import type { Core } from '../core/app-types.js';
import type { Verdict } from '../core/contract.js';
import { realTimers, throttle } from './throttle.js';
import { trayIconFile, trayIconState, trayTooltip, type TrayIconState } from './tray-icon.js';
import { buildTrayMenu, failureText, refusalText, type TrayAction, type TrayMenuItem } from './tray-menu.js';

/** Menu rebuilds at most this often (state events come several times a second). */
const REBUILD_INTERVAL_MS = 250;

export interface TrayOptions {
  core: Core;
  /** The last plan's verdict per profile (shared with the IPC handlers, which also plan). */
  verdicts: Map<string, Verdict>;
  /** The folder `resources/tray/…` is relative to. */
  appRoot: string;
  openDashboard(): void;
  quit(): void;
  log(line: string): void;
}

export interface AppTray {
  /** Rebuild soon (a verdict changed outside a state event). */
  refresh(): void;
  destroy(): void;
}

function template(items: readonly TrayMenuItem[], act: (action: TrayAction) => void): MenuItemConstructorOptions[] {
  return items.map((item): MenuItemConstructorOptions => {
    if (item.type === 'separator') return { type: 'separator' };
    const options: MenuItemConstructorOptions = { label: item.label, type: item.type, enabled: item.enabled };
    if (item.type === 'checkbox' || item.type === 'radio') options.checked = item.checked;
    if (item.submenu !== null) options.submenu = template(item.submenu, act);
    const action = item.action;
    if (action !== null) options.click = () => act(action);
    return options;
  });
}

export function setupTray(options: TrayOptions): AppTray {
  const { core, verdicts } = options;
  const images = new Map<TrayIconState, NativeImage>();
  const imageFor = (icon: TrayIconState): NativeImage => {
    let image = images.get(icon);
    if (image === undefined) {
      const file = join(options.appRoot, trayIconFile(icon, process.platform));
      image = nativeImage.createFromPath(file);
      if (image.isEmpty()) options.log(`tray icon missing or unreadable: ${file}`);
      images.set(icon, image);
    }
    return image;
  };

  const notify = (title: string, body: string): void => {
    options.log(`${title}: ${body}`);
    if (Notification.isSupported()) new Notification({ title, body }).show();
  };

  const act = (action: TrayAction): void => {
    const failed = (what: string) => (error: unknown) => notify(`GPU Share: ${what} failed`, failureText(error));
    switch (action.kind) {
      case 'setWeight':
        core.setWeight(action.engineId, action.weight).catch(failed('setting the weight'));
        return;
      case 'stop':
        core.stopEngine(action.engineId).catch(failed('stopping the engine'));
        return;
      case 'kill':
        core.killEngine(action.engineId).catch(failed('killing the engine'));
        return;
      case 'launch': {
        const name = latest.profiles.find((profile) => profile.id === action.profileId)?.name ?? action.profileId;
        core
          .launch({ profileId: action.profileId })
          .then((outcome) => {
            verdicts.set(action.profileId, outcome.plan.verdict);
            rebuild.request();
            if (outcome.engine === null) notify('GPU Share: not launched', refusalText(name, outcome.plan));
          })
          .catch(failed(`launching ${name}`));
        return;
      }
      case 'labPause':
        core.setPolicy({ labPaused: action.paused }).catch(failed('pausing lab work'));
        return;
      case 'openDashboard':
        options.openDashboard();
        return;
      case 'quit':
        options.quit();
        return;
    }
  };

  const first = core.snapshot();
  let icon = trayIconState(first);
  const tray = new Tray(imageFor(icon));
  // Windows opens a tray's menu on a right click only; the tray is the first thing, so a left
  // click opens it too.
  if (process.platform === 'win32') tray.on('click', () => tray.popUpContextMenu());

  // The state events carry the state (every change is followed by one): render from the latest,
  // and touch the menu only when it changed (replacing it closes an open menu on Linux).
  let latest = first;
  let shownMenu = '';
  let shownTooltip = '';
  const render = (): void => {
    const state = latest;
    const model = buildTrayMenu(state, verdicts);
    const menuKey = JSON.stringify(model);
    if (menuKey !== shownMenu) {
      shownMenu = menuKey;
      tray.setContextMenu(Menu.buildFromTemplate(template(model, act)));
    }
    const tooltip = trayTooltip(state);
    if (tooltip !== shownTooltip) {
      shownTooltip = tooltip;
      tray.setToolTip(tooltip);
    }
    const next = trayIconState(state);
    if (next !== icon) {
      icon = next;
      tray.setImage(imageFor(icon));
    }
  };
  const rebuild = throttle(render, REBUILD_INTERVAL_MS, realTimers);
  render();
  const unsubscribe = core.subscribe((event) => {
    if (event.type !== 'state') return;
    latest = event.state;
    rebuild.request();
  });

  return {
    refresh: () => rebuild.request(),
    destroy() {
      unsubscribe();
      rebuild.cancel();
      tray.destroy();
    },
  };
}
