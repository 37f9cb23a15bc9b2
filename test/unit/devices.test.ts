/** A device per engine: which device a launch goes to, the environment that pins the engine
 *  there, the supervisor planning on that device alone, and the advice naming another device. */
import { describe, expect, it } from 'vitest';
import { chooseLaunchDevice, deviceKindOf, pinningFor, CUDA_DEVICES_ENV, VULKAN_DEVICES_ENV } from '../../electron/core/engines/device-pinning.js';
import { ENGINE_KINDS } from '../../electron/core/engines/profiles.js';
import { builtinHostEnv } from '../../electron/core/engines/builtin/defaults.js';
import { commandFor, Supervisor, type LaunchSpec, type SpawnRequest, type SpawnedProcess } from '../../electron/core/engines/supervisor.js';
import { describePlan, elsewhereAdvice } from '../../electron/core/planner/describe.js';
import { chooseElsewhere, withElsewhere } from '../../electron/core/planner/elsewhere.js';
import { LeaseBook } from '../../electron/core/planner/leases.js';
import { plan } from '../../electron/core/planner/plan.js';
import { GiB, POLICY_M10_V1 } from '../../electron/core/planner/policy.js';
import { DEFAULT_CONTROLS, type DeviceSnapshot } from '../../electron/core/planner/snapshot.js';
import { launchDeviceOf } from '../../electron/core/commands/launch.js';
import { FakeClock } from '../../electron/core/clock.js';
import { device, request, snapshot } from '../fixtures/planner-cases.js';
import { golden } from '../fixtures/golden.js';
import type { DeviceSample } from '../../electron/core/telemetry/types.js';

const UUID_A = 'GPU-aaaaaaaa-1111-2222-3333-444444444444';
const UUID_B = 'GPU-bbbbbbbb-1111-2222-3333-444444444444';

describe('the device a launch goes to', () => {
  const devices = [
    { key: UUID_A, freeBytes: 2 * GiB },
    { key: UUID_B, freeBytes: 20 * GiB },
  ];

  it('takes the one asked for, then the profile\'s while present, then the selected one, then the most free memory', () => {
    expect(chooseLaunchDevice({ requested: UUID_A, preferred: UUID_B, selected: UUID_B, devices })).toEqual({ key: UUID_A, why: 'requested' });
    expect(chooseLaunchDevice({ preferred: UUID_A, selected: UUID_B, devices })).toEqual({ key: UUID_A, why: 'preferred' });
    expect(chooseLaunchDevice({ preferred: 'GPU-gone', selected: UUID_A, devices })).toEqual({ key: UUID_A, why: 'selected' });
    expect(chooseLaunchDevice({ preferred: null, selected: 'GPU-gone', devices })).toEqual({ key: UUID_B, why: 'most-free' });
    expect(chooseLaunchDevice({ devices })).toEqual({ key: UUID_B, why: 'most-free' });
  });

  it('ranks a device whose free memory is unknown last, keeps discovery order on a tie, and has no answer without devices', () => {
    expect(chooseLaunchDevice({ devices: [{ key: 'a', freeBytes: null }, { key: 'b', freeBytes: 0 }] })?.key).toBe('b');
    expect(chooseLaunchDevice({ devices: [{ key: 'a', freeBytes: GiB }, { key: 'b', freeBytes: GiB }] })?.key).toBe('a');
    expect(chooseLaunchDevice({ devices: [{ key: 'cpu-0', freeBytes: null }] })).toEqual({ key: 'cpu-0', why: 'only' });
    expect(chooseLaunchDevice({ devices: [] })).toBeNull();
  });

  it('`launch` takes --gpu-key as given, --gpu N as the N-th device, else the same rule', () => {
    const sample = (key: string, usedGiB: number): DeviceSample => ({ key, name: key, totalBytes: 24 * GiB, usedBytes: usedGiB * GiB, processes: null, utilizationPct: null, temperatureC: null, powerW: null, health: 'OK', sampledAtUs: 0, source: 'simulated' });
    const samples = [sample(UUID_A, 20), sample(UUID_B, 1)];
    expect(launchDeviceOf({}, { gpuKey: null }, samples)).toBe(UUID_B);
    expect(launchDeviceOf({}, { gpuKey: UUID_A }, samples)).toBe(UUID_A);
    expect(launchDeviceOf({ gpu: 0 }, { gpuKey: UUID_B }, samples)).toBe(UUID_A);
    expect(launchDeviceOf({ gpuKey: 'GPU-test-key' }, { gpuKey: null }, samples)).toBe('GPU-test-key');
    expect(() => launchDeviceOf({ gpu: 2 }, { gpuKey: null }, samples)).toThrow(/--gpu 2: there is no device 2/);
  });
});

