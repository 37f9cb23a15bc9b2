/**
 * The contract between the supervisor and an engine host process (the built-in engine host, or any
 * host that speaks it). The host prints one JSON object per line on stdout:
 *
 *   {"event":"progress","pct":0..100}                         model load progress, monotonic, ends at 100
 *   {"event":"ready","port":N,"slot":S|null}                  serving on port N; registry slot S (null: not joined)
 *   {"event":"log","level":"info|warn|error","message":"…"}   a line for the supervisor's log
 *   {"event":"fatal","message":"…"}                           the host cannot go on; it exits non-zero next
 *   {"event":"pacer","overshoots_us":[…]}                     how far past its window's end each window's last step ran
 *
 * Anything else on stdout (a library printing a stray line) is not protocol: `parseHostLine`
 * returns null for it and never throws, whatever the bytes.
 */
import { overshootsOf } from '../pacer/overshoot.js';

export type HostLogLevel = 'info' | 'warn' | 'error';

export interface HostProgressEvent {
  event: 'progress';
  /** Percent of the model load done, 0..100. */
  pct: number;
}

export interface HostReadyEvent {
  event: 'ready';
  /** The TCP port the host serves on (the real one when it was asked for port 0). */
  port: number;
  /** The registry slot the host holds, or null when it did not join a registry. */
  slot: number | null;
}

export interface HostLogEvent {
  event: 'log';
  level: HostLogLevel;
  message: string;
}

export interface HostFatalEvent {
  event: 'fatal';
  message: string;
}

export interface HostPacerEvent {
  event: 'pacer';
  overshoots_us: number[];
}

export type HostEvent = HostProgressEvent | HostReadyEvent | HostLogEvent | HostFatalEvent | HostPacerEvent;

/** Lines longer than this are not protocol (a host never writes one; a runaway library might). */
export const MAX_HOST_LINE_CHARS = 64 * 1024;

/** The registry has 16 slots (ABI v1). */
const MAX_SLOT = 15;

const LOG_LEVELS: ReadonlySet<string> = new Set<HostLogLevel>(['info', 'warn', 'error']);

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** One stdout line of a host → its event, or null when the line is not a valid protocol event. */
export function parseHostLine(line: string): HostEvent | null {
  if (typeof line !== 'string' || line.length > MAX_HOST_LINE_CHARS) return null;
  const text = line.trim();
  if (!text.startsWith('{') || !text.endsWith('}')) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isRecord(value)) return null;
  switch (value['event']) {
    case 'progress': {
      const pct = value['pct'];
      if (typeof pct !== 'number' || !Number.isFinite(pct) || pct < 0 || pct > 100) return null;
      return { event: 'progress', pct };
    }
    case 'ready': {
      const port = value['port'];
      const slot = value['slot'];
      if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65_535) return null;
      if (slot !== null && (typeof slot !== 'number' || !Number.isInteger(slot) || slot < 0 || slot > MAX_SLOT)) return null;
      return { event: 'ready', port, slot };
    }
    case 'log': {
      const level = value['level'];
      const message = value['message'];
      if (typeof level !== 'string' || !LOG_LEVELS.has(level) || typeof message !== 'string') return null;
      return { event: 'log', level: level as HostLogLevel, message };
    }
    case 'fatal': {
      const message = value['message'];
      if (typeof message !== 'string') return null;
      return { event: 'fatal', message };
    }
    case 'pacer': {
      const list = overshootsOf(value['overshoots_us']);
      return list === null ? null : { event: 'pacer', overshoots_us: list };
    }
    default:
      return null;
  }
}

/** The line a host writes for an event (no trailing newline). Only the contract's fields are written. */
export function formatHostEvent(event: HostEvent): string {
  switch (event.event) {
    case 'progress':
      return JSON.stringify({ event: 'progress', pct: event.pct });
    case 'ready':
      return JSON.stringify({ event: 'ready', port: event.port, slot: event.slot });
    case 'log':
      return JSON.stringify({ event: 'log', level: event.level, message: event.message });
    case 'fatal':
      return JSON.stringify({ event: 'fatal', message: event.message });
    case 'pacer':
      return JSON.stringify({ event: 'pacer', overshoots_us: event.overshoots_us });
  }
}
