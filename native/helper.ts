/**
 * The koffi binding of the registry helper (gpushare.c). This is the only file that calls into the
 * registry part of the helper (process-win32.ts binds the Windows job objects linked beside it); it maps its status codes to typed results and errors, and finds the library for this
 * platform (the packaged resources folder, then the development build folder).
 */
import koffi from 'koffi';
import { existsSync } from 'node:fs';
import { nativeCandidates, nativeFileNames } from './paths.js';

/** Status codes of gpushare.h; each says what the caller does next. */
export const HelperStatus = {
  /** Done. */
  OK: 0,
  /** A CAS lost a race, or the slot is no longer ours: re-read and decide again. */
  LOST: 1,
  /** A bug in the caller (bad key, slot out of range): fix the call. */
  ERR_ARG: -1,
  /** No segment yet (opened without create): nobody has joined; treat as an empty registry. */
  ERR_NOT_FOUND: -2,
  /** The OS refused access: report it; retrying will not help. */
  ERR_ACCESS: -3,
  /** Another OS failure: report it with the OS error code. */
  ERR_OS: -4,
  /** Foreign segment (size, magic, version, slot count): never written; report and leave it. */
  ERR_FOREIGN_SIZE: -5,
  ERR_FOREIGN_MAGIC: -6,
  ERR_FOREIGN_VERSION: -7,
  ERR_FOREIGN_SLOT_COUNT: -8,
  /** Opened read-only: open read-write to join. */
  ERR_READONLY: -9,
  /** Refused, left exactly as it was (see RefusalReason): a link, a FIFO, a directory, a device,
   *  or another user's segment. Opening never blocks on any of them. Report it; run unpaced. */
  ERR_SYMLINK: -10,
  ERR_FIFO: -11,
  ERR_DIRECTORY: -12,
  ERR_NOT_REGULAR: -13,
  ERR_OTHER_USER: -14,
  /** The file shrank under its mapping (truncated by someone): the access was caught, the handle
   *  is dead. The registry is broken: close it, run unpaced, open it again later. */
  ERR_TRUNCATED: -15,
} as const;

/** Why a name was refused. */
export type RefusalReason = 'symlink' | 'fifo' | 'directory' | 'not_regular' | 'other_user';

const REFUSAL_STATUS: Record<number, RefusalReason> = {
  [HelperStatus.ERR_SYMLINK]: 'symlink',
  [HelperStatus.ERR_FIFO]: 'fifo',
  [HelperStatus.ERR_DIRECTORY]: 'directory',
  [HelperStatus.ERR_NOT_REGULAR]: 'not_regular',
  [HelperStatus.ERR_OTHER_USER]: 'other_user',
};

const REFUSAL_TEXT: Record<RefusalReason, (owner: number) => string> = {
  symlink: () => 'it is a symbolic link',
  fifo: () => 'it is a FIFO',
  directory: () => 'it is a directory',
  not_regular: () => 'it is not a regular file (a device or a socket)',
  other_user: (owner) =>
    `it belongs to another user${process.platform === 'win32' ? '' : ` (uid ${owner})`}, and registries are per user unless shared (--shared-registry)`,
};

export type RegistryErrorCode =
  | 'BAD_ARGUMENT'
  | 'NOT_FOUND'
  | 'ACCESS_DENIED'
  | 'OS_ERROR'
  | 'FOREIGN_SIZE'
  | 'FOREIGN_MAGIC'
  | 'FOREIGN_VERSION'
  | 'FOREIGN_SLOT_COUNT'
  | 'READ_ONLY'
  | 'REFUSED'
  | 'REGISTRY_FULL'
  | 'BROKEN'
  | 'HELPER_MISSING';

export class RegistryError extends Error {
  constructor(
    readonly code: RegistryErrorCode,
    message: string,
    readonly osError: number | null = null,
    /** Set when code is REFUSED. */
    readonly refusal: RefusalReason | null = null,
  ) {
    super(message);
    this.name = 'RegistryError';
  }
}

/** What can be wrong with a segment that is not ours (the codec's header problems, too). */
export type ForeignProblem = 'size' | 'magic' | 'version' | 'slot_count';

const FOREIGN: Record<ForeignProblem, [RegistryErrorCode, string]> = {
  size: ['FOREIGN_SIZE', 'its size is not 4096 bytes'],
  magic: ['FOREIGN_MAGIC', 'its magic is not "OCGPU"'],
  version: ['FOREIGN_VERSION', 'its version is not 1'],
  slot_count: ['FOREIGN_SLOT_COUNT', 'its slot count is not 16'],
};

const FOREIGN_STATUS: Record<number, ForeignProblem> = {
  [HelperStatus.ERR_FOREIGN_SIZE]: 'size',
  [HelperStatus.ERR_FOREIGN_MAGIC]: 'magic',
  [HelperStatus.ERR_FOREIGN_VERSION]: 'version',
  [HelperStatus.ERR_FOREIGN_SLOT_COUNT]: 'slot_count',
};

