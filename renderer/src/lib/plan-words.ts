/**
 * A plan in the user's words: the verdict as a chip, the reasons with their byte figures (the
 * core's own explainReason, so the CLI and the window say the same thing), and one line on what
 * to do next, in the form the UX asks for:
 * `REJECT_CAPACITY: needs 6.20 GiB, 3.10 GiB schedulable — stop "coder" or close the external
 * process using 5.00 GiB`.
 */
import type { PlacementPlan, Verdict } from '../../../electron/core/contract.js';
import { elsewhereAdvice, explainReason, formatBytes } from '../../../electron/core/planner/describe.js';
import type { Reason } from '../../../electron/core/planner/types.js';
import type { Tone } from './pacing.js';
import { deviceNoun } from './vram.js';

export interface VerdictChip {
  label: string;
  tone: Tone;
  /** The verdict in a sentence, for the chip's title. */
  meaning: string;
}

export function verdictChip(verdict: Verdict): VerdictChip {
  switch (verdict) {
    case 'ADMIT':
      return { label: 'fits', tone: 'ok', meaning: 'It fits now: launching loads it.' };
    case 'ADMIT_AFTER_EVICTION':
      return { label: 'fits after eviction', tone: 'warn', meaning: 'It fits once the listed idle engines are stopped.' };
    case 'QUEUE':
      return { label: 'queued', tone: 'info', meaning: 'Not now, possibly soon: it is planned again on the next change.' };
    case 'REJECT_CAPACITY':
      return { label: 'does not fit', tone: 'bad', meaning: 'It cannot fit on this device as it is: free memory first.' };
    case 'REJECT_HEALTH':
      return { label: 'cannot run', tone: 'bad', meaning: 'The device has failed, or the model file or the engine\'s executable cannot be used: the reason says which.' };
    case 'REJECT_POLICY':
      return { label: 'not allowed', tone: 'bad', meaning: 'An operator control (drain, lab pause, capabilities) forbids it.' };
  }
}

/** Every reason in plain words with its figures. */
export function reasonLines(plan: Pick<PlacementPlan, 'reasons'>): string[] {
  return plan.reasons.map((reason) => explainReason(reason));
}

const b = (n: number | undefined): string => (n === undefined || !Number.isFinite(n) ? '—' : formatBytes(n));
const seconds = (us: number | undefined): string => (us === undefined || !Number.isFinite(us) ? '—' : (us / 1e6).toFixed(1));
const quoteList = (names: readonly string[]): string => names.map((name) => `"${name}"`).join(', ');

/** Engine id → display name (the engines list); unknown ids show as the id. */
export type NameOf = (engineId: string) => string;

function firstReason(plan: PlacementPlan, ...codes: Reason['code'][]): Reason | undefined {
  return plan.reasons.find((reason) => codes.includes(reason.code));
}

/** The one-line headline: verdict code, the figures, and what to do; a plan that was not placed
 *  also names the other device that would take it, when the core found one. */
export function planHeadline(plan: PlacementPlan, nameOf: NameOf): string {
  const headline = headlineHere(plan, nameOf);
  const placed = plan.elsewhere === undefined || plan.elsewhere === null ? headline : `${headline} or ${elsewhereAdvice(plan.elsewhere)}`;
  const above = firstReason(plan, 'CONTEXT_ABOVE_TRAINED');
  return above === undefined ? placed : `${placed} · warning: a context of ${above.contextSize ?? '—'} tokens is above the ${above.trainContextSize ?? '—'} the model was trained for`;
}

