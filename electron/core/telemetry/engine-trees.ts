/**
 * An engine's memory is its process tree's. The pid GPU Share starts is often not the process that
 * holds the device memory: llama-server, llamafile and command engines run under `gpu-share run`
 * (the engine's pid is that supervisor), and Ollama or vLLM hold it in their runners or workers.
 * The driver lists the process that allocated, so every process of an engine's tree is counted as
 * the engine before anyone matches pids (the planner, the VRAM view, the measured envelope).
 * Linux walks procfs (descendants by ancestry, as the process gate does); elsewhere only the
 * engine's own pid is known, and memory its children hold counts as external there.
 */
import { linuxTreePids } from '../../../native/process-tree-linux.js';
import type { DeviceSample, ProcessUsage } from './types.js';

/** Engine pid → the pids of its tree (itself included). */
export type EngineTrees = ReadonlyMap<number, readonly number[]>;

const treePidsOf: (pid: number) => number[] = process.platform === 'linux' ? linuxTreePids : (pid) => [pid];

/** The trees of these engines now (one procfs walk each on Linux). */
export function engineTreesOf(enginePids: readonly number[], membersOf: (pid: number) => readonly number[] = treePidsOf): Map<number, readonly number[]> {
  return new Map(enginePids.map((pid) => [pid, membersOf(pid)]));
}

/** Every pid of every tree: what the CPU provider must report. */
export function treeMemberPids(trees: EngineTrees): number[] {
  return [...new Set([...trees.entries()].flatMap(([pid, members]) => [pid, ...members]))];
}

/**
 * The sample with each engine's tree folded into one entry under the engine's pid (the sum of its
 * members' use); processes of no tree stay as they are. A process in two trees (an engine started
 * inside another's tree) counts once, for the first engine that lists it. Pure.
 */
export function foldEngineTrees(sample: DeviceSample, trees: EngineTrees): DeviceSample {
  if (sample.processes === null || trees.size === 0) return sample;
  const ownerOf = new Map<number, number>();
  for (const [engine, members] of trees) {
    for (const pid of [engine, ...members]) if (!ownerOf.has(pid)) ownerOf.set(pid, engine);
  }
  const folded = new Map<number, number>();
  const others: ProcessUsage[] = [];
  for (const p of sample.processes) {
    const engine = ownerOf.get(p.pid);
    if (engine === undefined) others.push(p);
    else folded.set(engine, (folded.get(engine) ?? 0) + p.usedBytes);
  }
  if (folded.size === 0) return sample;
  return { ...sample, processes: [...others, ...[...folded].map(([pid, usedBytes]) => ({ pid, usedBytes }))] };
}