/** A segment of our name that is not a GPU Share registry: found at open, or rewritten since. */
export function foreignSegmentError(segment: string, problem: ForeignProblem): RegistryError {
  const [code, detail] = FOREIGN[problem];
  return new RegistryError(
    code,
    `shared-memory segment ${segment} is not a GPU Share registry (ABI v1): ${detail}; ` +
      'it was left untouched. Another program owns that name, or an incompatible version of GPU Share created it.',
  );
}

/** Turn a failing status into a RegistryError that says what happened and what to do. */
export function statusError(status: number, segment: string, osError: number): RegistryError {
  const foreign = FOREIGN_STATUS[status];
  if (foreign !== undefined) return foreignSegmentError(segment, foreign);
  const refusal = REFUSAL_STATUS[status];
  if (refusal !== undefined) {
    return new RegistryError('REFUSED', `refused shared-memory segment ${segment}: ${REFUSAL_TEXT[refusal](osError)}; it was left untouched`, null, refusal);
  }
  switch (status) {
    case HelperStatus.ERR_ARG:
      return new RegistryError('BAD_ARGUMENT', `invalid argument for ${segment}`);
    case HelperStatus.ERR_NOT_FOUND:
      return new RegistryError('NOT_FOUND', `shared-memory segment ${segment} does not exist (no peer has joined)`);
    case HelperStatus.ERR_ACCESS:
      return new RegistryError('ACCESS_DENIED', `access to shared-memory segment ${segment} was denied (OS error ${osError}): it belongs to another user`, osError);
    case HelperStatus.ERR_READONLY:
      return new RegistryError('READ_ONLY', `shared-memory segment ${segment} was opened read-only`);
    case HelperStatus.ERR_TRUNCATED:
      return new RegistryError('BROKEN', `shared-memory segment ${segment} changed size under its mapping (someone truncated it): the registry is broken`);
    default:
      return new RegistryError('OS_ERROR', `shared-memory segment ${segment}: OS error ${osError} (status ${status})`, osError);
  }
}

/** An open segment; only the helper can use it. */
export interface SegmentHandle {
  readonly __segment: unique symbol;
}

export interface OpenOptions {
  /** Create the segment if missing (a joiner); an observer does not. */
  create: boolean;
  /** Map read-only (an observer). */
  readonly: boolean;
  /** Permission bits for a created segment; 0o600 by default (0o666 with shared). */
  mode?: number;
  /** A shared registry: accept other users' segments, create ours for every local user. */
  shared?: boolean;
}

export interface ClaimRequest {
  slot: number;
  /** 0 for a free slot, or the pid of a slot judged dead. */
  expectedPid: number;
  /** For a dead slot: the heartbeat it was judged dead on. */
  expectedHeartbeatUs: number;
  pid: number;
  ownerPid: number;
  bootUs: number;
  weight: number;
  active: boolean;
  name: string;
  nowUs: number;
}

export interface SlotUpdate {
  weight: number;
  active: boolean;
  busyPpm: number;
  ownerPid: number;
  /** undefined keeps the stored name. */
  name?: string;
}

export interface OpenedSegment {
  handle: SegmentHandle;
  created: boolean;
  /** Ours, opened without shared mode, and others could write it: it was set back to 0600. */
  tightened: boolean;
}

/** The helper's operations, typed. Methods returning boolean: false = GS_LOST. Every method that
 *  touches a segment throws RegistryError BROKEN once its file has shrunk under the mapping. */
export interface RegistryHelper {
  readonly libraryPath: string;
  /** Open the segment file at `path` (see registry/location.ts); `label` names it in errors. */
  open(path: string, options: OpenOptions, label?: string): OpenedSegment;
  close(handle: SegmentHandle): void;
  /** Delete the segment file at `path` (a missing one is not an error). */
  unlink(path: string, label?: string): void;
  /** The folder cosmopolitan means by /tmp/: GetTempPathW on Windows, with its separator. */
  tempDir(): string;
  wallUs(): number;
  /** Copies the segment into buf (≥ 4096 bytes); returns the torn-slot mask. */
  snapshot(handle: SegmentHandle, buf: Uint8Array, retries?: number): number;
  claim(handle: SegmentHandle, request: ClaimRequest): boolean;
  heartbeat(handle: SegmentHandle, slot: number, pid: number, bootUs: number, nowUs: number): boolean;
  update(handle: SegmentHandle, slot: number, pid: number, bootUs: number, fields: SlotUpdate): boolean;
  release(handle: SegmentHandle, slot: number, pid: number, bootUs: number): boolean;
}

/** Where the helper may be (see nativeCandidates). */
export function helperCandidates(): string[] {
  return nativeCandidates(nativeFileNames().library);
}

let loaded: RegistryHelper | null = null;

export function loadRegistryHelper(): RegistryHelper {
  if (loaded) return loaded;
  const candidates = helperCandidates();
  const libraryPath = candidates.find((path) => existsSync(path));
  if (libraryPath === undefined) {
    throw new RegistryError(
      'HELPER_MISSING',
      `the native registry helper is missing; tried:\n  ${candidates.join('\n  ')}\nbuild it with: npm run build:native`,
    );
  }
  loaded = bind(libraryPath);
  return loaded;
}

