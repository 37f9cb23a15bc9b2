/** Engines that keep ending by themselves (issue 32, item 6): back-off 1, 2, 4, 8 s; after 5 ends
 *  within 60 s the profile stays failed with its last output until the user restarts it; only the
 *  newest ended engine of a profile stays listed, and not for ever. */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { backoffMs, CRASH_LOOP_POLICY, crashHold, describeCrashHold } from '../../electron/core/engines/crash-loop.js';
import { CrashLoopError, ENDED_KEEP_US, Supervisor, type LaunchSpec, type SpawnRequest, type SpawnedProcess, type SupervisorEvent } from '../../electron/core/engines/supervisor.js';
import { LeaseBook } from '../../electron/core/planner/leases.js';
import { GiB, POLICY_M10_V1 } from '../../electron/core/planner/policy.js';
import { DEFAULT_CONTROLS } from '../../electron/core/planner/snapshot.js';

class Proc implements SpawnedProcess {
  private lines: ((stream: 'stdout' | 'stderr', line: string) => void)[] = [];
  private exits: ((code: number | null, signal: string | null) => void)[] = [];
  constructor(
    readonly pid: number,
    readonly request: SpawnRequest,
  ) {}
  onLine(listener: (stream: 'stdout' | 'stderr', line: string) => void): void {
    this.lines.push(listener);
  }
  onExit(listener: (code: number | null, signal: string | null) => void): void {
    this.exits.push(listener);
  }
  signal(): boolean {
    return true;
  }
  signalGroup(): boolean {
    return true;
  }
  send(): boolean {
    return true;
  }
  say(stream: 'stdout' | 'stderr', line: string): void {
    for (const l of this.lines) l(stream, line);
  }
  exit(code: number | null, signal: string | null = null): void {
    for (const l of this.exits) l(code, signal);
  }
}

function setup(): { supervisor: Supervisor; clock: FakeClock; spawned: Proc[]; events: SupervisorEvent[] } {
  const clock = new FakeClock();
  const spawned: Proc[] = [];
  const events: SupervisorEvent[] = [];
  const supervisor = new Supervisor({
    clock,
    policy: POLICY_M10_V1,
    leases: new LeaseBook(),
    envelopes: null,
    snapshot: () => ({ nowUs: clock.wallUs(), node: 'n', accelerator: { key: 'GPU-sim', name: 'Sim' }, queueDepth: 0, device: { key: 'GPU-sim', name: 'Sim', totalBytes: 24 * GiB, observedUsedBytes: 0, processes: null, health: 'OK', sampledAtUs: clock.wallUs() }, pressure: 'NORMAL', controls: DEFAULT_CONTROLS }),
    spawn: (request) => {
      const p = new Proc(7000 + spawned.length, request);
      spawned.push(p);
      return p;
    },
    launchers: { nodePath: 'node', cliPath: 'cli.js', builtinHostPath: 'host.js' },
    gpuKey: 'GPU-sim',
    residentBytes: () => null,
    onEvent: (event) => events.push(event),
  });
  return { supervisor, clock, spawned, events };
}

const spec: LaunchSpec = { profileId: 'flaky', name: 'flaky', kind: 'command', capability: 'chat', modelPath: null, modelKey: 'command:x', contextSize: 256, gpuLayers: 0, threads: null, weight: 1, priority: 'interactive', pinned: false, command: '/bin/false', args: [], env: {}, peakBytes: 1 * GiB, peakSource: 'ESTIMATED' };

/** Starts it, lets it run (its `run` wrapper joined), then it exits with code 1 after a line. */
async function startAndCrash(supervisor: Supervisor, spawned: Proc[]): Promise<void> {
  const launching = supervisor.launch(spec);
  await Promise.resolve();
  const proc = spawned.at(-1);
  proc?.say('stderr', 'gpu-share: joined GPU-sim slot 0');
  await launching;
  proc?.say('stderr', 'panic: no config');
  proc?.exit(1);
}

