/**
 * The process gate's trace, for finding where a paced engine's windows go (`bench:pacing --trace`):
 * every decision with the registry it read (each peer's slot, `active` flag and share), every stop
 * and continue, every activity sample (what the /metrics poll said, and the `active` it led to), and
 * every poll sent, skipped (the previous one still unanswered), timed out or answered. One JSON
 * object per line, wall µs in `t`. Written only when `gpu-share run` is started with
 * GPU_SHARE_PACER_TRACE=FILE: without it no recorder exists and the gate's path is unchanged.
 * A built-in engine's host started with the same variable (serve passes its environment on)
 * writes every decode step instead, into FILE.PID: several hosts may share the variable.
 * The file is created afresh (never an existing file or link), and recording stops after
 * TRACE_MAX_EVENTS (a `truncated` line says so).
 */
import { closeSync, openSync, writeSync, constants as fsConstants } from 'node:fs';
import type { PollEvent } from './http-poll.js';
import { errorText } from '../error-text.js';

/** The environment variable naming the trace file of `gpu-share run`. */
export const PACER_TRACE_ENV = 'GPU_SHARE_PACER_TRACE';
/** ~20 minutes of a gate at 2:1 (~100 events a second); the benchmark keeps at most 10 s of it. */
export const TRACE_MAX_EVENTS = 200_000;

/** [registry slot, active, share] of one alive peer, as a decision read it. */
export type TracedPeer = [number, boolean, number];

export type GateTraceEvent =
  | { k: 'decide'; t: number; pid: number; slot: number | null; active: boolean; run: boolean; inWindow: boolean; peers: TracedPeer[] }
  | { k: 'stop' | 'cont'; t: number; pid: number }
  /** busy: what the activity source said (null: cannot tell, e.g. no fresh poll answer). */
  | { k: 'sample'; t: number; pid: number; busy: boolean | null; active: boolean }
  | { k: 'poll'; t: number; what: PollEvent }
  | { k: 'answer'; t: number; busy: boolean | null; processing?: number; deferred?: number; predicted?: number; why?: string }
  /** A built-in engine's decode step: its start (wall µs in `t`, monotonic µs in `mono`, which
   *  `perf sched -k mono` shares) and its length in µs. */
  | { k: 'step'; t: number; pid: number; mono: number; us: number };

export interface TraceRecorder {
  record(event: GateTraceEvent): void;
  close(): void;
}

/** A recorder that appends JSON lines to `path`, buffered and written once a second (timer
 *  unref'd) and at close. Throws when the file cannot be created (it exists, or the folder does
 *  not): the caller says so and runs without a trace. */
export function fileTraceRecorder(path: string): TraceRecorder {
  const fd = openSync(path, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | (fsConstants.O_NOFOLLOW ?? 0), 0o600);
  let buffered: string[] = [];
  let count = 0;
  let open = true;
  const flush = (): void => {
    if (!open || buffered.length === 0) return;
    writeSync(fd, buffered.join(''));
    buffered = [];
  };
  const timer = setInterval(flush, 1_000);
  timer.unref();
  return {
    record(event) {
      if (!open) return;
      count += 1;
      if (count > TRACE_MAX_EVENTS) {
        if (count === TRACE_MAX_EVENTS + 1) buffered.push(`${JSON.stringify({ k: 'truncated', t: event.t })}\n`);
        return;
      }
      buffered.push(`${JSON.stringify(event)}\n`);
    },
    close() {
      if (!open) return;
      clearInterval(timer);
      flush();
      open = false;
      closeSync(fd);
    },
  };
}

/** The trace the environment asks for (PACER_TRACE_ENV), created at its path plus `suffix`. Null
 *  when none is asked for; `problem` when it cannot be created (the caller says so, and runs
 *  without one). */
export function traceFromEnv(env: NodeJS.ProcessEnv, suffix = ''): { recorder: TraceRecorder } | { problem: string } | null {
  const path = env[PACER_TRACE_ENV];
  if (path === undefined || path === '') return null;
  try {
    return { recorder: fileTraceRecorder(`${path}${suffix}`) };
  } catch (error) {
    return { problem: `${PACER_TRACE_ENV}: cannot create ${path}${suffix} (${errorText(error)})` };
  }
}

/** Parses a trace file's lines; lines that are not events (a cut last line) are skipped and
 *  counted. Pure. */
export function parseGateTrace(text: string): { events: GateTraceEvent[]; skipped: number; truncated: boolean } {
  const events: GateTraceEvent[] = [];
  let skipped = 0;
  let truncated = false;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      const value = JSON.parse(line) as { k?: unknown; t?: unknown };
      if (value.k === 'truncated') truncated = true;
      else if (typeof value.k === 'string' && typeof value.t === 'number') events.push(value as GateTraceEvent);
      else skipped += 1;
    } catch {
      skipped += 1;
    }
  }
  return { events, skipped, truncated };
}
