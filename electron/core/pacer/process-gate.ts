/**
 * The process gate, for engines that know nothing of the registry. The supervisor holds their
 * slots (pid = engine, owner_pid = supervisor) and, at each window edge, resumes the engine whose
 * window begins and suspends the one whose window ends — its whole process tree (ProcessControl).
 * An engine's activity comes from an activity source (by default its tree's CPU time advancing
 * while it is allowed to run). An idle engine is never suspended, and every engine is resumed when
 * the gate stops; when the supervisor dies, its watchdog ends the trees (pacer/watchdog.ts).
 */
import type { ProcessControl } from '../../../native/process-control.js';
import type { Clock } from '../clock.js';
import type { RegistryMember } from '../registry/member.js';
import type { AlivePeer } from '../registry/view.js';
import { ACTIVITY_WINDOW_US, BusyMeter, KNOWN_IDLE_HYSTERESIS_US } from './busy.js';
import { decideGate } from './gate.js';
import { OvershootLog } from './overshoot.js';
import { usSinceWindowEnd, usUntilWindowEnd } from './schedule.js';
import type { GateTraceEvent } from './trace.js';

/** Re-decide at least this often: activity sampling and registry changes between edges. */
export const SAMPLE_INTERVAL_US = 50_000;

/** A view prepared (see `prepare`) at most this long before a step is used by it. */
export const PREPARED_MAX_AGE_US = 5_000;

/** Where an engine's activity comes from. */
export interface ActivitySource {
  /** Work done by the engine so far (µs of CPU time, or any monotonic work counter); null when
   *  unknown right now. Also feeds busy_ppm. */
  workUs(pid: number): number | null;
  /** Direct evidence from the engine itself (a server's in-flight requests and generated tokens):
   *  true = working, false = idle (no request in flight or queued: `active` then clears
   *  KNOWN_IDLE_HYSTERESIS_US after the last evidence of work instead of ACTIVITY_WINDOW_US); null
   *  or absent = it cannot say, judge by `workUs`. `workUs`: the sample's own reading of
   *  `workUs(pid)`, for a source that weighs it too (absent: read it afresh). */
  busyNow?(pid: number, workUs?: number | null): boolean | null;
}

/** CPU time of the engine's whole process tree. */
export const cpuActivity = (control: Pick<ProcessControl, 'cpuTimeUs'>): ActivitySource => ({ workUs: (pid) => control.cpuTimeUs(pid) });

/**
 * Evidence of work in one sample: CPU advanced by at least 10% of the time the engine was allowed
 * to run (and 1 ms), so that an idle server's housekeeping does not count.
 */
export function workedDuring(workDeltaUs: number, runnableUs: number): boolean {
  return workDeltaUs >= 1_000 && workDeltaUs >= 0.1 * runnableUs;
}

interface Engine {
  pid: number;
  member: RegistryMember;
  suspended: boolean;
  /** µs the engine was allowed to run since the last sample. */
  runnableUs: number;
  runnableSinceMonoUs: number;
  lastWorkUs: number | null;
  lastWorkMonoUs: number | null;
  meter: BusyMeter;
  published: { active: boolean; atMonoUs: number } | null;
  /** No activity source answers for it: treated as active, so that pacing still happens. */
  unknownActivity: boolean;
  /** The engine itself said, at the last sample, that it has nothing in flight or queued. */
  knownIdle: boolean;
  /** It was last let run because its window was on. */
  ranInWindow: boolean;
}

export interface ProcessGateEvent {
  kind: 'resume' | 'suspend' | 'active' | 'idle';
  pid: number;
  wallUs: number;
}

export interface ProcessGateDeps {
  clock: Clock;
  /** Suspends and resumes an engine's whole tree (the engine's pid is the tree's root). */
  control: Pick<ProcessControl, 'suspend' | 'resume'>;
  activity: ActivitySource;
  /** The registry as the supervisor watches it. */
  peers: () => readonly AlivePeer[];
  onEvent?: (event: ProcessGateEvent) => void;
  /** Every decision with the registry it read, every stop/continue and activity sample
   *  (pacer/trace.ts); absent unless a trace was asked for. */
  trace?: (event: GateTraceEvent) => void;
}

