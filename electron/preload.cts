/**
 * The dashboard's preload: `window.gpuShare` (GpuShareApi over IPC) and `window.gpuShareShell`
 * (ShellExtras), through contextBridge. CommonJS, because a sandboxed preload cannot be an ES
 * module, and it may require nothing but 'electron' at run time: the contract's channel names are
 * repeated here, and test/unit/preload-channels.test.ts keeps them equal to contract.ts's.
 *
 * Every invoke answers `{value}` or `{error:{code,message,…}}` (ipc-guard.ts). An error is
 * rejected as plain data, `{name:'ApiError', code, message, field?, …}`, not as an Error:
 * contextBridge keeps only the message of an Error crossing into the page, and the dashboard
 * needs the code (contract `apiErrorFrom` turns the data back into an ApiError).
 */
import type { ApiErrorBody, ApiMethod, AppEvent, GpuShareApi, ShellExtras, ShellMethod } from './core/contract.js' with { 'resolution-mode': 'import' };
import type { IpcReply } from './shell/ipc-guard.js' with { 'resolution-mode': 'import' };
import electron = require('electron');

const { contextBridge, ipcRenderer } = electron;

const IPC_INVOKE_PREFIX = 'gpu-share:';
const IPC_EVENT_CHANNEL = 'gpu-share:event';
const SHELL_INVOKE_PREFIX = 'gpu-share-shell:';
const PRELOAD_API_GLOBAL = 'gpuShare';
const PRELOAD_SHELL_GLOBAL = 'gpuShareShell';

/** The error as data the page can read in full (see above). */
type ApiErrorData = ApiErrorBody['error'] & { name: 'ApiError' };

async function invoke(channel: string, args: readonly unknown[]): Promise<unknown> {
  const reply = (await ipcRenderer.invoke(channel, ...args)) as IpcReply;
  if ('error' in reply) {
    const data: ApiErrorData = { name: 'ApiError', ...reply.error };
    return Promise.reject(data);
  }
  return reply.value;
}

function callApi<M extends ApiMethod>(method: M, ...args: Parameters<GpuShareApi[M]>): ReturnType<GpuShareApi[M]> {
  return invoke(`${IPC_INVOKE_PREFIX}${method}`, args) as ReturnType<GpuShareApi[M]>;
}

function callShell<M extends ShellMethod>(method: M, ...args: Parameters<ShellExtras[M]>): ReturnType<ShellExtras[M]> {
  return invoke(`${SHELL_INVOKE_PREFIX}${method}`, args) as ReturnType<ShellExtras[M]>;
}

const api: GpuShareApi = {
  getState: () => callApi('getState'),
  subscribe(listener) {
    // The page gets the event alone, never Electron's IPC event (it would reach the sender).
    const forward = (_event: unknown, payload: AppEvent): void => listener(payload);
    ipcRenderer.on(IPC_EVENT_CHANNEL, forward);
    return () => {
      ipcRenderer.removeListener(IPC_EVENT_CHANNEL, forward);
    };
  },
  plan: (request) => callApi('plan', request),
  launch: (request) => callApi('launch', request),
  stopEngine: (engineId) => callApi('stopEngine', engineId),
  killEngine: (engineId) => callApi('killEngine', engineId),
  setWeight: (engineId, weight) => callApi('setWeight', engineId, weight),
  listProfiles: () => callApi('listProfiles'),
  createProfile: (input) => callApi('createProfile', input),
  updateProfile: (id, patch) => callApi('updateProfile', id, patch),
  deleteProfile: (id) => callApi('deleteProfile', id),
  estimateModel: (modelPath, options) => (options === undefined ? callApi('estimateModel', modelPath) : callApi('estimateModel', modelPath, options)),
  setPolicy: (patch) => callApi('setPolicy', patch),
  listPlans: () => callApi('listPlans'),
  listExecutables: () => callApi('listExecutables'),
  listLocalModels: () => callApi('listLocalModels'),
};

const shell: ShellExtras = {
  pickModelFile: () => callShell('pickModelFile'),
  openDataFolder: () => callShell('openDataFolder'),
  getLaunchAtLogin: () => callShell('getLaunchAtLogin'),
  setLaunchAtLogin: (enabled) => callShell('setLaunchAtLogin', enabled),
};

contextBridge.exposeInMainWorld(PRELOAD_API_GLOBAL, api);
contextBridge.exposeInMainWorld(PRELOAD_SHELL_GLOBAL, shell);