function headlineHere(plan: PlacementPlan, nameOf: NameOf): string {
  const request = plan.breakdown.requirementBytes;
  const schedulable = plan.breakdown.schedulableBytes;
  switch (plan.verdict) {
    case 'ADMIT':
      return `ADMIT: needs ${b(request)}, ${b(schedulable)} schedulable — ${b(Math.max(0, plan.headroomAfterBytes))} left after`;
    case 'ADMIT_AFTER_EVICTION': {
      const names = plan.evictions.map((e) => nameOf(e.id));
      const freed = plan.evictions.reduce((sum, e) => sum + e.freedBytes, 0);
      const relieved = firstReason(plan, 'PRESSURE_RELIEVED_BY_EVICTION');
      const pressure = relieved === undefined ? '' : ` (memory pressure ${relieved.pressure ?? '—'} → ${relieved.pressureAfterEvictions ?? '—'})`;
      return `ADMIT_AFTER_EVICTION: needs ${b(request)}, ${b(schedulable)} schedulable — stops idle ${quoteList(names)} first, freeing ${b(freed)}${pressure}`;
    }
    case 'QUEUE': {
      const reason = firstReason(plan, 'WAIT_FOR_LEASES', 'WAIT_FOR_BUSY_ENGINES', 'TELEMETRY_STALE', 'TELEMETRY_MISSING', 'PRESSURE_DEFERS_BACKGROUND');
      if (reason?.code === 'TELEMETRY_STALE' && reason.queryFailed === true) {
        return `QUEUE: TELEMETRY_STALE: the device's latest query failed (its last good figures are ${seconds(reason.sampleAgeUs)} s old and not used) — it is planned again when a query succeeds; check the GPU driver if none does`;
      }
      if (reason?.code === 'TELEMETRY_STALE') {
        const age = reason.sampleAgeUs ?? 0;
        const old = age < 0 ? `stamped ${seconds(-age)} s in the future` : `${seconds(age)} s old`;
        return `QUEUE: TELEMETRY_STALE: the device's last sample is ${old} (limit ${seconds(reason.staleAfterUs)} s) — it is planned again when a fresh sample arrives; check the GPU driver if it does not`;
      }
      if (reason?.code === 'TELEMETRY_MISSING') return 'QUEUE: TELEMETRY_MISSING: no telemetry for this device yet — it is planned again when a sample arrives; check the GPU driver if none does';
      const why = reason === undefined ? 'waiting' : explainReason(reason);
      return `QUEUE: ${why} — it is planned again on the next change`;
    }
    case 'REJECT_CAPACITY': {
      const reason = firstReason(plan, 'INSUFFICIENT_CAPACITY', 'EXCEEDS_DEVICE', 'EXTERNAL_GPU_PRESSURE');
      if (reason?.code === 'EXCEEDS_DEVICE') {
        return `REJECT_CAPACITY: needs ${b(reason.requestedBytes)}, more than this device can offer (${b(reason.capacityBytes)}) — use a smaller model or fewer GPU layers`;
      }
      if (reason?.code === 'EXTERNAL_GPU_PRESSURE') {
        // Stopping our own idle engines was considered and does not relieve it: only the others can.
        const external = reason.unmanagedExternalBytes ?? plan.breakdown.unmanagedExternalBytes;
        return `REJECT_CAPACITY: memory pressure is CRITICAL even after stopping the idle engines it may — close the external processes using ${b(external)}`;
      }
      const stoppable = plan.residents
        .filter((r) => !r.pinned)
        .sort((x, y) => y.usedBytes - x.usedBytes)
        .slice(0, 2)
        .map((r) => nameOf(r.id));
      const external = reason?.unmanagedExternalBytes ?? plan.breakdown.unmanagedExternalBytes;
      const actions: string[] = [];
      if (stoppable.length > 0) actions.push(`stop ${quoteList(stoppable)}`);
      if (external > 0) actions.push(`close the external process using ${b(external)}`);
      if (actions.length === 0) actions.push('use a smaller model or fewer GPU layers');
      return `REJECT_CAPACITY: needs ${b(reason?.requestedBytes ?? request)}, ${b(reason?.schedulableBytes ?? schedulable)} schedulable — ${actions.join(' or ')}`;
    }
    case 'REJECT_HEALTH':
      return `REJECT_HEALTH: the device reports ${plan.device?.health ?? 'FAILED'} — nothing is placed on it until it recovers`;
    case 'REJECT_POLICY': {
      const reason = firstReason(plan, 'DRAINING', 'LAB_PAUSED', 'CAPABILITY_NOT_ALLOWED');
      switch (reason?.code) {
        case 'DRAINING':
          return `REJECT_POLICY: the device is draining — turn drain off in the ${deviceNoun(plan.device)} view to place new work`;
        case 'LAB_PAUSED':
          return `REJECT_POLICY: lab work is paused — resume it in the ${deviceNoun(plan.device)} view, or give the profile another priority`;
        case 'CAPABILITY_NOT_ALLOWED':
          return `REJECT_POLICY: "${reason.capability ?? ''}" is not an allowed capability`;
        default:
          return 'REJECT_POLICY: an operator control forbids it';
      }
    }
  }
}

/** What was asked, for the plan history: capability, engine, peak, context, priority. */
export function planAsked(plan: Pick<PlacementPlan, 'request'>): string {
  const r = plan.request;
  const peak = `${b(r.peakBytes)} peak (${r.peakSource === 'MEASURED' ? 'measured' : 'estimated'})`;
  // The profile by its name (its model id), with the capability it was planned for.
  const asked = r.profileName === undefined ? r.capability : `${r.profileName} (${r.capability})`;
  return `${asked} · ${r.engineKind} · ${peak} · ctx ${r.contextSize.toLocaleString('en-US')} · ${r.priority}`;
}

export function shortFingerprint(fingerprint: string): string {
  return fingerprint.length <= 10 ? fingerprint : fingerprint.slice(0, 10);
}

/** The history filter: all, or one verdict. */
export function filterPlans<T extends Pick<PlacementPlan, 'verdict'>>(plans: readonly T[], verdict: Verdict | 'ALL'): T[] {
  return verdict === 'ALL' ? [...plans] : plans.filter((plan) => plan.verdict === verdict);
}

/** Eviction lines: `stop "embed" (idle 12 min, frees 2.10 GiB)`. */
export function evictionLines(plan: Pick<PlacementPlan, 'evictions'>, nameOf: NameOf): string[] {
  return plan.evictions.map((e) => {
    const idleMin = e.idleForUs / 60e6;
    const idle = idleMin >= 1 ? `${Math.round(idleMin)} min` : `${Math.round(e.idleForUs / 1e6)} s`;
    return `stop "${nameOf(e.id)}" (${e.priority}, idle ${idle}, frees ${b(e.freedBytes)})`;
  });
}