/** Decide for one engine: run now or not, and in how many µs that may change. Pure. */
export function decideEngine(peers: readonly AlivePeer[], slot: number | null, active: boolean, wallNowUs: number): { run: boolean; changeInUs: number; inWindow?: boolean; sinceWindowEndUs?: number } {
  if (!active) return { run: true, changeInUs: SAMPLE_INTERVAL_US };
  const decision = decideGate(peers, slot, wallNowUs);
  switch (decision.kind) {
    case 'wait':
      return { run: false, changeInUs: decision.waitUs, sinceWindowEndUs: slot === null ? 0 : usSinceWindowEnd(decision.schedule, slot, wallNowUs) };
    case 'in-window':
      return { run: true, inWindow: true, changeInUs: slot === null ? SAMPLE_INTERVAL_US : usUntilWindowEnd(decision.schedule, slot, wallNowUs) };
    default:
      return { run: true, changeInUs: SAMPLE_INTERVAL_US };
  }
}

export class ProcessGate {
  private readonly engines = new Map<number, Engine>();
  private stopped = false;
  /** The registry as `prepare` read it, and when. */
  private prepared: { peers: readonly AlivePeer[]; atMonoUs: number } | null = null;
  /** How late after its window's end each engine was suspended (when it had run in its window). */
  readonly overshoot = new OvershootLog();

  constructor(private readonly deps: ProcessGateDeps) {}

  /** Pace an engine whose slot `member` holds (pid = engine, owner_pid = us). */
  add(pid: number, member: RegistryMember): void {
    const now = this.deps.clock.monoUs();
    this.engines.set(pid, {
      pid,
      member,
      suspended: false,
      runnableUs: 0,
      runnableSinceMonoUs: now,
      lastWorkUs: this.deps.activity.workUs(pid),
      lastWorkMonoUs: null,
      meter: new BusyMeter(),
      published: null,
      unknownActivity: false,
      knownIdle: false,
      ranInWindow: false,
    });
  }

  /** Stop pacing an engine: it is resumed and forgotten (its slot stays with its member). */
  remove(pid: number): void {
    const engine = this.engines.get(pid);
    if (engine === undefined) return;
    if (engine.suspended) this.resume(engine);
    this.engines.delete(pid);
  }

  /** Sample activity, decide, apply. Returns µs until the next step is due. */
  step(): number {
    if (this.stopped) return SAMPLE_INTERVAL_US;
    const now = this.deps.clock.monoUs();
    const prepared = this.prepared !== null && now - this.prepared.atMonoUs <= PREPARED_MAX_AGE_US ? this.prepared.peers : null;
    this.prepared = null;
    const peers = prepared ?? this.readAndSample(now);
    const wallNow = this.deps.clock.wallUs();
    let next = SAMPLE_INTERVAL_US;
    for (const engine of this.engines.values()) {
      const active = this.isActive(engine, now);
      const { run, changeInUs, inWindow, sinceWindowEndUs } = decideEngine(peers, engine.member.slot, active, wallNow);
      if (this.deps.trace !== undefined) this.deps.trace({ k: 'decide', t: wallNow, pid: engine.pid, slot: engine.member.slot, active, run, inWindow: inWindow === true, peers: peers.map((p) => [p.record.slot, p.record.active, p.share]) });
      if (run && engine.suspended) this.resume(engine);
      else if (!run && !engine.suspended) {
        // It ran until now although its window ended this long ago (when it was in a window at all).
        if (engine.ranInWindow && sinceWindowEndUs !== undefined) this.overshoot.record(sinceWindowEndUs);
        this.suspend(engine);
      }
      engine.ranInWindow = inWindow === true;
      next = Math.min(next, changeInUs);
    }
    return Math.max(500, next);
  }

