import { describe, expect, it } from 'vitest';
import type { PlacementPlan, Verdict } from '../../electron/core/contract.js';
import { throttle, type ThrottleTimers } from '../../electron/shell/throttle.js';
import { buildTrayMenu, failureText, formatWeight, headerLine, pacingWords, refusalText, type TrayMenuItem } from '../../electron/shell/tray-menu.js';
import { ApiError } from '../../electron/core/contract.js';
import { device, engine, peer, sketchState } from './shell-state.js';

const labels = (items: readonly TrayMenuItem[]): string[] => items.map((item) => (item.type === 'separator' ? '---' : item.label));
const find = (items: readonly TrayMenuItem[], start: string): TrayMenuItem => {
  const found = items.find((item) => item.label.startsWith(start));
  if (found === undefined) throw new Error(`no item starting with ${start}: ${labels(items).join(' | ')}`);
  return found;
};
const submenuOf = (item: TrayMenuItem): TrayMenuItem[] => {
  if (item.submenu === null) throw new Error(`${item.label} has no submenu`);
  return item.submenu;
};

describe('tray menu', () => {
  it('lays out the UX sketch: header, a row per peer, launch, lab pause, dashboard, quit', () => {
    const menu = buildTrayMenu(sketchState());
    expect(labels(menu)).toEqual([
      'GPU Share — RTX 4090 · pacing 3 peers · period 120 ms',
      '---',
      '● qwen-chat  50%',
      '● coder  25%',
      '○ embed (idle)  0%',
      '◌ llamafile (peer)  25%  (foreign: read-only)',
      '---',
      'Launch',
      'Pause lab work',
      '---',
      'Open dashboard…',
      'Quit GPU Share',
    ]);
    expect(menu[0]?.enabled).toBe(false);
  });

  it('gives a managed peer Weight ▸ 0.25 · 0.5 · 1 · 2 · 4 (the slider\'s marks) with its weight checked, Stop and Kill', () => {
    const row = find(buildTrayMenu(sketchState()), '● qwen-chat');
    expect(row.type).toBe('submenu');
    const actions = submenuOf(row);
    expect(labels(actions)).toEqual(['Weight', 'Stop', 'Kill']);
    const weights = submenuOf(find(actions, 'Weight'));
    expect(weights.map((w) => [w.label, w.type, w.checked])).toEqual([
      ['0.25', 'radio', false],
      ['0.5', 'radio', false],
      ['1', 'radio', false],
      ['2', 'radio', true],
      ['4', 'radio', false],
    ]);
    expect(weights[4]?.action).toEqual({ kind: 'setWeight', engineId: 'qwen-chat-1', weight: 4 });
    expect(find(actions, 'Stop').action).toEqual({ kind: 'stop', engineId: 'qwen-chat-1' });
    expect(find(actions, 'Kill').action).toEqual({ kind: 'kill', engineId: 'qwen-chat-1' });
  });

  it('shows a weight set elsewhere as checked "(current)", between the presets, not clickable', () => {
    const state = sketchState();
    const first = state.engines[0];
    if (first === undefined) throw new Error('fixture');
    first.weight = 1.5;
    const weights = submenuOf(find(submenuOf(find(buildTrayMenu(state), '● qwen-chat')), 'Weight'));
    expect(labels(weights)).toEqual(['0.25', '0.5', '1', '1.5 (current)', '2', '4']);
    const current = find(weights, '1.5');
    expect([current.checked, current.enabled, current.action]).toEqual([true, false, null]);
    expect(weights.filter((w) => w.checked)).toHaveLength(1);
  });

  it('matches a registry f32 weight to its preset', () => {
    const state = sketchState();
    state.engines = [];
    const p = state.devices[0]?.peers[1];
    if (p === undefined) throw new Error('fixture');
    p.weight = Math.fround(0.5);
    const weights = submenuOf(find(submenuOf(find(buildTrayMenu(state), '● coder')), 'Weight'));
    expect(find(weights, '0.5').checked).toBe(true);
  });

  it('offers nothing on a foreign peer', () => {
    const row = find(buildTrayMenu(sketchState()), '◌ llamafile');
    expect([row.type, row.enabled, row.submenu, row.action]).toEqual(['normal', false, null, null]);
  });

  it('disables Stop while an engine is stopping, keeps Kill', () => {
    const state = sketchState();
    const coder = state.engines[1];
    if (coder === undefined) throw new Error('fixture');
    coder.state = 'stopping';
    const actions = submenuOf(find(buildTrayMenu(state), '● coder'));
    expect(find(actions, 'Stop').enabled).toBe(false);
    expect(find(actions, 'Weight').enabled).toBe(false);
    expect(find(actions, 'Kill').enabled).toBe(true);
  });

  it('lists an engine that is loading before it holds a slot, with its progress', () => {
    const state = sketchState();
    state.engines.push(engine('big-model-1', { state: 'loading', progressPct: 42.4, profileId: 'big-model', name: 'Big model' }));
    const menu = buildTrayMenu(state);
    const row = find(menu, '◌ Big model (loading 42%)');
    expect(labels(submenuOf(row))).toEqual(['Weight', 'Stop', 'Kill']);
    expect(labels(menu).indexOf('◌ Big model (loading 42%)')).toBe(6);
  });

  it('says "alone: full speed" for one active peer and "idle" for none', () => {
    expect(pacingWords(device({ peers: [peer(0, 'a', { active: true, sharePct: 100 })], schedule: { periodUs: 80_000, windows: [] } }))).toBe('alone: full speed');
    expect(pacingWords(device({ peers: [peer(0, 'a')] }))).toBe('idle');
    expect(pacingWords(device())).toBe('idle');
  });

  it('adds the pressure to the header when it is not NORMAL', () => {
    expect(headerLine(device({ pressure: 'HIGH' }))).toBe('GPU Share — RTX 4090 · idle · pressure HIGH');
  });

  it('says so when a device has no engines, and when there is no device', () => {
    const state = sketchState();
    state.devices = [device()];
    expect(labels(buildTrayMenu(state))).toContain('No engines on this device');
    state.devices = [];
    expect(labels(buildTrayMenu(state))[0]).toBe('GPU Share — no device found');
  });

  it('launches per profile, shows the last verdict when it was not ADMIT, and running profiles greyed', () => {
    const verdicts = new Map<string, Verdict>([
      ['big-model', 'REJECT_CAPACITY'],
      ['coder', 'QUEUE'],
    ]);
    const state = sketchState();
    state.engines = state.engines.filter((e) => e.id !== 'coder-1');
    state.profiles.push({ ...state.profiles[0]!, id: 'admitted', name: 'admitted' });
    verdicts.set('admitted', 'ADMIT');
    const launch = submenuOf(find(buildTrayMenu(state, verdicts), 'Launch'));
    expect(labels(launch)).toEqual(['qwen-chat (running)', 'coder (last plan: QUEUE)', 'embed (running)', 'Big model (last plan: REJECT_CAPACITY)', 'admitted']);
    expect(find(launch, 'qwen-chat').enabled).toBe(false);
    expect(find(launch, 'Big model').action).toEqual({ kind: 'launch', profileId: 'big-model' });
  });

  it('points to the dashboard when there are no profiles', () => {
    const state = sketchState();
    state.profiles = [];
    const launch = submenuOf(find(buildTrayMenu(state), 'Launch'));
    expect(launch).toHaveLength(1);
    expect(launch[0]?.enabled).toBe(false);
  });

  it('toggles lab pause', () => {
    const state = sketchState();
    const off = find(buildTrayMenu(state), 'Pause lab work');
    expect([off.type, off.checked, off.action]).toEqual(['checkbox', false, { kind: 'labPause', paused: true }]);
    state.policy.labPaused = true;
    const on = find(buildTrayMenu(state), 'Pause lab work');
    expect([on.checked, on.action]).toEqual([true, { kind: 'labPause', paused: false }]);
  });

  it('ends with Open dashboard… and Quit GPU Share', () => {
    const menu = buildTrayMenu(sketchState());
    expect(menu.at(-2)?.action).toEqual({ kind: 'openDashboard' });
    expect(menu.at(-1)?.action).toEqual({ kind: 'quit' });
  });

  it('never shows NaN', () => {
    const state = sketchState();
    const p = state.devices[0]?.peers[0];
    if (p === undefined) throw new Error('fixture');
    p.sharePct = Number.NaN;
    expect(labels(buildTrayMenu(state)).join('\n')).not.toMatch(/NaN|undefined/);
    expect(formatWeight(Number.NaN)).toBe('—');
  });

  it('words failures with their code, and refusals with their reasons', () => {
    expect(failureText(new ApiError('NOT_FOUND', 'no engine x'))).toBe('NOT_FOUND: no engine x');
    expect(failureText(new Error('boom'))).toBe('boom');
    const plan = { verdict: 'REJECT_CAPACITY', reasons: [{ code: 'INSUFFICIENT_CAPACITY', requestedBytes: 6 * 1024 ** 3, schedulableBytes: 3 * 1024 ** 3, freeableBytes: 0, unmanagedExternalBytes: 5 * 1024 ** 3 }] } as unknown as PlacementPlan;
    expect(refusalText('coder', plan)).toBe('coder was not launched: REJECT_CAPACITY — INSUFFICIENT_CAPACITY: needs 6.00 GiB, 3.00 GiB schedulable, 0 B freeable; 5.00 GiB used by other processes');
  });
});

