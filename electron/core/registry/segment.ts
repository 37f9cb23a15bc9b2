/**
 * One open registry segment: reads (a native snapshot decoded by the codec) and the slot writes a
 * member needs. The buffer is reused: a read costs one native call and one decode.
 *
 * A segment whose file shrank under its mapping (someone truncated it) is broken: every call
 * throws RegistryError BROKEN (the helper caught the fault; no SIGBUS ends us), and the file is
 * opened again, at most every REOPEN_INTERVAL_MS, until it is a valid registry again. Callers run
 * unpaced meanwhile.
 */
import { lstatSync, statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { HelperStatus, RegistryError, foreignSegmentError, statusError, type ClaimRequest, type OpenOptions, type RegistryHelper, type SegmentHandle, type SlotUpdate } from '../../../native/helper.js';
import { SEGMENT_SIZE, segmentName } from './abi.js';
import { decodeSegment, type DecodedSegment, type HeaderProblem } from './codec.js';
import { segmentDirFor, segmentPathFor, type SegmentSystem } from './location.js';
import { isBrokenRegistry } from './broken.js';

/** How often a broken segment is opened again. */
export const REOPEN_INTERVAL_MS = 500;

let systemDir: SegmentSystem | null = null;

/** This machine's facts for the segment folder, found once. */
function thisSystem(helper: RegistryHelper): SegmentSystem {
  if (systemDir !== null) return systemDir;
  if (process.platform === 'win32') systemDir = { platform: 'win32', tempDir: helper.tempDir() };
  else if (process.platform === 'darwin') systemDir = { platform: 'darwin' };
  else {
    let devShmIsDirectory = false;
    try {
      // stat, not lstat: cosmopolitan's isdirectory() follows a /dev/shm that links to /run/shm.
      devShmIsDirectory = statSync('/dev/shm').isDirectory();
    } catch {
      // no /dev/shm: cosmopolitan uses /tmp/
    }
    systemDir = { platform: 'linux', devShmIsDirectory };
  }
  return systemDir;
}

/** The file of a key's segment on this machine. */
export function segmentPath(helper: RegistryHelper, gpuKey: string): string {
  return segmentPathFor(gpuKey, thisSystem(helper));
}

/** How errors name a segment: its shm name and its file. */
export function segmentLabel(gpuKey: string, path: string): string {
  return `${segmentName(gpuKey)} (${path})`;
}

/** Said once when a segment of ours was open to others and was set back to 0600. */
export type RegistryNote = (line: string) => void;
const stderrNote: RegistryNote = (line) => void process.stderr.write(`gpu-share: ${line}\n`);

/** What a member needs of a segment; tests may substitute it. */
export interface SegmentPort {
  readonly gpuKey: string;
  read(): DecodedSegment;
  claim(request: ClaimRequest): boolean;
  heartbeat(slot: number, pid: number, bootUs: number, nowUs: number): boolean;
  update(slot: number, pid: number, bootUs: number, fields: SlotUpdate): boolean;
  release(slot: number, pid: number, bootUs: number): boolean;
}

/** The segment folder of this machine (registry/location.ts). */
export function segmentDir(helper: RegistryHelper): string {
  return segmentDirFor(thisSystem(helper));
}

/** A header that changed under us after open (someone else rewrote the name's memory). */
export function headerProblemError(gpuKey: string, problem: HeaderProblem): RegistryError {
  return foreignSegmentError(segmentName(gpuKey), problem);
}

/** Whose segments we use: per user (the default), or shared among every local user. */
export interface RegistryAccess {
  /** Accept other users' segments and create ours mode 0666: trusts every local user. */
  readonly shared: boolean;
}

/** Set to 1 by --shared-registry and by the sharedRegistry setting, so that the engines and
 *  supervisors a process starts use the same registries as it does. */
export const SHARED_REGISTRY_ENV = 'GPU_SHARE_SHARED_REGISTRY';

export function registryAccess(env: NodeJS.ProcessEnv = process.env): RegistryAccess {
  return { shared: env[SHARED_REGISTRY_ENV] === '1' };
}

/** Shared registries from here on, for this process and every process it starts. */
export function shareRegistries(env: NodeJS.ProcessEnv = process.env): void {
  env[SHARED_REGISTRY_ENV] = '1';
}

/** `open()`, or null when the file is not there (no peer has created it yet). */
function nullWhenMissing<T>(open: () => T): T | null {
  try {
    return open();
  } catch (error) {
    if (error instanceof RegistryError && error.code === 'NOT_FOUND') return null;
    throw error;
  }
}

export class RegistrySegment implements SegmentPort {
  private readonly buffer = new Uint8Array(SEGMENT_SIZE);
  private closed = false;
  /** null while broken. */
  private handle: SegmentHandle | null;
  private broken: RegistryError | null = null;
  private reopenAtMs = 0;

  private constructor(
    private readonly helper: RegistryHelper,
    handle: SegmentHandle,
    readonly gpuKey: string,
    /** The segment's file (registry/location.ts). */
    readonly path: string,
    private readonly options: OpenOptions,
    private readonly note: RegistryNote,
    /** How errors name it. */
    readonly label: string = segmentLabel(gpuKey, path),
  ) {
    this.handle = handle;
  }

  /** An observer of a segment file found by content whose key is not known (`gpu-share
   *  devices`): `name` stands for the key in views and errors. Null when it is gone. */
  static observeFile(helper: RegistryHelper, path: string, name: string, access: RegistryAccess = registryAccess(), note: RegistryNote = stderrNote): RegistrySegment | null {
    const options: OpenOptions = { create: false, readonly: true, shared: access.shared };
    return nullWhenMissing(() => new RegistrySegment(helper, RegistrySegment.openFile(helper, path, path, options, note), name, path, options, note, path));
  }

  /** A joiner: creates the segment if it is missing (for every local user with `shared`). Throws
   *  RegistryError: REFUSED (a link, FIFO, directory, device or another user's file at the path;
   *  never blocks), a foreign header, an OS error. */
  static openForJoin(helper: RegistryHelper, gpuKey: string, access: RegistryAccess = registryAccess(), note: RegistryNote = stderrNote): RegistrySegment {
    const path = segmentPath(helper, gpuKey);
    const options: OpenOptions = { create: true, readonly: false, shared: access.shared };
    return new RegistrySegment(helper, RegistrySegment.openFile(helper, segmentLabel(gpuKey, path), path, options, note), gpuKey, path, options, note);
  }

  /** An observer: read-only; null when no peer has created the segment yet. Throws as openForJoin. */
  static openForObserve(helper: RegistryHelper, gpuKey: string, access: RegistryAccess = registryAccess(), note: RegistryNote = stderrNote): RegistrySegment | null {
    const path = segmentPath(helper, gpuKey);
    const options: OpenOptions = { create: false, readonly: true, shared: access.shared };
    return nullWhenMissing(() => new RegistrySegment(helper, RegistrySegment.openFile(helper, segmentLabel(gpuKey, path), path, options, note), gpuKey, path, options, note));
  }

  private static openFile(helper: RegistryHelper, label: string, path: string, options: OpenOptions, note: RegistryNote): SegmentHandle {
    const opened = helper.open(path, options, label);
    if (opened.tightened) note(`${label} could be written by other users; set it back to 0600 (registries are per user unless shared: --shared-registry)`);
    return opened.handle;
  }

  /** The decoded segment. The decoded slots are copies: they stay valid after the next read. */
  read(): DecodedSegment {
    const torn = this.guarded((handle) => this.helper.snapshot(handle, this.buffer));
    return decodeSegment(this.buffer, torn);
  }

  /** Copy the raw segment into buf (≥ 4096 bytes); returns the torn-slot mask. */
  snapshotInto(buf: Uint8Array): number {
    return this.guarded((handle) => this.helper.snapshot(handle, buf));
  }

  claim(request: ClaimRequest): boolean {
    return this.guarded((handle) => this.helper.claim(handle, request));
  }

  heartbeat(slot: number, pid: number, bootUs: number, nowUs: number): boolean {
    return this.guarded((handle) => this.helper.heartbeat(handle, slot, pid, bootUs, nowUs));
  }

  update(slot: number, pid: number, bootUs: number, fields: SlotUpdate): boolean {
    return this.guarded((handle) => this.helper.update(handle, slot, pid, bootUs, fields));
  }

  release(slot: number, pid: number, bootUs: number): boolean {
    return this.guarded((handle) => this.helper.release(handle, slot, pid, bootUs));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.handle !== null) this.helper.close(this.handle);
    this.handle = null;
  }

  /** Run one helper call on a live handle; a broken one is opened again first (rate-limited). */
  private guarded<T>(call: (handle: SegmentHandle) => T): T {
    if (this.closed) throw new Error(`registry segment ${segmentName(this.gpuKey)} is closed`);
    const handle = this.handle ?? this.reopen();
    try {
      return call(handle);
    } catch (error) {
      if (!isBrokenRegistry(error)) throw error;
      this.helper.close(handle);
      this.handle = null;
      this.broken = statusError(HelperStatus.ERR_TRUNCATED, this.label, 0);
      this.reopenAtMs = performance.now() + REOPEN_INTERVAL_MS;
      throw this.broken;
    }
  }

  private reopen(): SegmentHandle {
    const broken = this.broken ?? statusError(HelperStatus.ERR_TRUNCATED, this.label, 0);
    if (performance.now() < this.reopenAtMs) throw broken;
    this.reopenAtMs = performance.now() + REOPEN_INTERVAL_MS;
    // An empty file would make an observer's open wait for a creator that is not coming; a joiner
    // waits once and then restores it (every byte is zero: it adopts it).
    if (this.options.readonly) {
      try {
        if (lstatSync(this.path).size === 0) throw broken;
      } catch (error) {
        if (error === broken) throw error;
      }
    }
    try {
      this.handle = RegistrySegment.openFile(this.helper, this.label, this.path, this.options, this.note);
    } catch (error) {
      // Still not a valid registry (too small, foreign, gone): broken as before, said once.
      if (error instanceof RegistryError) throw broken;
      throw error;
    }
    this.broken = null;
    return this.handle;
  }
}
