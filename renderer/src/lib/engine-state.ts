/** What a profile card says about its engine: stopped, planning, loading 42 %, running, idle,
 *  stopping, crashed with its exit code. */
import type { EngineView } from '../../../electron/core/contract.js';
import type { Tone } from './pacing.js';

export type CardPhase = 'stopped' | 'planning' | 'loading' | 'running' | 'idle' | 'stopping' | 'crashed';

export interface CardState {
  phase: CardPhase;
  label: string;
  tone: Tone;
  /** 0–100 while loading; null otherwise. */
  progressPct: number | null;
}

const LIVE_STATES: readonly EngineView['state'][] = ['loading', 'running', 'stopping'];

/** The engine a profile's card follows: its live one (newest first), else its newest. */
export function engineForProfile(profileId: string, engines: readonly EngineView[]): EngineView | null {
  const mine = engines.filter((engine) => engine.profileId === profileId).sort((a, b) => b.startedAtUs - a.startedAtUs);
  return mine.find((engine) => LIVE_STATES.includes(engine.state)) ?? mine[0] ?? null;
}

export function exitWords(engine: Pick<EngineView, 'exitCode' | 'exitSignal'>): string {
  if (engine.exitSignal !== null) return `killed by ${engine.exitSignal}`;
  if (engine.exitCode !== null) return `exit code ${engine.exitCode}`;
  return 'no exit status';
}

/** What ended an engine, short: "SIGKILL", "exit code 3". */
export function exitCause(engine: Pick<EngineView, 'exitCode' | 'exitSignal'>): string {
  if (engine.exitSignal !== null) return engine.exitSignal;
  if (engine.exitCode !== null) return `exit code ${engine.exitCode}`;
  return 'no exit status';
}

/** How long ago, for a state that just happened: "0.4 s ago", "12 s ago", "3 min ago". */
export function agoWords(ms: number): string {
  const clamped = Math.max(0, Number.isFinite(ms) ? ms : 0);
  if (clamped < 10_000) return `${(clamped / 1000).toFixed(1)} s ago`;
  if (clamped < 120_000) return `${Math.round(clamped / 1000)} s ago`;
  return `${Math.round(clamped / 60_000)} min ago`;
}

/** A Peers row of an engine of ours that died: "crashed (SIGKILL) · 0.4 s ago". */
export function crashWords(engine: Pick<EngineView, 'exitCode' | 'exitSignal' | 'exitedAtUs'>, nowMs: number): string {
  const when = engine.exitedAtUs === null ? '' : ` · ${agoWords(nowMs - engine.exitedAtUs / 1000)}`;
  return `crashed (${exitCause(engine)})${when}`;
}

/**
 * @param planning a plan request for this profile is in flight
 * @param progressPct the newest `progress` event for the engine, if any (fresher than the view)
 */
export function cardState(engine: EngineView | null, planning: boolean, progressPct: number | null = null): CardState {
  if (planning && (engine === null || !LIVE_STATES.includes(engine.state))) return { phase: 'planning', label: 'planning…', tone: 'info', progressPct: null };
  if (engine === null) return { phase: 'stopped', label: 'stopped', tone: 'muted', progressPct: null };
  switch (engine.state) {
    case 'loading': {
      const raw = progressPct ?? engine.progressPct;
      const pct = Number.isFinite(raw) ? Math.min(100, Math.max(0, Math.round(raw))) : 0;
      return { phase: 'loading', label: `loading ${pct} %`, tone: 'info', progressPct: pct };
    }
    case 'running':
      return engine.busy ? { phase: 'running', label: 'running', tone: 'ok', progressPct: null } : { phase: 'idle', label: 'idle', tone: 'ok', progressPct: null };
    case 'stopping':
      return { phase: 'stopping', label: 'stopping…', tone: 'warn', progressPct: null };
    case 'stopped':
      return { phase: 'stopped', label: 'stopped', tone: 'muted', progressPct: null };
    case 'exited':
      // It finished by itself (exit code 0): not a crash.
      return { phase: 'stopped', label: 'exited', tone: 'muted', progressPct: null };
    case 'crashed':
      return { phase: 'crashed', label: `crashed (${exitWords(engine)})`, tone: 'bad', progressPct: null };
  }
}

/** Stop and Kill make sense while the process lives. */
export const canStop = (engine: EngineView | null): engine is EngineView => engine !== null && (engine.state === 'loading' || engine.state === 'running');
export const canKill = (engine: EngineView | null): engine is EngineView => engine !== null && LIVE_STATES.includes(engine.state);

export const ENGINE_KIND_WORDS: Readonly<Record<EngineView['kind'] | 'peer', string>> = {
  builtin: 'built-in',
  'llama-server': 'llama-server',
  llamafile: 'llamafile',
  'opencoti-llamafile': 'opencoti llamafile',
  command: 'command',
  peer: 'peer',
};
