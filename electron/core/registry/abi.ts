/**
 * Registry ABI v1: the byte layout of docs/registry.md, mirrored from native/gpushare.h: the natural C
 * layout of opencoti's field list, with our `seq` and `owner_pid` in its alignment holes. A test
 * compiles a C program against the header (and against opencoti's field list alone) and checks
 * that these offsets equal the C compiler's.
 */
export const MAGIC = 'OCGPU';
export const VERSION = 1;
export const SLOT_COUNT = 16;
export const SEGMENT_SIZE = 4096;
export const HEADER_SIZE = 16;
export const SLOT_SIZE = 88;
export const NAME_SIZE = 48;
/** Names are NUL-terminated inside their 48 bytes. */
export const NAME_MAX_BYTES = NAME_SIZE - 1;
export const GPU_KEY_MAX = 40;
export const GPU_KEY_PATTERN = /^[A-Za-z0-9._-]+$/;

export const HEADER_OFFSET = {
  magic: 0,
  version: 8,
  slot_count: 12,
} as const;

export const SLOT_OFFSET = {
  pid: 0,
  seq: 4,
  boot_us: 8,
  weight: 16,
  active: 20,
  heartbeat_us: 24,
  busy_ppm: 32,
  name: 36,
  /** Tail padding of opencoti's slot: 0 (a peer that does not write it) means "pid itself". */
  owner_pid: 84,
} as const;

export function slotOffset(index: number): number {
  return HEADER_SIZE + SLOT_SIZE * index;
}

/** The name opencoti's peers give cosmopolitan's shm_open; the file it stands for is in
 *  location.ts. */
export function segmentName(gpuKey: string): string {
  return `/opencoti-gpu-${gpuKey}`;
}