describe('pinning an engine to its device through its environment', () => {
  it('names a GPU or MIG instance by its UUID in CUDA_VISIBLE_DEVICES for every engine kind, the built-in engine included', () => {
    for (const kind of ENGINE_KINDS) {
      expect(pinningFor(kind, UUID_B).env, kind).toEqual({ [CUDA_DEVICES_ENV]: UUID_B });
      expect(pinningFor(kind, UUID_B).note, kind).toMatch(/a Vulkan build is not pinned/);
    }
    expect(pinningFor('llama-server', 'MIG-9f2c1e0a-4b1d-5e6f-8a9b-0c1d2e3f4a5b').env).toEqual({ [CUDA_DEVICES_ENV]: 'MIG-9f2c1e0a-4b1d-5e6f-8a9b-0c1d2e3f4a5b' });
  });

  it('sets nothing for the host CPU or the Apple GPU, and says so for a device it cannot name (never an NVML index)', () => {
    expect(deviceKindOf('cpu-0')).toBe('cpu');
    for (const kind of ENGINE_KINDS) {
      expect(pinningFor(kind, 'cpu-0')).toEqual({ env: {}, note: null });
      expect(pinningFor(kind, 'metal-0')).toEqual({ env: {}, note: null });
    }
    expect(deviceKindOf('gpu-0123456789ab')).toBe('gpu-without-uuid');
    expect(pinningFor('builtin', 'gpu-0123456789ab')).toEqual({ env: {}, note: expect.stringContaining('has no UUID') });
    expect(pinningFor('command', 'sim-0')).toEqual({ env: {}, note: expect.stringContaining('is not a GPU UUID') });
  });

  it("keeps a profile's own CUDA_VISIBLE_DEVICES, saying so", () => {
    const pinned = pinningFor('llama-server', UUID_B, { [CUDA_DEVICES_ENV]: '0,1' });
    expect(pinned.env).toEqual({});
    expect(pinned.note).toContain(`keeps the profile's own ${CUDA_DEVICES_ENV}=0,1`);
  });

  it("puts the spec's device in the spawned environment and in the registry it joins, for each kind", () => {
    const deps = { launchers: { nodePath: '/node', cliPath: '/cli.js', builtinHostPath: '/host.js' }, gpuKey: UUID_A };
    const base: LaunchSpec = { profileId: 'm', name: 'm', kind: 'llama-server', capability: 'chat', modelPath: '/m/m.gguf', modelKey: 'k', contextSize: 256, gpuLayers: 99, threads: null, weight: 1, priority: 'interactive', pinned: false, command: '/bin/engine', args: [], env: { KEEP: '1' }, peakBytes: GiB, peakSource: 'ESTIMATED', gpuKey: UUID_B };
    for (const kind of ENGINE_KINDS) {
      const spawned = commandFor({ ...base, kind, command: kind === 'builtin' ? null : '/bin/engine' }, deps);
      expect(spawned.env[CUDA_DEVICES_ENV], kind).toBe(UUID_B);
      expect(spawned.env['KEEP'], kind).toBe('1');
      // Every kind but opencoti-llamafile (which keys its registry by the GPU it sees) is told its key.
      if (kind !== 'opencoti-llamafile') expect(spawned.args[spawned.args.indexOf('--gpu-key') + 1], kind).toBe(UUID_B);
    }
    expect(commandFor({ ...base, gpuKey: 'cpu-0' }, deps).env).toEqual({ KEEP: '1' });
    // The built-in engine's host decodes from one libuv pool thread, unless its profile says otherwise.
    expect(commandFor({ ...base, kind: 'builtin', command: null, gpuKey: 'cpu-0' }, deps).env).toEqual({ KEEP: '1', ...builtinHostEnv(null) });
    expect(builtinHostEnv(null)).toMatchObject({ UV_THREADPOOL_SIZE: '1' });
    expect(commandFor({ ...base, kind: 'builtin', command: null, env: { UV_THREADPOOL_SIZE: '4' } }, deps).env['UV_THREADPOOL_SIZE']).toBe('4');
    expect(commandFor({ ...base, kind: 'builtin', command: null, gpuKey: 'cpu-0', threads: 1 }, deps).env).toEqual({ KEEP: '1', ...builtinHostEnv(1) });
    // Where the spec's device is in Vulkan's order, when it was looked up.
    expect(commandFor({ ...base, vulkan: { index: 2, via: 'pci-bus-id' } }, deps).env[VULKAN_DEVICES_ENV]).toBe('2');
    expect(commandFor(base, deps).env[VULKAN_DEVICES_ENV]).toBeUndefined();
    // No device in the spec: the supervisor's default.
    const { gpuKey: _none, ...unplaced } = base;
    expect(commandFor(unplaced, deps).env[CUDA_DEVICES_ENV]).toBe(UUID_A);
  });
});