  /**
   * Sample activity and read the registry now, for a step due within PREPARED_MAX_AGE_US: that
   * step (at a window edge) then only decides and signals. Reading /proc and the registry takes a
   * few hundred µs on a cold cache, and every µs between the edge and the signal is a µs in which
   * two engines share the device, or none has it.
   */
  prepare(): void {
    if (this.stopped) return;
    const now = this.deps.clock.monoUs();
    this.prepared = { peers: this.readAndSample(now), atMonoUs: now };
  }

  private readAndSample(nowMonoUs: number): readonly AlivePeer[] {
    for (const engine of this.engines.values()) this.sample(engine, nowMonoUs);
    return this.deps.peers();
  }

  /** Resume every engine and stop deciding (shutdown, errors). Safe to call twice, and from a
   *  process 'exit' handler (synchronous). */
  stopAll(): void {
    this.stopped = true;
    for (const engine of this.engines.values()) if (engine.suspended) this.resume(engine);
  }

  private isActive(engine: Engine, nowMonoUs: number): boolean {
    if (engine.unknownActivity) return true;
    const windowUs = engine.knownIdle ? KNOWN_IDLE_HYSTERESIS_US : ACTIVITY_WINDOW_US;
    return engine.lastWorkMonoUs !== null && nowMonoUs - engine.lastWorkMonoUs <= windowUs;
  }

  private sample(engine: Engine, nowMonoUs: number): void {
    if (!engine.suspended) {
      engine.runnableUs += nowMonoUs - engine.runnableSinceMonoUs;
      engine.runnableSinceMonoUs = nowMonoUs;
    }
    const work = this.deps.activity.workUs(engine.pid);
    engine.unknownActivity = work === null && this.deps.activity.busyNow === undefined;
    const busy = this.deps.activity.busyNow?.(engine.pid, work) ?? null;
    if (busy === true) engine.lastWorkMonoUs = nowMonoUs;
    engine.knownIdle = busy === false;
    if (work !== null && engine.lastWorkUs !== null) {
      const delta = Math.max(0, work - engine.lastWorkUs);
      engine.meter.record(nowMonoUs, delta);
      if (busy === null && workedDuring(delta, engine.runnableUs)) engine.lastWorkMonoUs = nowMonoUs;
    }
    engine.lastWorkUs = work;
    engine.runnableUs = 0;
    const active = this.isActive(engine, nowMonoUs);
    if (this.deps.trace !== undefined) this.deps.trace({ k: 'sample', t: this.deps.clock.wallUs(), pid: engine.pid, busy, active });
    const changed = engine.published?.active !== active;
    if (changed || nowMonoUs - (engine.published?.atMonoUs ?? 0) >= 250_000) {
      engine.member.set({ active, busyPpm: engine.meter.busyPpm(nowMonoUs) });
      engine.published = { active, atMonoUs: nowMonoUs };
      if (changed) this.deps.onEvent?.({ kind: active ? 'active' : 'idle', pid: engine.pid, wallUs: this.deps.clock.wallUs() });
    }
  }

  private suspend(engine: Engine): void {
    if (!this.deps.control.suspend(engine.pid)) return;
    const now = this.deps.clock.monoUs();
    engine.runnableUs += now - engine.runnableSinceMonoUs;
    engine.suspended = true;
    this.deps.onEvent?.({ kind: 'suspend', pid: engine.pid, wallUs: this.deps.clock.wallUs() });
    if (this.deps.trace !== undefined) this.deps.trace({ k: 'stop', t: this.deps.clock.wallUs(), pid: engine.pid });
  }

  private resume(engine: Engine): void {
    this.deps.control.resume(engine.pid);
    engine.suspended = false;
    engine.runnableSinceMonoUs = this.deps.clock.monoUs();
    this.deps.onEvent?.({ kind: 'resume', pid: engine.pid, wallUs: this.deps.clock.wallUs() });
    if (this.deps.trace !== undefined) this.deps.trace({ k: 'cont', t: this.deps.clock.wallUs(), pid: engine.pid });
  }
}
