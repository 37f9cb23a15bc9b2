/** A plan as text: the CLI's dry-run output and the golden files. Reads like a review: inputs,
 *  breakdown, verdict, reasons. Pure. */
import { describeModelProblem } from './model-problem.js';
import type { MemoryNeeds } from './memory.js';
import type { Elsewhere, ExecutableProblemCode, PlacementPlan, Reason } from './types.js';

export function formatBytes(bytes: number): string {
  const sign = bytes < 0 ? '−' : '';
  const abs = Math.abs(bytes);
  if (abs >= 1024 ** 3) return `${sign}${(abs / 1024 ** 3).toFixed(2)} GiB`;
  if (abs >= 1024 ** 2) return `${sign}${(abs / 1024 ** 2).toFixed(1)} MiB`;
  if (abs >= 1024) return `${sign}${(abs / 1024).toFixed(1)} KiB`;
  return `${sign}${abs} B`;
}

const field = (label: string, bytes: number): string => `  ${label.padEnd(22)} ${formatBytes(bytes).padStart(12)}  (${bytes} B)`;

/** A model's needs, part by part, as text: a part the estimate does not know says so. */
export function describeMemoryNeeds(m: MemoryNeeds): string[] {
  const why = m.peakSource === 'MEASURED' ? 'a measured peak has no parts' : 'no model file estimate splits this peak';
  const part = (label: string, bytes: number | null): string => (bytes === null ? `  ${label.padEnd(22)} ${'not known'.padStart(12)}  (${why})` : field(label, bytes));
  return [
    `memory needs (${m.peakSource === 'MEASURED' ? 'peak measured on an earlier load' : 'estimated from the model file'}):`,
    part('weights', m.weightsBytes),
    part(`KV cache (${m.contextSize} tok)`, m.kvCacheBytes),
    part('compute buffers', m.computeBytes),
    field('= peak', m.peakBytes),
    field('+ margin', m.marginBytes),
    field('= requirement', m.requirementBytes),
  ];
}

const seconds = (us: number | undefined): string => (us === undefined ? '—' : (us / 1e6).toFixed(1));

/** What stopping every idle engine the request may stop would leave, for a pressure reason. */
function afterStopping(reason: Reason): string {
  const freeable = reason.freeableBytes ?? 0;
  if (freeable <= 0) return ' and no idle engine of ours can relieve it';
  return `, still ${reason.pressureAfterEvictions ?? '—'} after stopping every idle engine it may (${formatBytes(freeable)} freed, ${formatBytes(reason.usedAfterEvictionsBytes ?? 0)} left in use)`;
}

