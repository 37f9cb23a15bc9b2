/**
 * Everything the dashboard shows, as one value that events fold into (pure: the store applies
 * it and views read it). Besides the newest AppState it keeps what the state alone does not
 * carry: a short history of samples per device for the timeline, log lines and load progress per
 * engine, departed peers still on screen, and notices.
 */
import type { AppEvent, AppState, EngineView, PlacementPlan } from '../../../electron/core/contract.js';
import { expireRows, markAgedOut, reconcileRows, type DisplayRow } from './age.js';
import type { TimelineSample } from './timeline-model.js';
import { MAX_TIMELINE_SPAN_US } from './timeline-model.js';

export const LOG_LINES_KEPT = 200;
export const PLANS_KEPT = 500;
export const NOTICE_MS = 8000;
/** Window overshoots kept per engine (the timeline's hover summarises them). */
export const OVERSHOOTS_KEPT = 64;
/** History kept per device: the timeline's longest span plus a margin for the clock estimate. */
export const HISTORY_US = MAX_TIMELINE_SPAN_US + 2_000_000;

export interface LogLine {
  stream: 'stdout' | 'stderr';
  line: string;
}

export interface Notice {
  id: string;
  text: string;
  tone: 'info' | 'warn' | 'bad';
  atMs: number;
}

export interface AppModel {
  state: AppState | null;
  history: Record<string, TimelineSample[]>;
  rows: Record<string, DisplayRow[]>;
  logs: Record<string, LogLine[]>;
  progress: Record<string, number>;
  /** Engine id → its last window overshoots, µs past the window's end, oldest first. */
  overshoots: Record<string, number[]>;
  plans: PlacementPlan[];
  notices: Notice[];
}

export function initialModel(): AppModel {
  return { state: null, history: {}, rows: {}, logs: {}, progress: {}, overshoots: {}, plans: [], notices: [] };
}

/** The two clocks an event is stamped with: wall ms (notices, departures) and performance ms
 *  (the timeline's clock estimate). */
export interface Stamp {
  wallMs: number;
  perfMs: number;
}

const agedOutId = (gpuKey: string, slot: number, pid: number): string => `aged-out:${gpuKey}:${slot}:${pid}`;

function addNotice(notices: readonly Notice[], notice: Notice): Notice[] {
  if (notices.some((n) => n.id === notice.id)) return [...notices];
  return [...notices, notice].slice(-6);
}

function upsertEngine(engines: readonly EngineView[], engine: EngineView): EngineView[] {
  const index = engines.findIndex((e) => e.id === engine.id);
  if (index === -1) return [...engines, engine];
  const next = [...engines];
  next[index] = engine;
  return next;
}

function foldState(model: AppModel, state: AppState, stamp: Stamp): AppModel {
  const history: Record<string, TimelineSample[]> = {};
  const rows: Record<string, DisplayRow[]> = {};
  let notices = model.notices;
  for (const device of state.devices) {
    const sample: TimelineSample = {
      wallUs: state.wallUs,
      receivedAtMs: stamp.perfMs,
      peers: device.peers.map((peer) => ({ slot: peer.slot, name: peer.name, active: peer.active, busyPct: peer.busyPct, sharePct: peer.sharePct })),
      schedule: device.schedule,
    };
    const previous = model.history[device.key] ?? [];
    const last = previous[previous.length - 1];
    // The core's clock stepped back: the old samples no longer line up with the new ones.
    const kept = last !== undefined && last.wallUs > state.wallUs ? [] : previous.filter((s) => s.wallUs >= state.wallUs - HISTORY_US);
    history[device.key] = [...kept, sample];

    const reconciled = reconcileRows(model.rows[device.key] ?? [], device.peers, stamp.wallMs, state.engines);
    rows[device.key] = reconciled.rows;
    for (const departure of reconciled.departures) {
      if (departure.how !== 'aged-out') continue;
      notices = addNotice(notices, {
        id: agedOutId(device.key, departure.slot, departure.pid),
        text: `"${departure.name}" (pid ${departure.pid}, slot ${departure.slot}) aged out: no heartbeat for 3 s`,
        tone: 'warn',
        atMs: stamp.wallMs,
      });
    }
  }
  const live = new Set(state.engines.map((engine) => engine.id));
  const logs: Record<string, LogLine[]> = {};
  for (const engine of state.engines) logs[engine.id] = model.logs[engine.id] ?? engine.logTail.map((line) => ({ stream: 'stdout' as const, line }));
  const progress: Record<string, number> = {};
  for (const [id, pct] of Object.entries(model.progress)) if (live.has(id)) progress[id] = pct;
  const overshoots: Record<string, number[]> = {};
  for (const [id, values] of Object.entries(model.overshoots)) if (live.has(id)) overshoots[id] = values;
  return { ...model, state, history, rows, logs, progress, overshoots, plans: state.plans.slice(0, PLANS_KEPT), notices };
}

