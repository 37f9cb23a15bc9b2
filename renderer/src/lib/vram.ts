/**
 * The stacked VRAM bars: the device's split (GPU view) and a plan's before/after (Models view).
 * Every bar's segments add up to the device total exactly, whatever the figures say: parts that
 * fall short leave an explicit "not accounted" segment; parts that overshoot (figures sampled at
 * slightly different moments) give back free space first, then reserve, then shrink together.
 */
import type { PlacementPlan, PolicyView, VramView } from '../../../electron/core/contract.js';
import type { PressureLevel } from '../../../electron/core/planner/policy.js';

export type SegmentKind = 'engine' | 'unaccounted' | 'external' | 'lease' | 'request' | 'reserve' | 'free';

export interface Segment {
  key: string;
  kind: SegmentKind;
  label: string;
  bytes: number;
  /** Of the total, 0–1; a bar's fractions sum to 1. */
  fraction: number;
  /** The engine's registry slot (its colour), for engine segments. */
  slot: number | null;
}

export interface StackedBar {
  totalBytes: number;
  segments: Segment[];
  /** How far the parts overshot the total before they were fitted (0 normally). */
  overshootBytes: number;
}

type Part = Omit<Segment, 'fraction'>;

/** Below this a shortfall is rounding in the figures, not a segment worth showing. */
export const UNACCOUNTED_MIN_BYTES = 1024 ** 2;

const clean = (bytes: number): number => (Number.isFinite(bytes) && bytes > 0 ? bytes : 0);

/** Fit parts to a total: see the module comment. Zero-byte parts are dropped. */
export function stack(totalBytes: number, parts: readonly Part[]): StackedBar {
  const total = clean(totalBytes);
  if (total === 0) return { totalBytes: 0, segments: [], overshootBytes: 0 };
  const fitted = parts.map((part) => ({ ...part, bytes: clean(part.bytes) }));
  const sum = fitted.reduce((acc, part) => acc + part.bytes, 0);
  let overshoot = sum - total;
  const overshootBytes = Math.max(0, overshoot);
  if (fitted.length === 0) {
    fitted.push({ key: 'unaccounted', kind: 'unaccounted', label: 'in use, not accounted', bytes: total, slot: null });
  } else if (overshoot > 0) {
    for (const kind of ['free', 'reserve'] as const) {
      for (const part of fitted) {
        if (part.kind !== kind || overshoot <= 0) continue;
        const give = Math.min(part.bytes, overshoot);
        part.bytes -= give;
        overshoot -= give;
      }
    }
    if (overshoot > 0) {
      const remaining = fitted.reduce((acc, part) => acc + part.bytes, 0);
      const scale = total / remaining;
      for (const part of fitted) part.bytes *= scale;
    }
  } else if (-overshoot < UNACCOUNTED_MIN_BYTES) {
    // A rounding gap, not memory anyone uses: it closes the bar as free space.
    const free = fitted.find((part) => part.kind === 'free') ?? fitted[fitted.length - 1];
    if (free !== undefined) free.bytes -= overshoot;
  } else if (overshoot < 0) {
    // Insert before the reserve: the gap is memory in use that no figure names.
    const at = fitted.findIndex((part) => part.kind === 'reserve' || part.kind === 'free');
    const gap: Part = { key: 'unaccounted', kind: 'unaccounted', label: 'in use, not accounted', bytes: -overshoot, slot: null };
    fitted.splice(at === -1 ? fitted.length : at, 0, gap);
  }
  const segments = fitted.filter((part) => part.bytes > 0).map((part) => ({ ...part, fraction: part.bytes / total }));
  return { totalBytes: total, segments, overshootBytes };
}

/** The GPU view's bar: engines (slot order), unmanaged external, leases, reserve, free. */
export function vramBar(view: VramView): StackedBar {
  const engines = [...view.engines].sort((a, b) => (a.slot ?? 99) - (b.slot ?? 99) || a.name.localeCompare(b.name));
  return stack(view.totalBytes, [
    ...engines.map((engine): Part => ({ key: `engine:${engine.engineId}`, kind: 'engine', label: engine.name, bytes: engine.bytes, slot: engine.slot })),
    { key: 'external', kind: 'external', label: 'other processes (not started by GPU Share)', bytes: view.unmanagedExternalBytes, slot: null },
    { key: 'lease', kind: 'lease', label: 'promised to loads in progress', bytes: view.leaseBytes, slot: null },
    { key: 'reserve', kind: 'reserve', label: 'reserve (kept free for the driver)', bytes: view.reserveBytes, slot: null },
    { key: 'free', kind: 'free', label: 'free to schedule', bytes: view.freeBytes, slot: null },
  ]);
}

export interface PlanBars {
  before: StackedBar;
  after: StackedBar;
  /** Bytes the request is short by (0 when it fits after the evictions). */
  shortBytes: number;
  freedBytes: number;
}

