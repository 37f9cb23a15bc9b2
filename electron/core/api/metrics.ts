/**
 * `/metrics` in Prometheus text format (prom-client, a registry of our own, no process metrics):
 * gauges are filled from one state snapshot at scrape time; plans are counted as they happen.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AppEvent, AppState } from '../contract.js';
import type { VERDICTS } from '../planner/types.js';

type Verdict = (typeof VERDICTS)[number];

export interface ApiMetrics {
  readonly contentType: string;
  render(): Promise<string>;
  /** Feed the core's events (counts plans by verdict). */
  onEvent(event: AppEvent): void;
  /** Gateway requests by outcome. */
  countRequest(outcome: 'ok' | 'rejected' | 'queue_full' | 'bad_request' | 'client_gone' | 'upstream_error'): void;
}

export function createApiMetrics(state: () => AppState): ApiMetrics {
  const registry = new Registry();
  const peer = ['gpu_key', 'slot', 'name', 'managed'] as const;
  let current: AppState | null = null;
  // One snapshot per scrape: every gauge's collect() reads it (the first one takes it).
  const snapshot = (): AppState => (current ??= state());

  const peerGauge = (name: string, help: string, value: (p: AppState['devices'][number]['peers'][number]) => number): Gauge<(typeof peer)[number]> =>
    new Gauge({
      name,
      help,
      labelNames: peer,
      registers: [registry],
      collect() {
        this.reset();
        for (const device of snapshot().devices) {
          for (const p of device.peers) this.set({ gpu_key: device.key, slot: String(p.slot), name: p.name, managed: String(p.engineId !== null) }, value(p));
        }
      },
    });
  peerGauge('gpushare_peer_weight', 'Registry weight of each alive peer.', (p) => p.weight);
  peerGauge('gpushare_peer_share_ratio', 'Resolved share of the device (0–1; 0 when idle).', (p) => p.sharePct / 100);
  peerGauge('gpushare_peer_busy_ratio', 'Measured busy fraction of each peer (0–1).', (p) => p.busyPct / 100);
  peerGauge('gpushare_peer_active', 'Whether the peer decoded within the activity window (1/0).', (p) => (p.active ? 1 : 0));
  peerGauge('gpushare_peer_heartbeat_age_seconds', 'Heartbeat age as this reader judged it.', (p) => p.heartbeatAgeMs / 1000);

  new Gauge({
    name: 'gpushare_vram_bytes',
    help: 'Device memory by part: total, engine (per managed engine), unmanaged_external, leases, reserve, free.',
    labelNames: ['gpu_key', 'part', 'engine'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const device of snapshot().devices) {
        const v = device.vram;
        if (v === null) continue; // unknown is absent, never a made-up zero
        this.set({ gpu_key: device.key, part: 'total', engine: '' }, v.totalBytes);
        for (const e of v.engines) this.set({ gpu_key: device.key, part: 'engine', engine: e.engineId }, e.bytes);
        this.set({ gpu_key: device.key, part: 'unmanaged_external', engine: '' }, v.unmanagedExternalBytes);
        this.set({ gpu_key: device.key, part: 'leases', engine: '' }, v.leaseBytes);
        this.set({ gpu_key: device.key, part: 'reserve', engine: '' }, v.reserveBytes);
        this.set({ gpu_key: device.key, part: 'free', engine: '' }, v.freeBytes);
      }
    },
  });
  new Gauge({
    name: 'gpushare_pressure_level',
    help: 'Memory pressure: 0 NORMAL, 1 ELEVATED, 2 HIGH, 3 CRITICAL.',
    labelNames: ['gpu_key'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const d of snapshot().devices) this.set({ gpu_key: d.key }, ['NORMAL', 'ELEVATED', 'HIGH', 'CRITICAL'].indexOf(d.pressure));
    },
  });
  new Gauge({
    name: 'gpushare_pacer_period_seconds',
    help: 'The TDM period now (absent when no peer is active).',
    labelNames: ['gpu_key'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const d of snapshot().devices) if (d.schedule !== null) this.set({ gpu_key: d.key }, d.schedule.periodUs / 1e6);
    },
  });
  new Gauge({
    name: 'gpushare_pacer_stall_bound_seconds',
    help: 'Each active peer\'s stall bound: the period less its own window.',
    labelNames: ['gpu_key', 'slot'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const d of snapshot().devices) for (const w of d.schedule?.windows ?? []) this.set({ gpu_key: d.key, slot: String(w.slot) }, w.stallBoundUs / 1e6);
    },
  });
  new Gauge({
    name: 'gpushare_engines',
    help: 'Engines GPU Share started, by state.',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const state of ['loading', 'running', 'stopping', 'stopped', 'exited', 'crashed'] as const) this.set({ state }, snapshot().engines.filter((e) => e.state === state).length);
    },
  });
  new Gauge({
    name: 'gpushare_gateway_queue_depth',
    help: 'Gateway requests waiting for an engine.',
    registers: [registry],
    collect() {
      this.set(snapshot().gateway.queueDepth);
    },
  });
  const plans = new Counter({ name: 'gpushare_plans_total', help: 'Placement plans made, by verdict.', labelNames: ['verdict'] as const, registers: [registry] });
  for (const verdict of ['ADMIT', 'ADMIT_AFTER_EVICTION', 'QUEUE', 'REJECT_CAPACITY', 'REJECT_HEALTH', 'REJECT_POLICY'] satisfies Verdict[]) plans.inc({ verdict }, 0);
  const overshoot = new Histogram({
    name: 'gpushare_pacer_window_overshoot_seconds',
    help: 'How far past the end of its window a managed engine ran (its last step, or a late suspend), per window.',
    labelNames: ['engine'] as const,
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1],
    registers: [registry],
  });
  const requests = new Counter({ name: 'gpushare_gateway_requests_total', help: 'Gateway requests by outcome.', labelNames: ['outcome'] as const, registers: [registry] });

  return {
    contentType: registry.contentType,
    async render() {
      current = null;
      try {
        return await registry.metrics();
      } finally {
        current = null;
      }
    },
    onEvent(event) {
      if (event.type === 'plan') plans.inc({ verdict: event.plan.verdict });
      if (event.type === 'pacer') for (const us of event.overshootsUs) overshoot.observe({ engine: event.engineId }, us / 1e6);
    },
    countRequest(outcome) {
      requests.inc({ outcome });
    },
  };
}
