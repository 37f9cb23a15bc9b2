/** Golden plans: each reads like a review — the request, the device, the breakdown, the verdict
 *  and its reasons, the evictions. UPDATE_GOLDEN=1 rewrites them after a deliberate change. */
import { describe, expect, it } from 'vitest';
import { describePlan } from '../../electron/core/planner/describe.js';
import { plan } from '../../electron/core/planner/plan.js';
import { GiB, MiB, POLICY_M10_V1 } from '../../electron/core/planner/policy.js';
import type { PlanRequest, PlannerSnapshot } from '../../electron/core/planner/types.js';
import { NOW, device, lease, request, resident, snapshot } from '../fixtures/planner-cases.js';
import { golden } from '../fixtures/golden.js';

const CASES: [string, PlanRequest, PlannerSnapshot][] = [
  ['admit-empty-device', request(), snapshot()],
  [
    'evict-two-idle-engines',
    request({ priority: 'background', peakBytes: 8 * GiB, capability: 'code' }),
    snapshot({
      device: device({ observedUsedBytes: 18 * GiB, processes: [{ pid: 21, usedBytes: 3 * GiB }, { pid: 22, usedBytes: 3 * GiB }, { pid: 23, usedBytes: 3 * GiB }, { pid: 24, usedBytes: 3 * GiB }, { pid: 25, usedBytes: 6 * GiB }] }),
      residents: [
        resident('embed-lab', { pid: 21, priority: 'lab', idleSinceUs: NOW - 900_000_000 }),
        resident('summarise', { pid: 22, priority: 'background', idleSinceUs: NOW - 600_000_000 }),
        resident('coder', { pid: 23, priority: 'background', idleSinceUs: NOW - 10_000_000 }),
        resident('qwen-chat', { pid: 24, priority: 'interactive' }),
        resident('batch', { pid: 25, priority: 'lab', busy: true }),
      ],
    }),
  ],
  ['queue-behind-a-load', request({ peakBytes: 12 * GiB }), snapshot({ leases: [lease('loading-llama-70b', { reservedBytes: 9 * GiB, materializedBytes: 1 * GiB })] })],
  ['reject-external-process', request({ peakBytes: 6 * GiB }), snapshot({ device: device({ observedUsedBytes: 17 * GiB, processes: [{ pid: 4242, usedBytes: 17 * GiB }] }) })],
  [
    'queue-busy-engine-beside-external-process',
    request({ peakBytes: 6 * GiB }),
    snapshot({ device: device({ observedUsedBytes: 17 * GiB, processes: [{ pid: 4242, usedBytes: 15 * GiB }, { pid: 31, usedBytes: 2 * GiB }] }), residents: [resident('small', { pid: 31, busy: true })] }),
  ],
  ['queue-stale-telemetry', request(), snapshot({ device: device({ sampledAtUs: NOW - 4_200_000 }) })],
  [
    'evict-idle-engines-causing-critical-pressure',
    request({ priority: 'lab', capability: 'lab' }),
    snapshot({
      pressure: 'CRITICAL',
      device: device({ observedUsedBytes: 23.5 * GiB, processes: [{ pid: 51, usedBytes: 11.75 * GiB }, { pid: 52, usedBytes: 11.75 * GiB }] }),
      residents: [resident('lab1', { pid: 51, priority: 'lab', idleSinceUs: NOW - 900_000_000 }), resident('lab2', { pid: 52, priority: 'lab', idleSinceUs: NOW - 300_000_000 })],
    }),
  ],
  [
    'reject-critical-pressure-no-eviction-relieves',
    request({ peakBytes: 512 * MiB }),
    snapshot({
      pressure: 'CRITICAL',
      device: device({ observedUsedBytes: 23.5 * GiB, processes: [{ pid: 51, usedBytes: 0.5 * GiB }, { pid: 4242, usedBytes: 23 * GiB }] }),
      residents: [resident('lab1', { pid: 51, priority: 'lab', idleSinceUs: NOW - 900_000_000 })],
    }),
  ],
  [
    'queue-background-elevated-after-evictions',
    request({ priority: 'background', peakBytes: 512 * MiB, capability: 'code' }),
    snapshot({
      pressure: 'HIGH',
      queueDepth: 3,
      device: device({ observedUsedBytes: 22 * GiB, processes: [{ pid: 51, usedBytes: 3 * GiB }, { pid: 4242, usedBytes: 19 * GiB }] }),
      residents: [resident('lab1', { pid: 51, priority: 'lab', idleSinceUs: NOW - 900_000_000 })],
    }),
  ],
  ['queue-missing-telemetry', request(), snapshot({ device: null, accelerator: { key: 'GPU-test', name: null } })],
  // The device's latest query failed 0.3 s after good figures: stale at once, not 2 s later.
  ['queue-failed-query', request(), snapshot({ device: device({ sampledAtUs: NOW - 400_000, queryFailedAtUs: NOW - 100_000, health: 'UNKNOWN', processes: null }) })],
  ['context-above-trained', request({ contextSize: 8192, trainContextSize: 4096, peakBytes: 5 * GiB }), snapshot()],
  // The reserve, max(1 GiB, 5 %) + 256 MiB, on the device sizes people have: 8, 24 (above), 80, 141 GiB.
  ['reserve-8gib-device', request({ peakBytes: 4 * GiB }), snapshot({ device: device({ name: 'Test GPU 8GB', totalBytes: 8 * GiB, observedUsedBytes: 1 * GiB, processes: [{ pid: 4242, usedBytes: 1 * GiB }] }) })],
  ['reserve-80gib-device', request({ peakBytes: 40 * GiB }), snapshot({ device: device({ name: 'Test GPU 80GB', totalBytes: 80 * GiB, observedUsedBytes: 10 * GiB, processes: [{ pid: 4242, usedBytes: 10 * GiB }] }) })],
  ['reserve-141gib-device', request({ peakBytes: 120 * GiB }), snapshot({ device: device({ name: 'Test GPU 141GB', totalBytes: 141 * GiB, observedUsedBytes: 10 * GiB, processes: [{ pid: 4242, usedBytes: 10 * GiB }] }) })],
  ['estimated-no-per-process-figures', request({ peakBytes: 3 * GiB, peakSource: 'ESTIMATED' }), snapshot({ device: device({ observedUsedBytes: 9 * GiB, processes: null }), residents: [resident('a', { pid: 41, envelopeBytes: 7 * GiB + 512 * MiB })] })],
];

describe('golden plans', () => {
  for (const [name, req, snap] of CASES) {
    it(name, () => {
      const { expected, actual } = golden(`plan-${name}.txt`, describePlan(plan(req, snap, POLICY_M10_V1)));
      expect(actual).toBe(expected);
    });
  }
});