/** A plan's VRAM before and after: after = evictions freed, the request placed, the rest free. */
export function planBars(plan: PlacementPlan): PlanBars {
  const b = plan.breakdown;
  const freedBytes = plan.evictions.reduce((sum, e) => sum + clean(e.freedBytes), 0);
  const shortBytes = Math.max(0, -plan.headroomAfterBytes);
  const common = (managed: number): Part[] => [
    { key: 'managed', kind: 'engine', label: 'engines GPU Share started', bytes: managed, slot: null },
    { key: 'external', kind: 'external', label: 'other processes', bytes: b.unmanagedExternalBytes, slot: null },
    { key: 'lease', kind: 'lease', label: 'loads in progress', bytes: b.futureLeaseBytes, slot: null },
  ];
  const before = stack(b.totalBytes, [
    ...common(b.managedResidentBytes),
    { key: 'reserve', kind: 'reserve', label: 'reserve', bytes: b.reserveBytes, slot: null },
    { key: 'free', kind: 'free', label: 'schedulable', bytes: plan.headroomBeforeBytes, slot: null },
  ]);
  const after = stack(b.totalBytes, [
    ...common(b.managedResidentBytes - freedBytes),
    { key: 'request', kind: 'request', label: shortBytes > 0 ? 'this model (does not fit)' : 'this model', bytes: b.requirementBytes - shortBytes, slot: null },
    { key: 'reserve', kind: 'reserve', label: 'reserve', bytes: b.reserveBytes, slot: null },
    { key: 'free', kind: 'free', label: 'schedulable after', bytes: Math.max(0, plan.headroomAfterBytes), slot: null },
  ]);
  return { before, after, shortBytes, freedBytes };
}

export interface PressureMark {
  level: Exclude<PressureLevel, 'NORMAL'>;
  /** Of the total: the level is entered when physical use reaches it. */
  fraction: number;
}

/** Where the pressure levels start, by the numbers of the policy revision the core runs (they
 *  travel with it in the state). */
export function pressureMarks(rules: Pick<PolicyView['rules'], 'pressure'>): PressureMark[] {
  return (['ELEVATED', 'HIGH', 'CRITICAL'] as const).map((level) => ({ level, fraction: rules.pressure[level].enter }));
}

const seconds = (us: number): string => `${Number((us / 1e6).toFixed(1))} s`;
const pct = (fraction: number): string => `${Number((fraction * 100).toFixed(1))} %`;

/** The policy revision's numbers in words, one line each, for the GPU view. */
export function policyRuleLines(rules: PolicyView['rules']): string[] {
  const r = rules.reserve;
  const reserve = r.margin === 'add' ? `max(${gibText(r.minBytes)}, ${pct(r.fractionOfTotal)} of total) + ${gibText(r.runtimeMarginBytes)}` : `max(${gibText(r.minBytes)}, ${pct(r.fractionOfTotal)} of total, ${gibText(r.runtimeMarginBytes)})`;
  const levels = (['ELEVATED', 'HIGH', 'CRITICAL'] as const).map((level) => `${level} ${pct(rules.pressure[level].enter)} → below ${pct(rules.pressure[level].exit)}`).join(' · ');
  const waits = (['interactive', 'background', 'lab'] as const).map((p) => `${p} ${seconds(rules.queue.maxWaitUs[p])}`).join(', ');
  return [
    `reserve: ${reserve}`,
    `margin on a model's peak: max(${gibText(rules.envelopeMargin.minBytes)}, ${pct(rules.envelopeMargin.fraction)})`,
    `pressure (enter → leave): ${levels}; recovery after ${seconds(rules.recoveryHoldUs)} of continuous samples below`,
    `telemetry stale after ${seconds(rules.staleAfterUs)} · lease TTL ${seconds(rules.leaseTtlUs)} · history ${rules.historySize} plans`,
    `queue: ${rules.queue.maxDepth} waiting at most; waits ${waits}`,
  ];
}

function gibText(bytes: number): string {
  return bytes >= 1024 ** 3 ? `${Number((bytes / 1024 ** 3).toFixed(2))} GiB` : `${Number((bytes / 1024 ** 2).toFixed(1))} MiB`;
}

/** Physical use as a fraction of the total (what the pressure levels compare against). */
export function physicalUseFraction(view: VramView): number | null {
  if (!(view.totalBytes > 0)) return null;
  const used = view.engines.reduce((sum, e) => sum + clean(e.bytes), 0) + clean(view.unmanagedExternalBytes);
  return Math.min(1, used / view.totalBytes);
}

/** What a device's memory is called: the host CPU's is memory (RAM), a GPU's is VRAM. */
export function memoryNoun(device: { key: string; source?: string | null } | null): 'Memory' | 'VRAM' {
  return deviceNoun(device) === 'CPU' ? 'Memory' : 'VRAM';
}

/** What the device is called in words ("the GPU view", "sharing this CPU"): the host CPU as a
 *  device is a CPU, never a GPU. */
export function deviceNoun(device: { key: string; source?: string | null } | null): 'CPU' | 'GPU' {
  if (device === null) return 'GPU';
  return device.key === 'cpu-0' || device.source === 'cpu' ? 'CPU' : 'GPU';
}

/** The legend line of a pressure mark on the bar. */
export function pressureMarkWords(mark: PressureMark): string {
  return `${mark.level} from ${Math.round(mark.fraction * 100)} % in use`;
}
