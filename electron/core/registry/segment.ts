/**
 * One open registry segment: reads (a native snapshot decoded by the codec) and the slot writes a
 * member needs. The buffer is reused: a read costs one native call and one decode.
 */
import { RegistryError, foreignSegmentError, type ClaimRequest, type RegistryHelper, type SegmentHandle, type SlotUpdate } from '../../../native/helper.js';
import { SEGMENT_SIZE, segmentName } from './abi.js';
import { decodeSegment, type DecodedSegment, type HeaderProblem } from './codec.js';

/** What a member needs of a segment; tests may substitute it. */
export interface SegmentPort {
  readonly gpuKey: string;
  read(): DecodedSegment;
  claim(request: ClaimRequest): boolean;
  heartbeat(slot: number, pid: number, bootUs: number, nowUs: number): boolean;
  update(slot: number, pid: number, bootUs: number, fields: SlotUpdate): boolean;
  release(slot: number, pid: number, bootUs: number): boolean;
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

export class RegistrySegment implements SegmentPort {
  private readonly buffer = new Uint8Array(SEGMENT_SIZE);
  private closed = false;

  private constructor(
    private readonly helper: RegistryHelper,
    private readonly handle: SegmentHandle,
    readonly gpuKey: string,
  ) {}

  /** A joiner: creates the segment if it is missing (for every local user with `shared`). Throws
   *  RegistryError: REFUSED (a link, FIFO, directory, device or another user's segment at the name;
   *  never blocks), a foreign header, an OS error. */
  static openForJoin(helper: RegistryHelper, gpuKey: string, access: RegistryAccess = registryAccess()): RegistrySegment {
    return new RegistrySegment(helper, helper.open(gpuKey, { create: true, readonly: false, shared: access.shared }).handle, gpuKey);
  }

  /** An observer: read-only; null when no peer has created the segment yet. Throws as openForJoin. */
  static openForObserve(helper: RegistryHelper, gpuKey: string, access: RegistryAccess = registryAccess()): RegistrySegment | null {
    try {
      const { handle } = helper.open(gpuKey, { create: false, readonly: true, shared: access.shared });
      return new RegistrySegment(helper, handle, gpuKey);
    } catch (error) {
      if (error instanceof RegistryError && error.code === 'NOT_FOUND') return null;
      throw error;
    }
  }

  /** The decoded segment. The decoded slots are copies: they stay valid after the next read. */
  read(): DecodedSegment {
    this.assertOpen();
    const torn = this.helper.snapshot(this.handle, this.buffer);
    return decodeSegment(this.buffer, torn);
  }

  /** Copy the raw segment into buf (≥ 4096 bytes); returns the torn-slot mask. */
  snapshotInto(buf: Uint8Array): number {
    this.assertOpen();
    return this.helper.snapshot(this.handle, buf);
  }

  claim(request: ClaimRequest): boolean {
    this.assertOpen();
    return this.helper.claim(this.handle, request);
  }

  heartbeat(slot: number, pid: number, bootUs: number, nowUs: number): boolean {
    this.assertOpen();
    return this.helper.heartbeat(this.handle, slot, pid, bootUs, nowUs);
  }

  update(slot: number, pid: number, bootUs: number, fields: SlotUpdate): boolean {
    this.assertOpen();
    return this.helper.update(this.handle, slot, pid, bootUs, fields);
  }

  release(slot: number, pid: number, bootUs: number): boolean {
    this.assertOpen();
    return this.helper.release(this.handle, slot, pid, bootUs);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.helper.close(this.handle);
  }

  private assertOpen(): void {
    if (this.closed) throw new Error(`registry segment ${segmentName(this.gpuKey)} is closed`);
  }
}
