/** The supervisor's decisions with recorded processes and a fake clock: load progress from the
 *  host protocol, idle unload (never pinned), restart with backoff, what it signals. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { Supervisor, type LaunchSpec, type SpawnRequest, type SpawnedProcess, type SupervisorDeps, type SupervisorEvent } from '../../electron/core/engines/supervisor.js';
import { LeaseBook } from '../../electron/core/planner/leases.js';
import { GiB, POLICY_M10_V1 } from '../../electron/core/planner/policy.js';
import { DEFAULT_CONTROLS } from '../../electron/core/planner/snapshot.js';

class RecordedProcess implements SpawnedProcess {
  readonly signals: string[] = [];
  readonly sent: string[] = [];
  private lineListeners: ((stream: 'stdout' | 'stderr', line: string) => void)[] = [];
  private exitListeners: ((code: number | null, signal: string | null) => void)[] = [];
  constructor(
    readonly pid: number,
    readonly request: SpawnRequest,
  ) {}
  onLine(listener: (stream: 'stdout' | 'stderr', line: string) => void): void {
    this.lineListeners.push(listener);
  }
  onExit(listener: (code: number | null, signal: string | null) => void): void {
    this.exitListeners.push(listener);
  }
  signal(signal: NodeJS.Signals): boolean {
    this.signals.push(signal);
    return true;
  }
  signalGroup(signal: NodeJS.Signals): boolean {
    this.signals.push(`group:${signal}`);
    return true;
  }
  send(line: string): boolean {
    this.sent.push(line);
    return true;
  }
  say(stream: 'stdout' | 'stderr', line: string): void {
    for (const l of this.lineListeners) l(stream, line);
  }
  exit(code: number | null, signal: string | null = null): void {
    for (const l of this.exitListeners) l(code, signal);
  }
}

function setup(extra: Partial<SupervisorDeps> = {}): { supervisor: Supervisor; clock: FakeClock; spawned: RecordedProcess[]; events: SupervisorEvent[]; active: Map<string, boolean> } {
  const clock = new FakeClock();
  const spawned: RecordedProcess[] = [];
  const events: SupervisorEvent[] = [];
  const active = new Map<string, boolean>();
  const supervisor = new Supervisor({
    clock,
    policy: POLICY_M10_V1,
    leases: new LeaseBook(),
    envelopes: null,
    snapshot: () => ({ nowUs: clock.wallUs(), node: 'test-node', accelerator: { key: 'GPU-sim', name: 'Sim' }, queueDepth: 0, device: { key: 'GPU-sim', name: 'Sim', totalBytes: 24 * GiB, observedUsedBytes: 0, processes: null, health: 'OK', sampledAtUs: clock.wallUs() }, pressure: 'NORMAL', controls: DEFAULT_CONTROLS }),
    spawn: (request) => {
      const p = new RecordedProcess(5000 + spawned.length, request);
      spawned.push(p);
      return p;
    },
    launchers: { nodePath: 'node', cliPath: 'cli.js', builtinHostPath: 'host.js' },
    gpuKey: 'GPU-sim',
    residentBytes: () => 2 * GiB,
    isActive: (engine) => active.get(engine.id) ?? false,
    onEvent: (event) => events.push(event),
    ...extra,
  });
  return { supervisor, clock, spawned, events, active };
}

const spec = (overrides: Partial<LaunchSpec> = {}): LaunchSpec => ({ profileId: 'tiny', name: 'tiny-chat', kind: 'builtin', capability: 'chat', modelPath: '/m/tiny.gguf', modelKey: 'k', contextSize: 256, gpuLayers: 99, threads: 1, weight: 1, priority: 'interactive', pinned: false, command: null, args: [], env: {}, peakBytes: 1 * GiB, peakSource: 'ESTIMATED', ...overrides });

afterEach(() => vi.useRealTimers());

describe('supervisor (recorded processes)', () => {
  it('follows the engine host: progress, ready with its port, then running with the lease released', async () => {
    const { supervisor, spawned, events } = setup();
    const launching = supervisor.launch(spec());
    await Promise.resolve();
    const host = spawned[0];
    if (!host) throw new Error('nothing spawned');
    // V8's young generation kept small (BUILTIN_HOST_NODE_FLAGS), then the host and its flags.
    expect(host.request.args.slice(0, 4)).toEqual(['--max-semi-space-size=1', 'host.js', '--model', '/m/tiny.gguf']);
    for (const pct of [0, 40, 30, 100]) host.say('stdout', JSON.stringify({ event: 'progress', pct }));
    host.say('stdout', 'not a protocol line');
    host.say('stdout', JSON.stringify({ event: 'ready', port: 41234, slot: 2 }));
    const result = await launching;
    expect(result.engine).toMatchObject({ state: 'running', port: 41234, progressPct: 100, residentBytes: 2 * GiB });
    const progress = events.flatMap((e) => (e.kind === 'progress' ? [e.pct] : []));
    expect(progress).toEqual([0, 40, 40, 100]); // never goes backwards
    expect(supervisor.residents()).toHaveLength(1);
  });

  it('sends a new weight to the engine as a control line, refuses it once stopped', async () => {
    const { supervisor, spawned } = setup();
    const launching = supervisor.launch(spec({ weight: 3 }));
    await Promise.resolve();
    spawned[0]?.say('stdout', JSON.stringify({ event: 'ready', port: 1, slot: 0 }));
    const id = (await launching).engine?.id ?? '';
    supervisor.setWeight(id, 1.5);
    expect(spawned[0]?.sent).toEqual(['{"cmd":"weight","weight":1.5}']);
    expect(supervisor.weightOf(id)).toBe(1.5);
    const stopping = supervisor.stop(id);
    spawned[0]?.exit(0);
    await stopping;
    expect(() => supervisor.setWeight(id, 2)).toThrow(/stopped/);
    expect(() => supervisor.setWeight('nobody-9', 2)).toThrow(/no engine nobody-9/);
  });

  it('passes the gateway\'s count of requests to the `run` that paces a command engine, not to the built-in engine', async () => {
    const { supervisor, spawned } = setup();
    const command = supervisor.launch(spec({ profileId: 'cmd', kind: 'command', command: '/bin/engine', modelPath: null }));
    await Promise.resolve();
    spawned[0]?.say('stderr', 'gpu-share: joined GPU-sim slot 0');
    const commandId = (await command).engine?.id ?? '';
    const builtin = supervisor.launch(spec());
    await Promise.resolve();
    spawned[1]?.say('stdout', JSON.stringify({ event: 'ready', port: 1, slot: 1 }));
    const builtinId = (await builtin).engine?.id ?? '';
    supervisor.setRequests(commandId, 2);
    supervisor.setRequests(commandId, 0);
    supervisor.setRequests(builtinId, 1);
    supervisor.setRequests('nobody-9', 1);
    expect(spawned[0]?.sent).toEqual(['{"cmd":"requests","inFlight":2}', '{"cmd":"requests","inFlight":0}']);
    expect(spawned[1]?.sent).toEqual([]);
  });

  it('a command engine that declares a port is running once the port accepts a connection', async () => {
    const { createServer } = await import('node:net');
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    server.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const { supervisor, spawned } = setup();
    let settled = false;
    const launching = supervisor.launch(spec({ profileId: 'cmd', kind: 'command', command: '/bin/engine', modelPath: null, args: ['--port', String(port)] })).finally(() => (settled = true));
    await Promise.resolve();
    spawned[0]?.say('stderr', 'gpu-share: joined GPU-sim slot 0');
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(settled).toBe(false);
    expect(supervisor.list()[0]?.state).toBe('loading');
    const listening = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => listening.listen(port, '127.0.0.1', resolve));
    try {
      expect((await launching).engine).toMatchObject({ state: 'running', port });
    } finally {
      listening.close();
    }
  });

  it('counts an engine the gateway is serving on as busy at once (never evicted mid-answer)', async () => {
    const inUse = new Set<string>();
    const { supervisor, spawned } = setup({ inUse: (id) => inUse.has(id) });
    const launching = supervisor.launch(spec());
    await Promise.resolve();
    spawned[0]?.say('stdout', JSON.stringify({ event: 'ready', port: 1, slot: 0 }));
    const id = (await launching).engine?.id ?? '';
    expect(supervisor.residents()[0]?.busy).toBe(false);
    inUse.add(id);
    expect(supervisor.residents()[0]?.busy).toBe(true);
  });

  it('unloads an engine idle for its minutes, never a pinned one', async () => {
    const { supervisor, spawned, clock, active } = setup();
    const launch = async (s: LaunchSpec): Promise<string> => {
      const p = supervisor.launch(s);
      await Promise.resolve();
      spawned[spawned.length - 1]?.say('stdout', JSON.stringify({ event: 'ready', port: 1, slot: null }));
      return (await p).engine?.id ?? '';
    };
    const loose = await launch(spec({ profileId: 'loose', idleUnloadMinutes: 5 }));
    const pinned = await launch(spec({ profileId: 'pinned', idleUnloadMinutes: 5, pinned: true }));
    active.set(loose, true);
    clock.advance(60_000_000);
    await supervisor.tick(); // busy at minute 1
    active.set(loose, false);
    clock.advance(4 * 60_000_000);
    expect(await supervisor.tick()).toEqual([]); // idle 4 minutes: kept
    const stopping = supervisor.tick();
    clock.advance(60_000_001);
    const unloading = supervisor.tick();
    await Promise.resolve();
    spawned[0]?.exit(0);
    expect(await unloading).toEqual([loose]);
    await stopping;
    expect(spawned[0]?.signals).toEqual(['SIGTERM']);
    expect(spawned[1]?.signals).toEqual([]);
    expect(supervisor.get(pinned)?.state).toBe('running');
  });

  it('restarts a crashed engine with doubling backoff, up to its limit', async () => {
    vi.useFakeTimers();
    const { supervisor, spawned, events } = setup();
    const first = supervisor.launch(spec({ restart: { maxRestarts: 2, backoffMs: 1000 } }));
    await Promise.resolve();
    spawned[0]?.exit(1);
    await first;
    expect(events.filter((e) => e.kind === 'restart')).toEqual([{ kind: 'restart', id: 'tiny-1', attempt: 1, inMs: 1000 }]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(spawned).toHaveLength(2);
    spawned[1]?.exit(1);
    await vi.advanceTimersByTimeAsync(0);
    expect(events.filter((e) => e.kind === 'restart').map((e) => (e.kind === 'restart' ? e.inMs : 0))).toEqual([1000, 2000]);
    await vi.advanceTimersByTimeAsync(2000);
    spawned[2]?.exit(1);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(spawned).toHaveLength(3); // two restarts, then it stays crashed
  });

  it('kills the whole process group at once with kill()', async () => {
    const { supervisor, spawned } = setup();
    const p = supervisor.launch(spec());
    await Promise.resolve();
    spawned[0]?.say('stdout', JSON.stringify({ event: 'ready', port: 1, slot: null }));
    const id = (await p).engine?.id ?? '';
    const killing = supervisor.kill(id);
    spawned[0]?.exit(null, 'SIGKILL');
    expect((await killing).exitSignal).toBe('SIGKILL');
    expect(spawned[0]?.signals).toEqual(['group:SIGKILL']);
  });
});
