import { describe, expect, it } from 'vitest';
import { applyEvent, dismissNotice, initialModel, LOG_LINES_KEPT, NOTICE_MS, OVERSHOOTS_KEPT, tick, withNotice, type AppModel } from './app-model.js';
import { DEPARTED_VISIBLE_MS } from './age.js';
import { appState, deviceView, engineView, peerRow, placementPlan } from '../test/fixtures.js';

const T0 = 1_700_000_000_000_000;
const at = (wallMs: number, perfMs = wallMs): { wallMs: number; perfMs: number } => ({ wallMs, perfMs });

describe('applyEvent', () => {
  it('keeps a timeline sample per device per state, for the last 62 s (the longest zoom and a margin)', () => {
    let model = initialModel();
    for (let i = 0; i < 300; i++) model = applyEvent(model, { type: 'state', state: appState({ wallUs: T0 + i * 250_000 }) }, at(i * 250));
    const history = model.history['GPU-1234'] ?? [];
    expect(history.length).toBe(249);
    expect(history[history.length - 1]?.wallUs).toBe(T0 + 299 * 250_000);
    expect(history[0]?.peers).toEqual([{ slot: 0, name: 'qwen-chat', active: true, busyPct: 50, sharePct: 100 }]);
    expect(history[0]?.receivedAtMs).toBe(51 * 250);
  });

  it('restarts the history when the core clock steps back', () => {
    let model = applyEvent(initialModel(), { type: 'state', state: appState({ wallUs: T0 }) }, at(0));
    model = applyEvent(model, { type: 'state', state: appState({ wallUs: T0 - 5_000_000 }) }, at(1));
    expect(model.history['GPU-1234']?.map((s) => s.wallUs)).toEqual([T0 - 5_000_000]);
  });

  it('keeps a departed peer with a notice, and one notice for the aged-out event too', () => {
    const two = appState({ devices: [deviceView({ peers: [peerRow({ slot: 0, pid: 1 }), peerRow({ slot: 1, pid: 2, name: 'coder', heartbeatAgeMs: 2900 })] })] });
    const one = appState({ devices: [deviceView({ peers: [peerRow({ slot: 0, pid: 1 })] })] });
    let model = applyEvent(initialModel(), { type: 'state', state: two }, at(1000));
    model = applyEvent(model, { type: 'aged-out', gpuKey: 'GPU-1234', slot: 1, name: 'coder', pid: 2 }, at(1100));
    model = applyEvent(model, { type: 'state', state: one }, at(1200));
    expect(model.rows['GPU-1234']?.map((r) => [r.peer.slot, r.departedAtMs, r.departedHow])).toEqual([
      [0, null, null],
      [1, 1100, 'aged-out'],
    ]);
    expect(model.notices.map((n) => n.text)).toEqual(['"coder" (pid 2, slot 1) aged out: no heartbeat for 3 s']);
    model = tick(model, 1100 + DEPARTED_VISIBLE_MS);
    expect(model.rows['GPU-1234']).toHaveLength(1);
    expect(tick(model, 1100 + NOTICE_MS).notices).toEqual([]);
  });

  it('announces a peer whose heartbeat went stale and not one that left cleanly', () => {
    const withPeers = (peers: ReturnType<typeof peerRow>[]) => appState({ devices: [deviceView({ peers })] });
    let model = applyEvent(initialModel(), { type: 'state', state: withPeers([peerRow({ slot: 0, pid: 1, heartbeatAgeMs: 2800 }), peerRow({ slot: 1, pid: 2, heartbeatAgeMs: 200 })]) }, at(0));
    model = applyEvent(model, { type: 'state', state: withPeers([]) }, at(10));
    expect(model.notices.map((n) => n.text)).toEqual(['"qwen-chat" (pid 1, slot 0) aged out: no heartbeat for 3 s']);
    expect(model.rows['GPU-1234']?.map((r) => r.departedHow)).toEqual(['aged-out', 'left']);
  });

  it('seeds logs from the engine view and appends log events, bounded', () => {
    let model = applyEvent(initialModel(), { type: 'state', state: appState({ engines: [engineView({ logTail: ['loaded model'] })] }) }, at(0));
    model = applyEvent(model, { type: 'log', engineId: 'qwen-chat-1', stream: 'stderr', line: 'warn: slow' }, at(1));
    expect(model.logs['qwen-chat-1']).toEqual([
      { stream: 'stdout', line: 'loaded model' },
      { stream: 'stderr', line: 'warn: slow' },
    ]);
    for (let i = 0; i < LOG_LINES_KEPT + 10; i++) model = applyEvent(model, { type: 'log', engineId: 'qwen-chat-1', stream: 'stdout', line: `l${i}` }, at(2));
    expect(model.logs['qwen-chat-1']).toHaveLength(LOG_LINES_KEPT);
    expect(model.logs['qwen-chat-1']?.at(-1)?.line).toBe(`l${LOG_LINES_KEPT + 9}`);
  });

  it('updates an engine, its progress, and forgets progress of engines gone', () => {
    let model = applyEvent(initialModel(), { type: 'state', state: appState() }, at(0));
    model = applyEvent(model, { type: 'engine', engine: engineView({ state: 'loading', progressPct: 10 }) }, at(1));
    model = applyEvent(model, { type: 'progress', engineId: 'qwen-chat-1', pct: 42 }, at(2));
    expect(model.state?.engines[0]?.state).toBe('loading');
    expect(model.progress['qwen-chat-1']).toBe(42);
    model = applyEvent(model, { type: 'engine', engine: engineView({ id: 'new-1' }) }, at(3));
    expect(model.state?.engines.map((e) => e.id)).toEqual(['qwen-chat-1', 'new-1']);
    model = applyEvent(model, { type: 'state', state: appState({ engines: [] }) }, at(4));
    expect(model.progress).toEqual({});
  });

  it('keeps the last overshoots per live engine', () => {
    let model = applyEvent(initialModel(), { type: 'state', state: appState() }, at(0));
    model = applyEvent(model, { type: 'pacer', engineId: 'qwen-chat-1', overshootsUs: [120, 80] }, at(1));
    model = applyEvent(model, { type: 'pacer', engineId: 'qwen-chat-1', overshootsUs: [Number.NaN, 300] }, at(2));
    expect(model.overshoots['qwen-chat-1']).toEqual([120, 80, 300]);
    model = applyEvent(model, { type: 'pacer', engineId: 'qwen-chat-1', overshootsUs: Array.from({ length: 100 }, (_, i) => i) }, at(3));
    expect(model.overshoots['qwen-chat-1']).toHaveLength(OVERSHOOTS_KEPT);
    model = applyEvent(model, { type: 'state', state: appState({ engines: [] }) }, at(4));
    expect(model.overshoots).toEqual({});
  });

  it('adds plan events newest first without duplicates; a state replaces the list', () => {
    const p1 = placementPlan({ fingerprint: 'f1', plannedAtUs: 1 });
    const p2 = placementPlan({ fingerprint: 'f2', plannedAtUs: 2 });
    let model: AppModel = applyEvent(initialModel(), { type: 'plan', plan: p1 }, at(0));
    model = applyEvent(model, { type: 'plan', plan: p2 }, at(1));
    model = applyEvent(model, { type: 'plan', plan: p2 }, at(2));
    expect(model.plans.map((p) => p.fingerprint)).toEqual(['f2', 'f1']);
    model = applyEvent(model, { type: 'state', state: appState({ plans: [p1] }) }, at(3));
    expect(model.plans.map((p) => p.fingerprint)).toEqual(['f1']);
  });

  it('tick returns the same object when nothing expires; notices can be added and dismissed', () => {
    const model = withNotice(initialModel(), { id: 'x', text: 'launch failed', tone: 'bad', atMs: 0 });
    expect(tick(model, 10)).toBe(model);
    expect(dismissNotice(model, 'x').notices).toEqual([]);
  });
});