type Handle = SegmentHandle;

function bind(libraryPath: string): RegistryHelper {
  const lib = koffi.load(libraryPath);
  koffi.opaque('gs_segment');
  const gsOpen = lib.func('int32_t gs_open(const char *path, uint32_t flags, uint32_t mode, _Out_ gs_segment **out, _Out_ int32_t *opened)') as (
    path: string, flags: number, mode: number, out: [Handle | null], opened: [number]) => number;
  const gsClose = lib.func('void gs_close(gs_segment *seg)') as (seg: Handle) => void;
  const gsLastOsError = lib.func('int32_t gs_last_os_error(void)') as () => number;
  const gsUnlink = lib.func('int32_t gs_unlink(const char *path)') as (path: string) => number;
  const gsTempDir = lib.func('int32_t gs_temp_dir(_Out_ uint8_t *buf, uint32_t cap)') as (buf: Uint8Array, cap: number) => number;
  const gsWallUs = lib.func('int64_t gs_wall_us(void)') as () => number | bigint;
  const gsSnapshot = lib.func('int32_t gs_snapshot(gs_segment *seg, _Inout_ uint8_t *buf, uint32_t len, uint32_t retries, _Out_ uint32_t *torn)') as (
    seg: Handle, buf: Uint8Array, len: number, retries: number, torn: [number]) => number;
  const gsClaim = lib.func('int32_t gs_claim(gs_segment *seg, uint32_t slot, uint32_t expected_pid, int64_t expected_hb, uint32_t pid, uint32_t owner_pid, int64_t boot_us, float weight, uint32_t active, const char *name, int64_t now_us)') as (
    seg: Handle, slot: number, expectedPid: number, expectedHb: number, pid: number, ownerPid: number, bootUs: number, weight: number, active: number, name: string, nowUs: number) => number;
  const gsHeartbeat = lib.func('int32_t gs_heartbeat(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us, int64_t now_us)') as (
    seg: Handle, slot: number, pid: number, bootUs: number, nowUs: number) => number;
  const gsUpdate = lib.func('int32_t gs_update(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us, float weight, uint32_t active, uint32_t busy_ppm, uint32_t owner_pid, const char *name)') as (
    seg: Handle, slot: number, pid: number, bootUs: number, weight: number, active: number, busyPpm: number, ownerPid: number, name: string | null) => number;
  const gsRelease = lib.func('int32_t gs_release(gs_segment *seg, uint32_t slot, uint32_t pid, int64_t boot_us)') as (
    seg: Handle, slot: number, pid: number, bootUs: number) => number;

  const handled = (status: number, what: string): boolean => {
    if (status === HelperStatus.OK) return true;
    if (status === HelperStatus.LOST) return false;
    throw statusError(status, what, gsLastOsError());
  };
  const tornOut: [number] = [0];

  return {
    libraryPath,
    open(path, options, label = path) {
      const out: [Handle | null] = [null];
      const opened: [number] = [0];
      const shared = options.shared === true;
      const flags = (options.create ? 1 : 0) | (options.readonly ? 2 : 0) | (shared ? 4 : 0);
      const status = gsOpen(path, flags, options.mode ?? (shared ? 0o666 : 0o600), out, opened);
      if (status !== HelperStatus.OK || out[0] === null) throw statusError(status, label, gsLastOsError());
      return { handle: out[0], created: (opened[0] & 1) !== 0, tightened: (opened[0] & 2) !== 0 };
    },
    close: (handle) => gsClose(handle),
    unlink(path, label = path) {
      const status = gsUnlink(path);
      if (status !== HelperStatus.OK && status !== HelperStatus.ERR_NOT_FOUND) throw statusError(status, label, gsLastOsError());
    },
    tempDir() {
      const buf = new Uint8Array(4096);
      const length = gsTempDir(buf, buf.byteLength);
      if (length < 0) throw statusError(length, 'the temp folder', gsLastOsError());
      return new TextDecoder().decode(buf.subarray(0, length));
    },
    wallUs: () => Number(gsWallUs()),
    snapshot(handle, buf, retries = 16) {
      const status = gsSnapshot(handle, buf, buf.byteLength, retries, tornOut);
      if (status !== HelperStatus.OK) throw statusError(status, 'snapshot', gsLastOsError());
      return tornOut[0];
    },
    claim: (handle, r) =>
      handled(
        gsClaim(handle, r.slot, r.expectedPid, r.expectedHeartbeatUs, r.pid, r.ownerPid, r.bootUs, r.weight, r.active ? 1 : 0, r.name, r.nowUs),
        'claim',
      ),
    heartbeat: (handle, slot, pid, bootUs, nowUs) => handled(gsHeartbeat(handle, slot, pid, bootUs, nowUs), 'heartbeat'),
    update: (handle, slot, pid, bootUs, f) =>
      handled(gsUpdate(handle, slot, pid, bootUs, f.weight, f.active ? 1 : 0, Math.round(f.busyPpm), f.ownerPid, f.name ?? null), 'update'),
    release: (handle, slot, pid, bootUs) => handled(gsRelease(handle, slot, pid, bootUs), 'release'),
  };
}
