/**
 * The IPC side of the dashboard: one handler per API and shell method, each through ipc-guard
 * (sender first, then arguments), and the core's events pushed to the app's own windows only.
 */
import { ipcMain, type IpcMainInvokeEvent, type WebContents } from 'electron';
import { API_METHODS, IPC_EVENT_CHANNEL, SHELL_METHODS, ipcChannel, shellChannel, type ShellExtras } from '../core/contract.js';
import type { Core } from '../core/app-types.js';
import { answer, callApi, callShell, type PlanObserver, type SenderFacts, type TrustedRenderer } from './ipc-guard.js';
import { isAppRendererUrl } from './window-security.js';

export interface IpcOptions {
  core: Core;
  shell: ShellExtras;
  trusted: TrustedRenderer;
  /** Where events go: the app's windows' webContents. */
  windows(): WebContents[];
  /** Each plan's verdict by the profile asked for (the tray's Launch menu shows the last one). */
  onPlan: PlanObserver;
}

function senderFacts(event: IpcMainInvokeEvent): SenderFacts {
  const frame = event.senderFrame;
  return {
    webContentsId: event.sender.id,
    frameUrl: frame === null ? null : frame.url,
    // The top frame has no parent (frame objects are compared by what they are, not identity).
    isMainFrame: frame !== null && frame.parent === null,
  };
}

/** Registers the handlers and the event push; returns what undoes both. */
export function setupIpc(options: IpcOptions): () => void {
  const { core, shell, trusted, onPlan } = options;
  const channels: string[] = [];
  for (const method of API_METHODS) {
    const channel = ipcChannel(method);
    channels.push(channel);
    ipcMain.handle(channel, (event, ...args: unknown[]) =>
      answer(senderFacts(event), trusted, () => callApi(core, method, args, onPlan)),
    );
  }
  for (const method of SHELL_METHODS) {
    const channel = shellChannel(method);
    channels.push(channel);
    ipcMain.handle(channel, (event, ...args: unknown[]) => answer(senderFacts(event), trusted, () => callShell(shell, method, args)));
  }
  const unsubscribe = core.subscribe((event) => {
    for (const contents of options.windows()) {
      // Only to the app's page: a window that is somewhere else (it cannot navigate away, but it
      // may still be loading) gets nothing, and asks for the state once its page runs.
      if (!contents.isDestroyed() && trusted.webContentsIds().has(contents.id) && isAppRendererUrl(contents.getURL(), trusted.location)) contents.send(IPC_EVENT_CHANNEL, event);
    }
  });
  return () => {
    unsubscribe();
    for (const channel of channels) ipcMain.removeHandler(channel);
  };
}