describe('menu rebuild throttle', () => {
  function fakeTimers(): ThrottleTimers & { advance(ms: number): void } {
    let now = 0;
    let timers: { at: number; callback: () => void; id: number }[] = [];
    let nextId = 1;
    return {
      now: () => now,
      setTimeout(callback, ms) {
        const id = nextId++;
        timers.push({ at: now + ms, callback, id });
        return id;
      },
      clearTimeout(handle) {
        timers = timers.filter((t) => t.id !== handle);
      },
      advance(ms) {
        now += ms;
        const due = timers.filter((t) => t.at <= now);
        timers = timers.filter((t) => t.at > now);
        for (const t of due) t.callback();
      },
    };
  }

  it('runs at once, then at most once per interval, and never drops the last request', () => {
    const timers = fakeTimers();
    let runs = 0;
    const rebuild = throttle(() => runs++, 250, timers);
    rebuild.request();
    expect(runs).toBe(1);
    for (let i = 0; i < 10; i++) {
      timers.advance(20);
      rebuild.request();
    }
    expect(runs).toBe(1);
    timers.advance(50);
    expect(runs).toBe(2);
    // 40 requests over 1 s (one per 25 ms): at most 4 rebuilds a second.
    for (let i = 0; i < 40; i++) {
      rebuild.request();
      timers.advance(25);
    }
    expect(runs).toBeLessThanOrEqual(2 + 4);
    expect(runs).toBeGreaterThanOrEqual(2 + 3);
  });

  it('runs nothing after cancel', () => {
    const timers = fakeTimers();
    let runs = 0;
    const rebuild = throttle(() => runs++, 250, timers);
    rebuild.request();
    rebuild.request();
    rebuild.cancel();
    timers.advance(1_000);
    expect(runs).toBe(1);
  });
});
