/**
 * The preload is CommonJS and may require only 'electron' (a sandboxed preload can load nothing
 * else), so it repeats the contract's channel names. Here it runs, compiled as tsc compiles it,
 * against a recording stand-in for contextBridge and ipcRenderer: every method must invoke the
 * contract's channel, events must arrive alone, and errors must reach the page with their code.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';
import ts from 'typescript';
import {
  API_METHODS,
  ApiError,
  IPC_EVENT_CHANNEL,
  PRELOAD_API_GLOBAL,
  PRELOAD_SHELL_GLOBAL,
  SHELL_METHODS,
  apiErrorFrom,
  ipcChannel,
  shellChannel,
  type AppEvent,
  type GpuShareApi,
  type ShellExtras,
} from '../../electron/core/contract.js';

type Listener = (event: unknown, payload: unknown) => void;

interface LoadedPreload {
  exposed: Map<string, unknown>;
  required: string[];
  invoked: { channel: string; args: unknown[] }[];
  listeners: Map<string, Listener[]>;
  replyWith(reply: (channel: string, args: unknown[]) => unknown): void;
}

function loadPreload(): LoadedPreload {
  const source = readFileSync(new URL('../../electron/preload.cts', import.meta.url), 'utf8');
  const compiled = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 }, fileName: 'preload.cts' }).outputText;
  const exposed = new Map<string, unknown>();
  const required: string[] = [];
  const invoked: { channel: string; args: unknown[] }[] = [];
  const listeners = new Map<string, Listener[]>();
  let reply: (channel: string, args: unknown[]) => unknown = () => ({ value: null });
  const electron = {
    contextBridge: { exposeInMainWorld: (key: string, api: unknown) => exposed.set(key, api) },
    ipcRenderer: {
      invoke: async (channel: string, ...args: unknown[]) => {
        invoked.push({ channel, args });
        return reply(channel, args);
      },
      on: (channel: string, listener: Listener) => listeners.set(channel, [...(listeners.get(channel) ?? []), listener]),
      removeListener: (channel: string, listener: Listener) => listeners.set(channel, (listeners.get(channel) ?? []).filter((l) => l !== listener)),
    },
  };
  const module = { exports: {} };
  runInNewContext(compiled, {
    module,
    exports: module.exports,
    require: (name: string) => {
      required.push(name);
      if (name !== 'electron') throw new Error(`a sandboxed preload cannot require ${name}`);
      return electron;
    },
  });
  return { exposed, required, invoked, listeners, replyWith: (next) => (reply = next) };
}

describe('preload', () => {
  it('requires nothing but electron', () => {
    expect(loadPreload().required).toEqual(['electron']);
  });

  it("exposes the API and the shell extras under the contract's globals, with exactly their methods", () => {
    const { exposed } = loadPreload();
    expect([...exposed.keys()]).toEqual([PRELOAD_API_GLOBAL, PRELOAD_SHELL_GLOBAL]);
    expect(Object.keys(exposed.get(PRELOAD_API_GLOBAL) as object).sort()).toEqual([...API_METHODS, 'subscribe'].sort());
    expect(Object.keys(exposed.get(PRELOAD_SHELL_GLOBAL) as object).sort()).toEqual([...SHELL_METHODS].sort());
  });

  it("invokes each method on the contract's channel with its arguments, and resolves with the value", async () => {
    const preload = loadPreload();
    preload.replyWith((channel) => ({ value: `answer to ${channel}` }));
    const api = preload.exposed.get(PRELOAD_API_GLOBAL) as Record<string, (...args: unknown[]) => Promise<unknown>>;
    for (const method of API_METHODS) {
      const call = api[method];
      if (call === undefined) throw new Error(`no ${method}`);
      expect(await call('a', 2)).toBe(`answer to ${ipcChannel(method)}`);
    }
    const shell = preload.exposed.get(PRELOAD_SHELL_GLOBAL) as Record<string, (...args: unknown[]) => Promise<unknown>>;
    for (const method of SHELL_METHODS) await shell[method]?.(true);
    expect(preload.invoked.map((i) => i.channel)).toEqual([...API_METHODS.map(ipcChannel), ...SHELL_METHODS.map(shellChannel)]);
    // Each method passes its own parameters only: getState() sends nothing, plan(request) one.
    expect(preload.invoked[0]?.args).toEqual([]);
    expect(preload.invoked[1]?.args).toEqual(['a']);
    const typed = preload.exposed.get(PRELOAD_API_GLOBAL) as GpuShareApi;
    await typed.setWeight('coder-1', 4);
    expect(preload.invoked.at(-1)).toEqual({ channel: ipcChannel('setWeight'), args: ['coder-1', 4] });
    await (preload.exposed.get(PRELOAD_SHELL_GLOBAL) as ShellExtras).setLaunchAtLogin(false);
    expect(preload.invoked.at(-1)).toEqual({ channel: shellChannel('setLaunchAtLogin'), args: [false] });
  });

  it('rejects with plain data that keeps the code and the field, which apiErrorFrom makes an ApiError again', async () => {
    const preload = loadPreload();
    preload.replyWith(() => ({ error: { code: 'BAD_REQUEST', message: 'weight: must be a number from 0.01 to 100, got 1000', field: 'weight' } }));
    const api = preload.exposed.get(PRELOAD_API_GLOBAL) as GpuShareApi;
    const rejection: unknown = await api.setWeight('coder-1', 1000).then(
      () => null,
      (error: unknown) => error,
    );
    // Plain data crosses contextBridge whole (an Error would arrive with its message only).
    expect(rejection).not.toBeInstanceOf(Error);
    expect(rejection).toEqual({ name: 'ApiError', code: 'BAD_REQUEST', message: 'weight: must be a number from 0.01 to 100, got 1000', field: 'weight' });
    const error = apiErrorFrom(rejection);
    expect(error).toBeInstanceOf(ApiError);
    expect([error?.code, error?.details.field]).toEqual(['BAD_REQUEST', 'weight']);
  });

  it('delivers events alone on the event channel, and unsubscribes', () => {
    const preload = loadPreload();
    const api = preload.exposed.get(PRELOAD_API_GLOBAL) as GpuShareApi;
    const seen: unknown[] = [];
    const unsubscribe = api.subscribe((event) => seen.push(event));
    const listeners = preload.listeners.get(IPC_EVENT_CHANNEL) ?? [];
    expect(listeners).toHaveLength(1);
    const event: AppEvent = { type: 'progress', engineId: 'coder-1', pct: 42 };
    listeners[0]?.({ sender: 'the IPC event, which the page must not get' }, event);
    expect(seen).toEqual([event]);
    unsubscribe();
    expect(preload.listeners.get(IPC_EVENT_CHANNEL)).toEqual([]);
  });
});

describe('apiErrorFrom', () => {
  it('reads HTTP bodies, preload data and ApiErrors, and nothing else', () => {
    const original = new ApiError('NOT_ADMITTED', 'QUEUE', { verdict: 'QUEUE', reasons: ['WAIT_FOR_LEASES'] });
    expect(apiErrorFrom(original)).toBe(original);
    const fromBody = apiErrorFrom(original.toBody());
    expect([fromBody?.code, fromBody?.message, fromBody?.details]).toEqual(['NOT_ADMITTED', 'QUEUE', { verdict: 'QUEUE', reasons: ['WAIT_FOR_LEASES'] }]);
    for (const value of [null, 'BAD_REQUEST', new Error('x'), { code: 'BAD_REQUEST', message: 'no name' }, { error: { code: 'TEAPOT', message: 'x' } }, { name: 'ApiError', code: 'INTERNAL' }]) {
      expect(apiErrorFrom(value), JSON.stringify(value)).toBeNull();
    }
    expect(apiErrorFrom({ error: { code: 'CONFLICT', message: 'x', verdict: 'MAYBE', reasons: [1] } })?.details).toEqual({});
  });
});
