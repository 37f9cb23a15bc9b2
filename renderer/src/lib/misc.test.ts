import { describe, expect, it } from 'vitest';
import { peerColour, slotHue, SLOT_COUNT } from './colors.js';
import { backoffDelayMs, connectionWords, parsePastedAddress } from './connection.js';
import { agoWords, canKill, canStop, cardState, crashWords, engineForProfile } from './engine-state.js';
import { pacingSummary, pressureTone, shareSegments } from './pacing.js';
import { takeToken, tokenFromFragment, TOKEN_STORAGE_KEY } from './token.js';
import { viewForShortcut, viewFromHash, viewLabel, VIEWS } from './views.js';
import { deviceNoun, memoryNoun } from './vram.js';
import { engineOfPeer, tokenRate, TOKEN_RATE_LABEL } from './token-rate.js';
import { deviceView, engineView, peerRow } from '../test/fixtures.js';

describe('peer colours', () => {
  it('gives each of the 16 slots its own hue, 22.5° apart at least, neighbours far apart', () => {
    const hues = Array.from({ length: SLOT_COUNT }, (_, slot) => slotHue(slot));
    const sorted = [...hues].sort((a, b) => a - b);
    const gaps = sorted.map((h, i) => ((sorted[(i + 1) % SLOT_COUNT] ?? 0) - h + 360) % 360);
    expect(Math.min(...gaps)).toBeCloseTo(22.5, 6);
    for (let slot = 0; slot < SLOT_COUNT - 1; slot++) {
      const d = Math.abs(slotHue(slot) - slotHue(slot + 1)) % 360;
      expect(Math.min(d, 360 - d)).toBeGreaterThan(60);
    }
    expect(peerColour(3)).toEqual(peerColour(3));
    expect(peerColour(-1).solid).toMatch(/^hsl\(/);
    expect(peerColour(2).solid).not.toBe(peerColour(3).solid);
  });
});

describe('pacing summary and shares', () => {
  it('reads alone, idle or the peers and period', () => {
    expect(pacingSummary(deviceView())).toBe('alone: full speed');
    const three = deviceView({
      peers: [peerRow({ slot: 0 }), peerRow({ slot: 1 }), peerRow({ slot: 2 }), peerRow({ slot: 3, active: false })],
      schedule: { periodUs: 120_000, windows: [] },
    });
    expect(pacingSummary(three)).toBe('3 active peers · period 120 ms');
    expect(pacingSummary(deviceView({ peers: [peerRow({ active: false })], schedule: null }))).toBe('all peers idle');
    expect(pacingSummary(deviceView({ peers: [], schedule: null }))).toBe('no peers');
    expect(pressureTone('CRITICAL')).toBe('bad');
  });

  it('stacks active shares to exactly 100 %', () => {
    const segments = shareSegments([
      { slot: 2, name: 'b', sharePct: 33.33, active: true },
      { slot: 0, name: 'a', sharePct: 33.33, active: true },
      { slot: 1, name: 'idle', sharePct: 0, active: false },
      { slot: 3, name: 'c', sharePct: 33.33, active: true },
    ]);
    expect(segments.map((s) => s.slot)).toEqual([0, 2, 3]);
    expect(segments.reduce((sum, s) => sum + s.pct, 0)).toBeCloseTo(100, 9);
    expect(shareSegments([{ slot: 0, name: 'x', sharePct: Number.NaN, active: true }])).toEqual([]);
  });
});

describe('card state', () => {
  it('reads each engine state', () => {
    expect(cardState(null, false).label).toBe('stopped');
    expect(cardState(null, true).label).toBe('planning…');
    expect(cardState(engineView({ state: 'loading', progressPct: 10 }), false, 42)).toMatchObject({ label: 'loading 42 %', progressPct: 42 });
    expect(cardState(engineView({ state: 'loading', progressPct: 10 }), false).label).toBe('loading 10 %');
    expect(cardState(engineView({ state: 'running', busy: true }), false).label).toBe('running');
    expect(cardState(engineView({ state: 'running', busy: false }), false).label).toBe('idle');
    expect(cardState(engineView({ state: 'crashed', exitCode: 3 }), false).label).toBe('crashed (exit code 3)');
    expect(cardState(engineView({ state: 'crashed', exitCode: null, exitSignal: 'SIGKILL' }), false).label).toBe('crashed (killed by SIGKILL)');
    expect(cardState(engineView({ state: 'running' }), true).label).toBe('running');
  });

  it('follows the live engine of a profile and offers stop/kill only while it lives', () => {
    const old = engineView({ id: 'a', state: 'crashed', startedAtUs: 1 });
    const live = engineView({ id: 'b', state: 'running', startedAtUs: 0 });
    expect(engineForProfile('qwen-chat', [old, live])?.id).toBe('b');
    expect(engineForProfile('qwen-chat', [old])?.id).toBe('a');
    expect(engineForProfile('other', [old, live])).toBeNull();
    expect(canStop(live)).toBe(true);
    expect(canStop(old)).toBe(false);
    expect(canKill(engineView({ state: 'stopping' }))).toBe(true);
  });
});

describe('backoff', () => {
  it('doubles from the first delay up to the cap', () => {
    expect([0, 1, 2, 3, 4, 5, 6].map((n) => backoffDelayMs(n))).toEqual([250, 500, 1000, 2000, 4000, 5000, 5000]);
    expect(backoffDelayMs(1000)).toBe(5000);
    expect(backoffDelayMs(-3)).toBe(250);
  });
});

describe('token', () => {
  const env = (hash: string, stored: string | null = null) => {
    const storage = new Map<string, string>(stored === null ? [] : [[TOKEN_STORAGE_KEY, stored]]);
    const replaced: string[] = [];
    return {
      replaced,
      storage,
      env: {
        location: { hash, pathname: '/', search: '?x=1' },
        storage: { getItem: (k: string) => storage.get(k) ?? null, setItem: (k: string, v: string) => void storage.set(k, v) },
        history: { state: null, replaceState: (_s: unknown, _t: string, url?: string | URL | null) => void replaced.push(String(url)) },
      },
    };
  };

  it('reads the fragment, stores it, and removes it from the address bar', () => {
    const e = env('#token=abc123');
    expect(takeToken(e.env)).toBe('abc123');
    expect(e.storage.get(TOKEN_STORAGE_KEY)).toBe('abc123');
    expect(e.replaced).toEqual(['/?x=1']);
  });

  it('falls back to the stored token, or null', () => {
    const stored = env('', 'kept');
    expect(takeToken(stored.env)).toBe('kept');
    expect(stored.replaced).toEqual([]);
    expect(takeToken(env('').env)).toBeNull();
    expect(tokenFromFragment('#view=gpu&token=t2')).toBe('t2');
    expect(tokenFromFragment('#token=')).toBeNull();
  });
});

describe('views', () => {
  it('reads a view from the address and from Alt+digit', () => {
    expect(viewFromHash('#timeline')).toBe('timeline');
    expect(viewFromHash('#token=abc')).toBeNull();
    expect(viewFromHash('')).toBeNull();
    expect(viewForShortcut({ altKey: true, ctrlKey: false, metaKey: false, key: '4' })).toBe('gpu');
    expect(viewForShortcut({ altKey: false, ctrlKey: false, metaKey: false, key: '4' })).toBeNull();
    expect(viewForShortcut({ altKey: true, ctrlKey: false, metaKey: false, key: '9' })).toBeNull();
  });
});

describe('crash words', () => {
  it('says what killed it and how long ago', () => {
    const exitedAtUs = 1_700_000_000_000_000;
    expect(crashWords(engineView({ state: 'crashed', exitSignal: 'SIGKILL', exitedAtUs }), exitedAtUs / 1000 + 400)).toBe('crashed (SIGKILL) · 0.4 s ago');
    expect(crashWords(engineView({ state: 'crashed', exitCode: 3, exitedAtUs }), exitedAtUs / 1000 + 42_000)).toBe('crashed (exit code 3) · 42 s ago');
    expect(crashWords(engineView({ state: 'crashed', exitCode: 3, exitedAtUs: null }), 0)).toBe('crashed (exit code 3)');
    expect(agoWords(-5)).toBe('0.0 s ago');
    expect(agoWords(180_000)).toBe('3 min ago');
  });
});

describe('a refused token', () => {
  it('says so in the top bar', () => {
    expect(connectionWords({ state: 'refused', detail: 'UNAUTHORIZED: x', retryAtMs: null })).toBe('token refused');
  });

  it('takes the address serve printed and explains anything else', () => {
    expect(parsePastedAddress(' http://127.0.0.1:7787/#token=abc ')).toEqual({ ok: true, origin: 'http://127.0.0.1:7787', token: 'abc' });
    expect(parsePastedAddress('http://[::1]:9000/#peers&token=t-2')).toEqual({ ok: true, origin: 'http://[::1]:9000', token: 't-2' });
    const refusals = ['', 'abc', 'javascript:alert(1)#token=x', 'http://127.0.0.1:7787/', 'http://127.0.0.1:7787/?token=abc'].map((text) => parsePastedAddress(text));
    for (const r of refusals) expect(r.ok).toBe(false);
    expect(refusals.map((r) => (r.ok ? '' : r.message))).toEqual([
      expect.stringContaining('paste the address'),
      expect.stringContaining('not an address'),
      expect.stringContaining('javascript:'),
      expect.stringContaining('no token'),
      expect.stringContaining('no token'),
    ]);
  });
});

describe('the host CPU as a device', () => {
  it('is a CPU with memory, never a GPU with VRAM, in every view name', () => {
    expect(deviceNoun({ key: 'cpu-0' })).toBe('CPU');
    expect(deviceNoun({ key: 'GPU-1', source: 'nvml' })).toBe('GPU');
    expect(deviceNoun(null)).toBe('GPU');
    expect(memoryNoun({ key: 'cpu-0' })).toBe('Memory');
    const gpuView = VIEWS.find((v) => v.id === 'gpu');
    if (gpuView === undefined) throw new Error('no device view');
    expect(viewLabel(gpuView, 'CPU')).toBe('CPU');
    expect(viewLabel(gpuView, 'GPU')).toBe('GPU');
    expect(VIEWS.filter((v) => v.id !== 'gpu').map((v) => viewLabel(v, 'CPU'))).toEqual(['Peers', 'Timeline', 'Models', 'Settings']);
  });
});

describe('tokens per second', () => {
  it('is one figure with one name, of the engine behind the peer (by its id, not its slot)', () => {
    const engines = [engineView({ id: 'a', slot: 0, tokensPerSecond: 57.4 }), engineView({ id: 'b', slot: 1, tokensPerSecond: 20.5 })];
    expect(tokenRate(engineOfPeer({ engineId: 'b' }, engines))).toEqual({ text: '20.5', title: expect.stringContaining('last 2 s') });
    expect(engineOfPeer({ engineId: null }, engines)).toBeNull();
    expect(engineOfPeer(undefined, engines)).toBeNull();
    expect(tokenRate(null).text).toBe('—');
    expect(tokenRate(engineView({ id: 'c', kind: 'command', tokensPerSecond: null })).title).toContain('no token counter');
    expect(TOKEN_RATE_LABEL).toBe('tok/s');
  });
});
