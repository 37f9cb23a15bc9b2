/**
 * The engines running on this machine for a data folder, as files in `<data dir>/engines/`: one
 * per engine, written by the process that supervises it (`gpu-share launch`, or `serve` and the
 * app for each engine they start) and removed when it stops. `gpu-share engines` lists them; a
 * file whose supervisor is gone is stale and removed as it is read.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ManagedResident } from '../planner/types.js';
import type { Priority } from '../planner/policy.js';

export interface EngineStateFile {
  id: string;
  profileId: string;
  name: string;
  kind: string;
  pid: number;
  /** The process that started it and stops it: `gpu-share launch`, `serve` or the app. */
  supervisorPid: number;
  port: number | null;
  gpuKey: string;
  startedAt: string;
  /** What the planner needs to count it as managed in another process's dry-run (`plan`); absent in
   *  files written before they were recorded. */
  priority?: Priority;
  weight?: number;
  /** Its envelope's peak, bytes. */
  peakBytes?: number;
}

export const enginesDir = (dataDir: string): string => join(dataDir, 'engines');

const fileOf = (dataDir: string, supervisorPid: number, engineId: string): string => join(enginesDir(dataDir), `${supervisorPid}-${engineId.replace(/[^A-Za-z0-9._-]/g, '_')}.json`);

export function writeEngineFile(dataDir: string, state: EngineStateFile): void {
  mkdirSync(enginesDir(dataDir), { recursive: true });
  writeFileSync(fileOf(dataDir, state.supervisorPid, state.id), `${JSON.stringify(state)}\n`);
}

export function removeEngineFile(dataDir: string, supervisorPid: number, engineId: string): void {
  rmSync(fileOf(dataDir, supervisorPid, engineId), { force: true });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, owned by someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The engines running for this data folder; files of supervisors that are gone are removed. */
export function listEngines(dataDir: string): EngineStateFile[] {
  const dir = enginesDir(dataDir);
  if (!existsSync(dir)) return [];
  const engines: EngineStateFile[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
    try {
      const state = JSON.parse(readFileSync(join(dir, file), 'utf8')) as EngineStateFile;
      if (typeof state.supervisorPid === 'number' && alive(state.supervisorPid)) engines.push(state);
      else rmSync(join(dir, file), { force: true });
    } catch {
      rmSync(join(dir, file), { force: true }); // half-written by a supervisor that died
    }
  }
  return engines.sort((a, b) => a.startedAt.localeCompare(b.startedAt));
}

/**
 * Of the engines listed for a data folder (listEngines), those that other GPU Share processes
 * (`launch`, `serve`, the app) run on one device, as the planner's managed residents: ours, not
 * external memory. This process cannot stop them, so a dry-run counts them pinned and busy (never
 * evicted); a file without a recorded priority, weight or peak (written by an older version)
 * counts as interactive, weight 1, and no envelope (its memory then counts only where the driver
 * attributes it).
 */
export function residentsSupervisedElsewhere(engines: readonly EngineStateFile[], gpuKey: string, nowUs: number): ManagedResident[] {
  return engines
    .filter((e) => e.gpuKey === gpuKey && e.supervisorPid !== process.pid)
    .map((e) => ({ id: e.id, pid: e.pid, priority: e.priority ?? 'interactive', pinned: true, busy: true, idleSinceUs: nowUs, envelopeBytes: e.peakBytes ?? 0, weight: e.weight ?? 1 }));
}

/** A resident's planner facts as an engine file records them (nothing when it is not known). */
export function residentFacts(resident: ManagedResident | undefined): Pick<EngineStateFile, 'priority' | 'weight' | 'peakBytes'> {
  return resident === undefined ? {} : { priority: resident.priority, weight: resident.weight, peakBytes: resident.envelopeBytes };
}