/** A process that never runs (the supervisor's plan and spawn are what is looked at); a signal
 *  ends it. */
class Inert implements SpawnedProcess {
  private readonly exits: ((code: number | null, signal: string | null) => void)[] = [];
  constructor(
    readonly pid: number,
    readonly request: SpawnRequest,
  ) {}
  onLine(): void {}
  onExit(listener: (code: number | null, signal: string | null) => void): void {
    this.exits.push(listener);
  }
  signal(signal: NodeJS.Signals): boolean {
    for (const listener of this.exits) listener(null, signal);
    return true;
  }
  signalGroup(signal: NodeJS.Signals): boolean {
    return this.signal(signal);
  }
  send(): boolean {
    return true;
  }
}

describe('the supervisor on two devices', () => {
  const clock = new FakeClock();
  const deviceSnapshot = (key: string, name: string, usedBytes: number): DeviceSnapshot => ({
    nowUs: clock.wallUs(),
    node: 'test-node',
    accelerator: { key, name },
    queueDepth: 0,
    device: { key, name, totalBytes: 24 * GiB, observedUsedBytes: usedBytes, processes: null, health: 'OK', sampledAtUs: clock.wallUs() },
    pressure: 'NORMAL',
    controls: DEFAULT_CONTROLS,
  });
  const snapshots: Record<string, DeviceSnapshot> = { [UUID_A]: deviceSnapshot(UUID_A, 'Sim A', 23 * GiB), [UUID_B]: deviceSnapshot(UUID_B, 'Sim B', 1 * GiB) };
  const spawned: Inert[] = [];
  const supervisor = new Supervisor({
    clock,
    policy: POLICY_M10_V1,
    leases: new LeaseBook(),
    envelopes: null,
    snapshot: (key) => snapshots[key] ?? deviceSnapshot(key, key, 0),
    spawn: (req) => {
      const p = new Inert(7000 + spawned.length, req);
      spawned.push(p);
      return p;
    },
    launchers: { nodePath: 'node', cliPath: 'cli.js', builtinHostPath: 'host.js' },
    gpuKey: UUID_A,
    deviceKeys: () => [UUID_A, UUID_B],
    residentBytes: () => null,
  });
  const spec = (over: Partial<LaunchSpec> = {}): LaunchSpec => ({ profileId: 'm1', name: 'm1', kind: 'builtin', capability: 'chat', modelPath: '/m/m.gguf', modelKey: 'k', contextSize: 256, gpuLayers: 99, threads: 1, weight: 1, priority: 'interactive', pinned: false, command: null, args: [], env: {}, peakBytes: 6 * GiB, peakSource: 'ESTIMATED', ...over });

  it('plans a spec on its own device and names the other device that would take it', () => {
    const onA = supervisor.plan(spec({ gpuKey: UUID_A }));
    expect(onA.verdict).toBe('REJECT_CAPACITY');
    expect(onA.accelerator.key).toBe(UUID_A);
    expect(onA.elsewhere).toEqual({ key: UUID_B, name: 'Sim B', index: 1, verdict: 'ADMIT', headroomAfterBytes: expect.any(Number) });
    const onB = supervisor.plan(spec({ gpuKey: UUID_B }));
    expect(onB.verdict).toBe('ADMIT');
    expect(onB.accelerator.key).toBe(UUID_B);
    expect(onB.elsewhere).toBeUndefined();
  });

  it('launches on the chosen device: pinned there, counted there and nowhere else', async () => {
    void supervisor.launch(spec({ profileId: 'big', gpuKey: UUID_B, peakBytes: 12 * GiB }));
    const engine = supervisor.list().find((e) => e.profileId === 'big');
    expect(engine?.gpuKey).toBe(UUID_B);
    expect(spawned.at(-1)?.request.env[CUDA_DEVICES_ENV]).toBe(UUID_B);
    expect(supervisor.residents(UUID_B).map((r) => r.id)).toEqual([engine?.id]);
    expect(supervisor.residents(UUID_A)).toEqual([]);
    // Its lease and residency fill B: a second 12 GiB model no longer fits there, and A is full.
    const again = supervisor.plan(spec({ profileId: 'big2', gpuKey: UUID_B, peakBytes: 12 * GiB }));
    expect(again.verdict).not.toMatch(/^ADMIT/);
    expect(again.elsewhere).toBeNull();
    await supervisor.stopAll(0);
  });
});