describe('crash loop (pure)', () => {
  it('backs off 1, 2, 4, 8 s, then holds as failed at the fifth end within 60 s', () => {
    expect([1, 2, 3, 4, 5, 9].map((n) => backoffMs(n))).toEqual([1000, 2000, 4000, 8000, 16000, 30000]);
    const t0 = 1_000_000;
    expect(crashHold(undefined, false, t0)).toBeNull();
    expect(crashHold({ atUs: [t0], last: 'x' }, false, t0 + 500_000)).toMatchObject({ kind: 'backoff', crashes: 1, retryAtUs: t0 + 1_000_000 });
    expect(crashHold({ atUs: [t0], last: 'x' }, false, t0 + 1_000_000)).toBeNull();
    const five = [0, 1, 3, 7, 15].map((s) => t0 + s * 1_000_000);
    expect(crashHold({ atUs: five, last: 'x' }, false, t0 + 16_000_000)).toMatchObject({ kind: 'failed', crashes: 5 });
    // Ends spread over more than a minute back off but never fail.
    const spread = [0, 20, 40, 60, 80].map((s) => t0 + s * 1_000_000);
    expect(crashHold({ atUs: spread, last: 'x' }, false, t0 + 80_500_000)?.kind).toBe('backoff');
    expect(describeCrashHold('flaky', { kind: 'failed', crashes: 5, last: 'exit code 1: panic' }, t0)).toBe(`flaky: its engine ended by itself 5 times within ${CRASH_LOOP_POLICY.windowUs / 1e6} s (last: exit code 1: panic); it stays stopped until it is restarted from the dashboard`);
  });
});

describe('crash loop (supervisor)', () => {
  it('refuses to start it again before its back-off, holds it failed after 5 ends in 60 s, and the user restart clears it', async () => {
    const { supervisor, clock, spawned, events } = setup();
    for (let crash = 1; crash <= 5; crash++) {
      await startAndCrash(supervisor, spawned);
      if (crash < 5) {
        // However many requests ask during the back-off, nothing is started.
        for (let i = 0; i < 10; i++) await expect(supervisor.launch(spec)).rejects.toBeInstanceOf(CrashLoopError);
        expect(spawned).toHaveLength(crash);
        clock.advance(backoffMs(crash) * 1000);
      }
    }
    const hold = supervisor.crashHoldOf('flaky');
    expect(hold).toMatchObject({ kind: 'failed', crashes: 5, last: 'exit code 1: panic: no config' });
    expect(events.filter((e) => e.kind === 'crash-loop').map((e) => (e.kind === 'crash-loop' ? e.hold.kind : ''))).toEqual(['backoff', 'backoff', 'backoff', 'backoff', 'failed']);
    // Failed: still failed ten minutes later, and its last output is still listed.
    clock.advance(10 * 60_000_000);
    await supervisor.tick();
    await expect(supervisor.launch(spec)).rejects.toThrow(/ended by itself 5 times.*panic: no config.*restarted from the dashboard/);
    expect(spawned).toHaveLength(5);
    const listed = supervisor.list();
    expect(listed).toHaveLength(1); // the newest of the five ended engines, with its output
    expect(listed[0]).toMatchObject({ state: 'crashed', exitCode: 1 });
    expect(listed[0]?.lastLines.at(-1)).toBe('panic: no config');
    supervisor.resetCrashes('flaky');
    await startAndCrash(supervisor, spawned);
    expect(spawned).toHaveLength(6);
  });

  it('drops ended engines: only the newest per profile, and none after ten minutes', async () => {
    const { supervisor, clock, spawned } = setup();
    for (let i = 0; i < 3; i++) {
      await startAndCrash(supervisor, spawned);
      clock.advance(60_000_000); // a minute apart: back-off over, never failed
    }
    expect(supervisor.list().map((e) => e.id)).toEqual(['flaky-3']);
    clock.advance(ENDED_KEEP_US);
    await supervisor.tick();
    expect(supervisor.list()).toEqual([]);
  });
});