/** One reason in plain words, with its figures: what the UI and the CLI print. */
export function explainReason(reason: Reason): string {
  const b = (n: number | undefined): string => (n === undefined ? '—' : formatBytes(n));
  switch (reason.code) {
    case 'FITS':
      return `FITS: needs ${b(reason.requestedBytes)}, ${b(reason.schedulableBytes)} schedulable`;
    case 'FITS_AFTER_EVICTION':
      return `FITS_AFTER_EVICTION: needs ${b(reason.requestedBytes)}, ${b(reason.schedulableBytes)} schedulable + ${b(reason.freeableBytes)} freed by stopping idle engines`;
    case 'WAIT_FOR_LEASES':
      return `WAIT_FOR_LEASES: needs ${b(reason.requestedBytes)}; ${b(reason.schedulableBytes)} schedulable now, ${b(reason.pendingBytes)} held by loads in progress`;
    case 'WAIT_FOR_BUSY_ENGINES':
      return `WAIT_FOR_BUSY_ENGINES: needs ${b(reason.requestedBytes)}; ${b(reason.schedulableBytes)} schedulable now, ${b(reason.pendingBytes)} held by busy engines or loads`;
    case 'TELEMETRY_STALE': {
      const age = reason.sampleAgeUs ?? 0;
      const limit = `${seconds(reason.staleAfterUs)} s limit`;
      if (reason.queryFailed === true) {
        return `TELEMETRY_STALE: the device's latest query failed; its last good figures are ${seconds(age)} s old (${limit}) and are not used; nothing is schedulable until a query succeeds`;
      }
      const when = age < 0 ? `is stamped ${seconds(-age)} s in the future (the clock stepped back), past the ${limit}` : `is ${seconds(age)} s old, past the ${limit}`;
      return `TELEMETRY_STALE: the last sample ${when}; nothing is schedulable until a fresh one arrives`;
    }
    case 'TELEMETRY_MISSING':
      return 'TELEMETRY_MISSING: no telemetry for this device; nothing is schedulable';
    case 'PRESSURE_DEFERS_BACKGROUND':
      return `PRESSURE_DEFERS_BACKGROUND: memory pressure is ${reason.pressure ?? '—'}${afterStopping(reason)}; background and lab work waits`;
    case 'PRESSURE_RELIEVED_BY_EVICTION':
      return `PRESSURE_RELIEVED_BY_EVICTION: memory pressure is ${reason.pressure ?? '—'}, ${reason.pressureAfterEvictions ?? '—'} once the idle engines are stopped (${b(reason.usedAfterEvictionsBytes)} left in use)`;
    case 'EXTERNAL_GPU_PRESSURE':
      return `EXTERNAL_GPU_PRESSURE: memory pressure is CRITICAL${afterStopping(reason)}: ${b(reason.unmanagedExternalBytes)} is used by processes GPU Share did not start`;
    case 'INSUFFICIENT_CAPACITY':
      return `INSUFFICIENT_CAPACITY: needs ${b(reason.requestedBytes)}, ${b(reason.schedulableBytes)} schedulable, ${b(reason.freeableBytes)} freeable; ${b(reason.unmanagedExternalBytes)} used by other processes`;
    case 'EXCEEDS_DEVICE':
      return `EXCEEDS_DEVICE: needs ${b(reason.requestedBytes)}, more than the device can ever offer (${b(reason.capacityBytes)} after the reserve)`;
    case 'DEVICE_FAILED':
      return `DEVICE_FAILED: the device reports health ${reason.health ?? 'FAILED'}`;
    case 'MODEL_MISSING':
    case 'MODEL_NOT_A_FILE':
    case 'MODEL_UNREADABLE':
    case 'MODEL_NOT_GGUF':
    case 'MODEL_TRUNCATED':
    case 'MODEL_MALFORMED':
      return `${reason.code}: the model file is ${describeModelProblem({ code: reason.code, fileBytes: reason.fileBytes, neededBytes: reason.neededBytes })}`;
    case 'ENGINE_EXECUTABLE_MISSING':
      return `ENGINE_EXECUTABLE_MISSING: the engine's executable ${reason.executable ?? '—'} ${describeExecutableProblem(reason.executableProblem)}`;
    case 'DRAINING':
      return 'DRAINING: GPU Share is draining this device; nothing new is placed';
    case 'LAB_PAUSED':
      return 'LAB_PAUSED: lab work is paused';
    case 'CAPABILITY_NOT_ALLOWED':
      return `CAPABILITY_NOT_ALLOWED: "${reason.capability ?? ''}" is not an allowed capability`;
    case 'CONTEXT_ABOVE_TRAINED':
      return `CONTEXT_ABOVE_TRAINED (warning): a context of ${reason.contextSize ?? '—'} tokens is above the ${reason.trainContextSize ?? '—'} the model was trained for; it is planned as asked, but the model may answer poorly past its trained context`;
  }
}

/** Why an executable cannot run, in words. */
export function describeExecutableProblem(problem: ExecutableProblemCode | undefined): string {
  switch (problem) {
    case 'NOT_ON_PATH':
      return 'is not on PATH: install it, or pick its path in the profile';
    case 'MISSING':
      return 'does not exist: install it, or pick another in the profile';
    case 'NOT_A_FILE':
      return 'is not a regular file: pick the executable itself in the profile';
    case 'NOT_EXECUTABLE':
      return 'cannot be run by this user (not executable): fix its permissions or pick another';
    case undefined:
      return 'cannot be run';
  }
}