describe('advice naming another device', () => {
  const full = snapshot({ device: device({ observedUsedBytes: 23 * GiB, processes: [{ pid: 4242, usedBytes: 23 * GiB }] }) });
  const roomy = snapshot({ accelerator: { key: UUID_B, name: 'Sim B 24GB' }, device: device({ key: UUID_B, name: 'Sim B 24GB', observedUsedBytes: 1 * GiB }) });
  const req = request({ peakBytes: 6 * GiB });

  it('names the device that admits it, in the plan text (golden)', () => {
    const here = plan(req, full, POLICY_M10_V1);
    const advised = withElsewhere(here, [{ index: 1, plan: plan(req, roomy, POLICY_M10_V1) }]);
    expect(advised.elsewhere?.key).toBe(UUID_B);
    expect(elsewhereAdvice(advised.elsewhere!)).toBe('launch it on GPU 1 "Sim B 24GB", which has room');
    // Advice is not part of the plan's identity.
    expect(advised.fingerprint).toBe(here.fingerprint);
    const { expected, actual } = golden('plan-reject-capacity-another-device-has-room.txt', describePlan(advised));
    expect(actual).toBe(expected);
  });

  it('names none when no other device would take it, and looks for none for an admitted or policy-refused plan', () => {
    const here = plan(req, full, POLICY_M10_V1);
    expect(withElsewhere(here, [{ index: 1, plan: plan(req, full, POLICY_M10_V1) }]).elsewhere).toBeNull();
    expect(describePlan(withElsewhere(here, []))).toContain('elsewhere: no other device would take it now');
    const admitted = plan(req, roomy, POLICY_M10_V1);
    expect(withElsewhere(admitted, [{ index: 0, plan: here }]).elsewhere).toBeUndefined();
    const draining = plan(req, snapshot({ controls: { ...DEFAULT_CONTROLS, draining: true } }), POLICY_M10_V1);
    expect(withElsewhere(draining, [{ index: 1, plan: plan(req, roomy, POLICY_M10_V1) }]).elsewhere).toBeUndefined();
  });

  it('prefers a device that admits it now over one that needs evictions, then the most headroom', () => {
    const here = plan(req, full, POLICY_M10_V1);
    const a = { ...plan(req, roomy, POLICY_M10_V1), verdict: 'ADMIT_AFTER_EVICTION' as const, headroomAfterBytes: 20 * GiB, accelerator: { key: 'GPU-x', name: 'X' } };
    const b = { ...plan(req, roomy, POLICY_M10_V1), headroomAfterBytes: 5 * GiB, accelerator: { key: 'GPU-y', name: 'Y' } };
    const c = { ...plan(req, roomy, POLICY_M10_V1), headroomAfterBytes: 9 * GiB, accelerator: { key: 'GPU-z', name: 'Z' } };
    expect(chooseElsewhere(here, [{ index: 1, plan: a }, { index: 2, plan: b }, { index: 3, plan: c }])?.key).toBe('GPU-z');
    expect(chooseElsewhere(here, [{ index: 1, plan: a }])?.verdict).toBe('ADMIT_AFTER_EVICTION');
  });
});
