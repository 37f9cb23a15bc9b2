/**
 * An engine's measured device memory, for the supervisor once the engine runs: the driver's
 * per-process figure, or — on the host CPU as a device — its resident set. The CPU provider
 * reports only the pids it is told to track, so the caller names every engine it still runs.
 */
import { CpuProvider } from './cpu-provider.js';
import { engineTreesOf, foldEngineTrees, treeMemberPids, type EngineTrees } from './engine-trees.js';
import type { DeviceSample, TelemetryProvider } from './types.js';

/** The engine's use: its whole process tree's (engine-trees.ts). */
export function residentBytesOf(provider: TelemetryProvider, pid: number, runningPids: readonly number[], sampleNow: () => DeviceSample | null): number | null {
  const trees = engineTreesOf([...new Set([...runningPids, pid])]);
  trackEngineTrees(provider, trees);
  const sample = sampleNow();
  if (sample === null) return null;
  return foldEngineTrees(sample, trees).processes?.find((p) => p.pid === pid)?.usedBytes ?? null;
}

/** Names the processes whose memory the next sample must attribute: every member of the engines'
 *  trees (the CPU provider reports only those; a GPU's driver reports every process anyway). */
export function trackEngineTrees(provider: TelemetryProvider, trees: EngineTrees): void {
  if (provider instanceof CpuProvider) provider.trackPids(treeMemberPids(trees));
}
