/** Builders for contract values in tests: complete objects with overridable fields. */
import { CONTRACT_VERSION, type AppState, type DeviceView, type EngineView, type PeerRow, type PlacementPlan, type VramView } from '../../../electron/core/contract.js';
import { POLICY_M10_V1, POLICY_REVISIONS } from '../../../electron/core/planner/policy.js';

export const GiB = 1024 ** 3;

export function peerRow(overrides: Partial<PeerRow> = {}): PeerRow {
  return { slot: 0, pid: 1000, name: 'qwen-chat', weight: 1, sharePct: 100, busyPct: 50, active: true, heartbeatAgeMs: 200, engineId: 'qwen-chat-1', kind: 'llama-server', ...overrides };
}

export function vramView(overrides: Partial<VramView> = {}): VramView {
  return {
    totalBytes: 24 * GiB,
    engines: [{ engineId: 'qwen-chat-1', name: 'qwen-chat', slot: 0, bytes: 6 * GiB }],
    unmanagedExternalBytes: 2 * GiB,
    leaseBytes: 1 * GiB,
    reserveBytes: 1.2 * GiB,
    freeBytes: 13.8 * GiB,
    attribution: 'KNOWN',
    ...overrides,
  };
}

export function deviceView(overrides: Partial<DeviceView> = {}): DeviceView {
  return {
    key: 'GPU-1234',
    name: 'RTX 4090',
    source: 'simulated',
    health: 'OK',
    pressure: 'NORMAL',
    vram: vramView(),
    telemetryProblem: null,
    history: [],
    peers: [peerRow()],
    schedule: { periodUs: 80_000, windows: [{ slot: 0, startUs: 0, lengthUs: 80_000, share: 1, stallBoundUs: 0 }] },
    ...overrides,
  };
}

export function engineView(overrides: Partial<EngineView> = {}): EngineView {
  return {
    id: 'qwen-chat-1',
    profileId: 'qwen-chat',
    name: 'qwen-chat',
    kind: 'llama-server',
    priority: 'interactive',
    pinned: false,
    pid: 1000,
    state: 'running',
    progressPct: 100,
    port: 8081,
    exitCode: null,
    exitSignal: null,
    exitedAtUs: null,
    tokensPerSecond: null,
    timeToFirstTokenMs: null,
    tokensHistory: [],
    weight: 1,
    gpuKey: 'GPU-1234',
    slot: 0,
    residentBytes: 6 * GiB,
    startedAtUs: 1_700_000_000_000_000,
    busy: true,
    logTail: [],
    ...overrides,
  };
}

export function appState(overrides: Partial<AppState> = {}): AppState {
  return {
    contractVersion: CONTRACT_VERSION,
    wallUs: 1_700_000_000_000_000,
    devices: [deviceView()],
    engines: [engineView()],
    profiles: [],
    launchDefaults: [],
    profileFailures: [],
    dataProblems: [],
    policy: { labPaused: false, draining: false, idleUnloadMinutes: null, revision: 'm10-v1', revisions: POLICY_REVISIONS.map((p) => p.revision), rules: (({ revision: _revision, ...rules }) => rules)(POLICY_M10_V1) },
    plans: [],
    gateway: { queueDepth: 0, queueLimit: 32 },
    api: { port: 7787, dataDir: '/home/user/.local/share/gpu-share', token: 'fixture-token-0123456789abcdefghijklmnopqrstuv' },
    ...overrides,
  };
}

export function placementPlan(overrides: Partial<PlacementPlan> = {}): PlacementPlan {
  return {
    verdict: 'ADMIT',
    reasons: [{ code: 'FITS', requestedBytes: 4 * GiB, schedulableBytes: 10 * GiB }],
    policy: 'm10-v1',
    fingerprint: 'a1b2c3d4e5f6a7b8c9d0',
    attribution: 'KNOWN',
    breakdown: {
      totalBytes: 24 * GiB,
      observedUsedBytes: 8 * GiB,
      managedResidentBytes: 6 * GiB,
      unmanagedExternalBytes: 2 * GiB,
      futureLeaseBytes: 1 * GiB,
      reserveBytes: 1.2 * GiB,
      schedulableBytes: 13.8 * GiB,
      requirementBytes: 4 * GiB,
      invariantDeltaBytes: 2 * GiB,
      physicalUsedBytes: 8 * GiB,
    },
    memory: { contextSize: 8192, weightsBytes: 2.6 * GiB, kvCacheBytes: 0.8 * GiB, computeBytes: 0.2 * GiB, peakBytes: 3.6 * GiB, peakSource: 'ESTIMATED', marginBytes: 0.4 * GiB, requirementBytes: 4 * GiB },
    request: { capability: 'chat', modelKey: 'k1', contextSize: 8192, gpuLayers: 99, engineKind: 'llama-server', priority: 'interactive', peakBytes: 3.6 * GiB, peakSource: 'ESTIMATED', weight: 3 },
    node: 'workstation',
    accelerator: { key: 'GPU-1234', name: 'RTX 4090' },
    device: { key: 'GPU-1234', name: 'RTX 4090', health: 'OK' },
    eligible: { pressure: 'NORMAL', pressureAfterEvictions: 'NORMAL', sampleAgeUs: 120_000, staleAfterUs: 2_000_000 },
    queue: { depth: 0, maxDepth: 32 },
    residents: [{ id: 'qwen-chat-1', pid: 1000, priority: 'interactive', busy: true, pinned: false, weight: 3, usedBytes: 6 * GiB }],
    evictions: [],
    headroomBeforeBytes: 13.8 * GiB,
    headroomAfterBytes: 9.8 * GiB,
    plannedAtUs: 1_700_000_000_000_000,
    ...overrides,
  };
}