export function applyEvent(model: AppModel, event: AppEvent, stamp: Stamp): AppModel {
  switch (event.type) {
    case 'state':
      return foldState(model, event.state, stamp);
    case 'engine': {
      const state = model.state === null ? null : { ...model.state, engines: upsertEngine(model.state.engines, event.engine) };
      const logs = model.logs[event.engine.id] === undefined ? { ...model.logs, [event.engine.id]: event.engine.logTail.map((line) => ({ stream: 'stdout' as const, line })) } : model.logs;
      return { ...model, state, logs };
    }
    case 'progress':
      return { ...model, progress: { ...model.progress, [event.engineId]: event.pct } };
    case 'log': {
      const lines = [...(model.logs[event.engineId] ?? []), { stream: event.stream, line: event.line }].slice(-LOG_LINES_KEPT);
      return { ...model, logs: { ...model.logs, [event.engineId]: lines } };
    }
    case 'plan': {
      const duplicate = model.plans.some((p) => p.fingerprint === event.plan.fingerprint && p.plannedAtUs === event.plan.plannedAtUs);
      return duplicate ? model : { ...model, plans: [event.plan, ...model.plans].slice(0, PLANS_KEPT) };
    }
    case 'pacer': {
      const values = event.overshootsUs.filter((us) => Number.isFinite(us) && us >= 0);
      if (values.length === 0) return model;
      const kept = [...(model.overshoots[event.engineId] ?? []), ...values].slice(-OVERSHOOTS_KEPT);
      return { ...model, overshoots: { ...model.overshoots, [event.engineId]: kept } };
    }
    case 'aged-out': {
      const rows = model.rows[event.gpuKey];
      return {
        ...model,
        rows: rows === undefined ? model.rows : { ...model.rows, [event.gpuKey]: markAgedOut(rows, event.slot, event.pid, stamp.wallMs) },
        notices: addNotice(model.notices, {
          id: agedOutId(event.gpuKey, event.slot, event.pid),
          text: `"${event.name}" (pid ${event.pid}, slot ${event.slot}) aged out: no heartbeat for 3 s`,
          tone: 'warn',
          atMs: stamp.wallMs,
        }),
      };
    }
  }
}

/** Time passing without events: departed rows and old notices leave. Returns the same object
 *  when nothing changed (so the views do not redraw for nothing). */
export function tick(model: AppModel, nowMs: number): AppModel {
  let changed = false;
  const rows: Record<string, DisplayRow[]> = {};
  for (const [key, list] of Object.entries(model.rows)) {
    const kept = expireRows(list, nowMs);
    if (kept.length !== list.length) changed = true;
    rows[key] = kept;
  }
  const notices = model.notices.filter((n) => nowMs - n.atMs < NOTICE_MS);
  if (notices.length !== model.notices.length) changed = true;
  return changed ? { ...model, rows, notices } : model;
}

/** A notice of our own (an action that failed, a launch refused). */
export function withNotice(model: AppModel, notice: Notice): AppModel {
  return { ...model, notices: addNotice(model.notices, notice) };
}

export function dismissNotice(model: AppModel, id: string): AppModel {
  return { ...model, notices: model.notices.filter((n) => n.id !== id) };
}
