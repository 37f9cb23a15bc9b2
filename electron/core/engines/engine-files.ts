/**
 * The engines running on this machine for a data folder, as files in `<data dir>/engines/`: one
 * per engine, written by the process that supervises it (`gpu-share launch`, or `serve` and the
 * app for each engine they start) and removed when it stops. `gpu-share engines` lists them; a
 * file whose supervisor is gone is stale and removed as it is read.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { DataFileError, jsonProblem, readDataFile, writeDataFile } from '../data-files.js';
import type { ManagedResident } from '../planner/types.js';
import type { Priority } from '../planner/policy.js';
import { processExists } from '../entry-point.js';

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

/** Written whole or not at all (temp file, fsync, rename): a full disk leaves no empty record,
 *  and the DataFileError says the record is missing. */
export function writeEngineFile(dataDir: string, state: EngineStateFile): void {
  mkdirSync(enginesDir(dataDir), { recursive: true, mode: 0o700 });
  checkEnginesDir(dataDir);
  writeDataFile(fileOf(dataDir, state.supervisorPid, state.id), `${JSON.stringify(state)}\n`);
}

export function removeEngineFile(dataDir: string, supervisorPid: number, engineId: string): void {
  rmSync(fileOf(dataDir, supervisorPid, engineId), { force: true });
}


/** `engines/` must be a folder of this user, not a link to one elsewhere (a DataFileError). */
function checkEnginesDir(dataDir: string): void {
  const dir = enginesDir(dataDir);
  const stat = lstatSync(dir);
  const uid = process.platform === 'win32' ? null : (process.getuid?.() ?? null);
  if (!stat.isDirectory()) throw new DataFileError(dir, `is ${stat.isSymbolicLink() ? 'a symbolic link' : 'not a folder'}: refused (not followed); remove it`, 'unsafe');
  if (uid !== null && stat.uid !== uid) throw new DataFileError(dir, `belongs to user ${stat.uid}, not to this user (${uid}): refused; remove it`, 'unsafe');
}

/** A record that could not be read while its supervisor runs: kept, and reported. */
export interface UnreadableEngineFile {
  file: string;
  supervisorPid: number;
  problem: string;
}

/** The supervisor's pid, from the file's name (`<pid>-<engine>.json`). */
const supervisorOfName = (name: string): number | null => {
  const match = /^(\d{1,10})-/.exec(name);
  return match === null ? null : Number(match[1]);
};

/**
 * The engines running for this data folder. A file whose supervisor is gone is removed; one that
 * cannot be read (half-written by an older version, refused as a link or FIFO) while the
 * supervisor its name gives is running is kept and listed as unreadable: an engine runs there.
 */
export function listEngineRecords(dataDir: string): { engines: EngineStateFile[]; unreadable: UnreadableEngineFile[] } {
  const dir = enginesDir(dataDir);
  const engines: EngineStateFile[] = [];
  const unreadable: UnreadableEngineFile[] = [];
  if (!existsSync(dir)) return { engines, unreadable };
  checkEnginesDir(dataDir);
  for (const name of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
    const file = join(dir, name);
    const namedSupervisor = supervisorOfName(name);
    let state: EngineStateFile;
    try {
      const text = readDataFile(file);
      if (text === null) continue; // removed meanwhile
      try {
        state = JSON.parse(text) as EngineStateFile;
      } catch (error) {
        throw new DataFileError(file, text === '' ? 'is empty' : jsonProblem(error), 'io');
      }
      if (state === null || typeof state !== 'object') throw new DataFileError(file, 'is not an engine record', 'io');
    } catch (error) {
      if (!(error instanceof DataFileError)) throw error;
      if (namedSupervisor !== null && processExists(namedSupervisor)) unreadable.push({ file, supervisorPid: namedSupervisor, problem: error.problem });
      else if (error.kind === 'io') rmSync(file, { force: true });
      continue;
    }
    if (typeof state.supervisorPid === 'number' && processExists(state.supervisorPid)) engines.push(state);
    else rmSync(file, { force: true });
  }
  return { engines: engines.sort((a, b) => a.startedAt.localeCompare(b.startedAt)), unreadable };
}

/** The engines running for this data folder (listEngineRecords' readable ones). */
export function listEngines(dataDir: string): EngineStateFile[] {
  return listEngineRecords(dataDir).engines;
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
