import { describe, expect, it } from 'vitest';
import { pathToFileURL } from 'node:url';
import { API_METHODS, ApiError, SHELL_METHODS, type ApiErrorBody, type ApiMethod, type GpuShareApi, type PlacementPlan, type ShellExtras, type Verdict } from '../../electron/core/contract.js';
import { answer, callApi, callShell, errorBody, senderProblem, type IpcReply, type SenderFacts, type TrustedRenderer } from '../../electron/shell/ipc-guard.js';

const INDEX = '/opt/GPU Share/resources/app.asar/dist/renderer/index.html';
const INDEX_URL = pathToFileURL(INDEX).href;
const trusted: TrustedRenderer = { webContentsIds: () => new Set([7]), location: { kind: 'file', indexPath: INDEX } };
const ownWindow: SenderFacts = { webContentsId: 7, frameUrl: `${INDEX_URL}#/peers`, isMainFrame: true };

/** An API that records what reached it. */
function recordingApi(calls: { method: string; args: unknown[] }[], verdict: Verdict = 'ADMIT'): Omit<GpuShareApi, 'subscribe'> {
  const plan = { verdict } as PlacementPlan;
  const record =
    <T>(method: ApiMethod, result: T) =>
    (...args: unknown[]): Promise<T> => {
      calls.push({ method, args });
      return Promise.resolve(result);
    };
  return {
    getState: record('getState', null as never),
    plan: record('plan', plan),
    launch: record('launch', { plan, engine: null }),
    stopEngine: record('stopEngine', null as never),
    killEngine: record('killEngine', null as never),
    setWeight: record('setWeight', null as never),
    listProfiles: record('listProfiles', []),
    createProfile: record('createProfile', null as never),
    updateProfile: record('updateProfile', null as never),
    deleteProfile: record('deleteProfile', undefined),
    estimateModel: record('estimateModel', null as never),
    setPolicy: record('setPolicy', null as never),
    listPlans: record('listPlans', []),
    listExecutables: record('listExecutables', []),
    listLocalModels: record('listLocalModels', null as never),
  };
}

const VALID_ARGS: Record<ApiMethod, unknown[]> = {
  getState: [],
  plan: [{ profileId: 'coder' }],
  launch: [{ profileId: 'coder' }],
  stopEngine: ['coder-1'],
  killEngine: ['coder-1'],
  setWeight: ['coder-1', 2],
  listProfiles: [],
  createProfile: [{ name: 'coder', capabilities: ['code'], engineKind: 'builtin', contextSize: 4096, priority: 'interactive' }],
  updateProfile: ['coder', { contextSize: 8192 }],
  deleteProfile: ['coder'],
  estimateModel: ['/models/coder.gguf'],
  setPolicy: [{ labPaused: true }],
  listPlans: [],
  listExecutables: [],
  listLocalModels: [],
};

async function refusal(run: () => Promise<unknown>): Promise<ApiErrorBody['error']> {
  const reply = await answer(ownWindow, trusted, run);
  if (!('error' in reply)) throw new Error(`expected an error, got ${JSON.stringify(reply)}`);
  return reply.error;
}