/** A device as the user counts them: `GPU 1 "RTX 4090"` (`device 0 "…"` for the host CPU). */
export function deviceLabel(device: { key: string; name: string | null; index: number }): string {
  return `${device.key === 'cpu-0' ? 'device' : 'GPU'} ${device.index} "${device.name ?? device.key}"`;
}

/** The advice to take a request elsewhere: `launch it on GPU 1 "RTX 4090", which has room`. */
export function elsewhereAdvice(elsewhere: Elsewhere): string {
  return `launch it on ${deviceLabel(elsewhere)}, which has room${elsewhere.verdict === 'ADMIT' ? '' : ' once its idle engines are stopped'}`;
}

export function describePlan(plan: PlacementPlan): string {
  const r = plan.request;
  const b = plan.breakdown;
  const lines = [
    `verdict: ${plan.verdict}`,
    ...plan.reasons.map((reason) => `  - ${explainReason(reason)}`),
    ...(plan.elsewhere === undefined ? [] : [`  - elsewhere: ${plan.elsewhere === null ? 'no other device would take it now' : `${elsewhereAdvice(plan.elsewhere)} [${plan.elsewhere.key}]`}`]),
    '',
    `request: ${r.capability} · ${r.engineKind} · model ${r.modelKey} · ctx ${r.contextSize} · gpu layers ${r.gpuLayers} · ${r.priority}`,
    `  peak ${formatBytes(r.peakBytes)} (${r.peakSource}) · weight ${r.weight}`,
    `node: ${plan.node} · accelerator ${plan.accelerator.name ?? '—'} [${plan.accelerator.key}]`,
    `device: ${plan.device === null ? '— (no telemetry)' : `${plan.device.name} [${plan.device.key}] health ${plan.device.health}`}`,
    `attribution: ${plan.attribution} · sample age ${plan.eligible.sampleAgeUs === null ? '—' : `${(plan.eligible.sampleAgeUs / 1000).toFixed(0)} ms`} (limit ${(plan.eligible.staleAfterUs / 1000).toFixed(0)} ms)`,
    `pressure: ${plan.eligible.pressure}${plan.eligible.pressureAfterEvictions === plan.eligible.pressure ? '' : `, ${plan.eligible.pressureAfterEvictions} after the evictions`} · gateway queue ${plan.queue.depth} of ${plan.queue.maxDepth}`,
    '',
    ...describeMemoryNeeds(plan.memory),
    '',
    'VRAM breakdown:',
    field('total', b.totalBytes),
    field('observed used', b.observedUsedBytes),
    field('managed resident', b.managedResidentBytes),
    field('unmanaged external', b.unmanagedExternalBytes),
    field('future leases', b.futureLeaseBytes),
    field('reserve', b.reserveBytes),
    field('schedulable', b.schedulableBytes),
    field('requirement', b.requirementBytes),
    field('headroom after', plan.headroomAfterBytes),
    `  invariant delta (observed − managed): ${formatBytes(b.invariantDeltaBytes)}`,
  ];
  if (plan.residents.length > 0) {
    lines.push('', 'residents:');
    for (const res of plan.residents) lines.push(`  ${res.id} (pid ${res.pid}) ${res.priority} weight ${res.weight}${res.busy ? ' busy' : ' idle'}${res.pinned ? ' pinned' : ''}: ${formatBytes(res.usedBytes)}`);
  }
  if (plan.evictions.length > 0) {
    lines.push('', 'evictions (in order):');
    for (const e of plan.evictions) lines.push(`  stop ${e.id} (pid ${e.pid}, ${e.priority}, idle ${(e.idleForUs / 1e6).toFixed(0)} s): frees ${formatBytes(e.freedBytes)}`);
  }
  if (plan.inputs !== undefined) {
    lines.push('', plan.inputs.from === 'serve' ? `inputs: from the running serve/app for ${plan.inputs.dataDir} (${plan.inputs.url})` : `inputs: from the files of ${plan.inputs.dataDir} (${plan.inputs.why})`);
  }
  lines.push('', `policy ${plan.policy} · fingerprint ${plan.fingerprint}`);
  return `${lines.join('\n')}\n`;
}
