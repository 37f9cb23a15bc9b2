/** App states for the shell's tests: the UX sketch's device (three of ours, one foreign peer). */
import type { AppState, DeviceView, EngineView, PeerRow, Profile } from '../../electron/core/contract.js';
import { POLICY_M10_V1 } from '../../electron/core/planner/policy.js';

export function peer(slot: number, name: string, fields: Partial<PeerRow> = {}): PeerRow {
  return { slot, pid: 1000 + slot, name, weight: 1, sharePct: 0, busyPct: 0, active: false, heartbeatAgeMs: 100, engineId: null, kind: 'peer', ...fields };
}

export function engine(id: string, fields: Partial<EngineView> = {}): EngineView {
  return {
    id,
    profileId: id.replace(/-\d+$/, ''),
    name: id,
    kind: 'builtin',
    priority: 'interactive',
    pinned: false,
    pid: 2000,
    state: 'running',
    progressPct: 100,
    port: 41000,
    exitCode: null,
    exitSignal: null,
    exitedAtUs: null,
    tokensPerSecond: null,
    timeToFirstTokenMs: null,
    tokensHistory: [],
    weight: 1,
    gpuKey: 'GPU-4090',
    slot: null,
    residentBytes: null,
    startedAtUs: 0,
    busy: false,
    logTail: [],
    ...fields,
  };
}

export function profile(id: string, name: string = id): Profile {
  return { id, name, capabilities: ['chat'], engineKind: 'builtin', modelPath: `/models/${id}.gguf`, contextSize: 4096, gpuLayers: 99, threads: null, weight: null, priority: 'interactive', pinned: false, idleUnloadMinutes: null, args: [], env: {}, command: null, gpuKey: null };
}

export function device(fields: Partial<DeviceView> = {}): DeviceView {
  return { key: 'GPU-4090', name: 'RTX 4090', source: 'nvml', health: 'OK', pressure: 'NORMAL', vram: null, telemetryProblem: null, history: [], peers: [], schedule: null, ...fields };
}

/** The sketch: qwen-chat 50 % (weight 2), coder 25 %, embed idle, a foreign llamafile 25 %. */
export function sketchState(): AppState {
  const peers = [
    peer(0, 'qwen-chat', { weight: 2, sharePct: 50, active: true, engineId: 'qwen-chat-1', kind: 'builtin' }),
    peer(1, 'coder', { weight: 1, sharePct: 25, active: true, engineId: 'coder-1', kind: 'llama-server' }),
    peer(2, 'embed', { weight: 1, sharePct: 0, active: false, engineId: 'embed-1', kind: 'builtin' }),
    peer(3, 'llamafile', { weight: 1, sharePct: 25, active: true }),
  ];
  const windows = [0, 1, 3].map((slot, index) => ({ slot, startUs: index * 30_000, lengthUs: 30_000, share: 0.25, stallBoundUs: 90_000 }));
  return {
    contractVersion: 1,
    wallUs: 1_800_000_000_000_000,
    devices: [device({ peers, schedule: { periodUs: 120_000, windows } })],
    engines: [engine('qwen-chat-1', { weight: 2, slot: 0 }), engine('coder-1', { slot: 1, kind: 'llama-server' }), engine('embed-1', { slot: 2 })],
    profiles: [profile('qwen-chat'), profile('coder'), profile('embed'), profile('big-model', 'Big model')],
    launchDefaults: [],
    profileFailures: [],
    dataProblems: [],
    policy: { labPaused: false, draining: false, idleUnloadMinutes: null, revision: 'm10-v1', revisions: ['m10-v1'], rules: (({ revision: _revision, ...rules }) => rules)(POLICY_M10_V1) },
    plans: [],
    gateway: { queueDepth: 0, queueLimit: 64 },
    api: { port: 7787, dataDir: '/tmp/gpu-share', token: 'shell-token-0123456789abcdefghijklmnopqrstuvwx' },
  };
}
