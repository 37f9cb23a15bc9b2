/**
 * An engine's measured device memory, for the supervisor once the engine runs: the driver's
 * per-process figure, or — on the host CPU as a device — its resident set. The CPU provider
 * reports only the pids it is told to track, so the caller names every engine it still runs.
 */
import { CpuProvider } from './cpu-provider.js';
import type { DeviceSample, TelemetryProvider } from './types.js';

export function residentBytesOf(provider: TelemetryProvider, pid: number, runningPids: readonly number[], sampleNow: () => DeviceSample | null): number | null {
  trackEnginePids(provider, [...runningPids, pid]);
  return sampleNow()?.processes?.find((p) => p.pid === pid)?.usedBytes ?? null;
}

/** Names the engines whose memory the next sample must attribute (the CPU provider reports only
 *  those; a GPU's driver reports every process anyway). */
export function trackEnginePids(provider: TelemetryProvider, pids: readonly number[]): void {
  if (provider instanceof CpuProvider) provider.trackPids(pids);
}