describe('IPC sender check', () => {
  it('accepts the app window on its own page (any route in the hash)', () => {
    expect(senderProblem(ownWindow, trusted)).toBeNull();
    expect(senderProblem({ ...ownWindow, frameUrl: INDEX_URL }, trusted)).toBeNull();
  });

  it('refuses other webContents, subframes, gone frames and other pages', () => {
    expect(senderProblem({ ...ownWindow, webContentsId: 8 }, trusted)).toMatch(/not a window of this app/);
    expect(senderProblem({ ...ownWindow, isMainFrame: false }, trusted)).toMatch(/subframe/);
    expect(senderProblem({ ...ownWindow, frameUrl: null }, trusted)).toMatch(/gone/);
    for (const url of ['https://example.com/', 'file:///etc/passwd', pathToFileURL('/opt/GPU Share/resources/app.asar/dist/renderer/other.html').href, 'http://127.0.0.1:7787/', 'not a url', 'devtools://devtools/bundled/inspector.html']) {
      expect(senderProblem({ ...ownWindow, frameUrl: url }, trusted), url).toMatch(/is not the app's page/);
    }
  });

  it('accepts a development origin when that is where the renderer comes from', () => {
    const dev: TrustedRenderer = { webContentsIds: () => new Set([7]), location: { kind: 'origin', origin: 'http://127.0.0.1:5173' } };
    expect(senderProblem({ ...ownWindow, frameUrl: 'http://127.0.0.1:5173/#/gpu' }, dev)).toBeNull();
    expect(senderProblem({ ...ownWindow, frameUrl: 'http://127.0.0.1:5174/' }, dev)).not.toBeNull();
    expect(senderProblem(ownWindow, dev)).not.toBeNull();
  });

  it('answers FORBIDDEN before the call or its argument checks run', async () => {
    let ran = false;
    const reply = await answer({ ...ownWindow, webContentsId: 99 }, trusted, () => {
      ran = true;
      return Promise.resolve('value');
    });
    expect(reply).toEqual({ error: { code: 'FORBIDDEN', message: expect.stringMatching(/^refused: webContents 99/) } });
    expect(ran).toBe(false);
  });
});

describe('IPC arguments', () => {
  it('passes every API method its checked arguments', async () => {
    const calls: { method: string; args: unknown[] }[] = [];
    const api = recordingApi(calls);
    for (const method of API_METHODS) {
      const reply: IpcReply = await answer(ownWindow, trusted, () => callApi(api, method, VALID_ARGS[method]));
      expect(reply, method).toHaveProperty('value');
    }
    expect(calls.map((c) => c.method)).toEqual([...API_METHODS]);
    expect(calls.find((c) => c.method === 'setWeight')?.args).toEqual(['coder-1', 2]);
    expect(calls.find((c) => c.method === 'setPolicy')?.args).toEqual([{ labPaused: true }]);
  });

  it('names the field that is wrong', async () => {
    const api = recordingApi([]);
    const cases: [ApiMethod, unknown[], string][] = [
      ['setWeight', ['coder-1', 1000], 'weight'],
      ['setWeight', ['coder-1', Number.NaN], 'weight'],
      ['setWeight', ['coder-1', '2'], 'weight'],
      ['setWeight', ['../etc', 2], 'id'],
      ['stopEngine', [42], 'id'],
      ['killEngine', ['Coder 1'], 'id'],
      ['plan', [{}], 'profileId'],
      ['launch', ['coder'], 'body'],
      ['setPolicy', [{ labPaused: 'yes' }], 'labPaused'],
      ['setPolicy', [{ reboot: true }], 'reboot'],
      ['createProfile', [null], 'body'],
      ['updateProfile', ['', {}], 'id'],
      ['updateProfile', ['coder', []], 'body'],
      ['deleteProfile', [undefined], 'id'],
      ['estimateModel', [''], 'modelPath'],
      ['getState', ['extra'], 'arguments'],
      ['setWeight', ['coder-1'], 'arguments'],
    ];
    for (const [method, args, field] of cases) {
      const error = await refusal(() => callApi(api, method, args));
      expect(error.code, `${method}(${JSON.stringify(args)})`).toBe('BAD_REQUEST');
      expect(error.field, `${method}(${JSON.stringify(args)})`).toBe(field);
      expect(error.message.startsWith(`${field}: `)).toBe(true);
    }
  });

  it('checks the shell methods too', async () => {
    const calls: string[] = [];
    const shell: ShellExtras = {
      pickModelFile: async () => (calls.push('pickModelFile'), '/m.gguf'),
      openDataFolder: async () => void calls.push('openDataFolder'),
      getLaunchAtLogin: async () => (calls.push('getLaunchAtLogin'), false),
      setLaunchAtLogin: async (enabled) => (calls.push(`setLaunchAtLogin ${enabled}`), enabled),
    };
    for (const method of SHELL_METHODS) {
      const reply = await answer(ownWindow, trusted, () => callShell(shell, method, method === 'setLaunchAtLogin' ? [true] : []));
      expect(reply, method).toHaveProperty('value');
    }
    expect(calls).toEqual(['pickModelFile', 'openDataFolder', 'getLaunchAtLogin', 'setLaunchAtLogin true']);
    const error = await refusal(() => callShell(shell, 'setLaunchAtLogin', ['yes']));
    expect([error.code, error.field]).toEqual(['BAD_REQUEST', 'enabled']);
  });
});

describe('IPC replies', () => {
  it('returns core errors as their body, anything else as INTERNAL', async () => {
    const notFound = new ApiError('NOT_FOUND', 'no engine coder-9', { field: 'id' });
    expect(await refusal(() => Promise.reject(notFound))).toEqual({ code: 'NOT_FOUND', message: 'no engine coder-9', field: 'id' });
    expect(await refusal(() => Promise.reject(new TypeError('x is undefined')))).toEqual({ code: 'INTERNAL', message: 'x is undefined' });
    expect(errorBody('plain')).toEqual({ error: { code: 'INTERNAL', message: 'plain' } });
  });

  it('tells the observer each plan verdict by the profile asked for', async () => {
    const seen: [string, Verdict][] = [];
    await callApi(recordingApi([], 'QUEUE'), 'plan', [{ profileId: 'coder' }], (id, verdict) => seen.push([id, verdict]));
    await callApi(recordingApi([], 'REJECT_CAPACITY'), 'launch', [{ profileId: 'big' }], (id, verdict) => seen.push([id, verdict]));
    expect(seen).toEqual([
      ['coder', 'QUEUE'],
      ['big', 'REJECT_CAPACITY'],
    ]);
  });
});
