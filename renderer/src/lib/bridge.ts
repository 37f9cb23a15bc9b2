/**
 * Which way this dashboard talks to the core, decided once at start: the preload's IPC bridge
 * inside Electron (`window.gpuShare`), else HTTP + server-sent events to the server that served
 * the page.
 */
import type { GpuShareApi, ShellExtras } from '../../../electron/core/contract.js';
import type { ConnectionStatus } from './connection.js';
import { HttpBridge } from './bridge-http.js';
import { takeToken } from './token.js';
import type { TimelineDebug } from './timeline-model.js';

declare global {
  interface Window {
    /** contract PRELOAD_API_GLOBAL: present inside Electron only. */
    gpuShare?: GpuShareApi;
    /** contract PRELOAD_SHELL_GLOBAL: present inside Electron only. */
    gpuShareShell?: ShellExtras;
    /** The timeline's last drawn model, for end-to-end tests. */
    __gpuShareTimeline?: TimelineDebug;
  }
}

export type Connection =
  | { kind: 'ipc'; api: GpuShareApi; shell: ShellExtras | null; onConnection(listener: (status: ConnectionStatus) => void): () => void; token: null }
  | { kind: 'http'; api: HttpBridge; shell: null; onConnection(listener: (status: ConnectionStatus) => void): () => void; token: string }
  /** A browser page opened without a token: nothing to talk with until the user opens the URL
   *  `gpu-share serve` printed. */
  | { kind: 'no-token' };

const IPC_LIVE: ConnectionStatus = { state: 'live', detail: null, retryAtMs: null };

export function pickBridge(win: Window): Connection {
  const ipc = win.gpuShare;
  if (ipc !== undefined) {
    return {
      kind: 'ipc',
      api: ipc,
      shell: win.gpuShareShell ?? null,
      // IPC to our own main process: there is no connection to lose.
      onConnection(listener) {
        listener(IPC_LIVE);
        return () => undefined;
      },
      token: null,
    };
  }
  const token = takeToken({ location: win.location, storage: win.sessionStorage, history: win.history });
  if (token === null) return { kind: 'no-token' };
  const api = new HttpBridge({ baseUrl: win.location.origin, token });
  return { kind: 'http', api, shell: null, onConnection: (listener) => api.onConnection(listener), token };
}
