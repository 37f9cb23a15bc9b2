/**
 * Decode a registry snapshot into typed slots. Everything in a segment is untrusted: any byte
 * pattern decodes without throwing. Weights are used as written when finite and > 0, names are
 * display-only text. The alignment holes (seq, owner_pid) are hints: a peer written from
 * opencoti's field list alone may leave garbage there, so a slot is never hidden because of them;
 * one the native snapshot could not read consistently after its retries is used as read.
 */
import {
  HEADER_OFFSET,
  MAGIC,
  NAME_SIZE,
  SEGMENT_SIZE,
  SLOT_COUNT,
  SLOT_OFFSET,
  VERSION,
  slotOffset,
} from './abi.js';

/** The range of weights we write (flags, settings, API). A weight another peer wrote is used as
 *  is when finite and > 0 (opencoti's 500 is 500); NaN, ±∞ and ≤ 0 become DEFAULT_WEIGHT. */
export const MIN_WEIGHT = 0.01;
export const MAX_WEIGHT = 100;
export const DEFAULT_WEIGHT = 1;
const PPM = 1_000_000;

export type HeaderProblem = 'size' | 'magic' | 'version' | 'slot_count';

export interface SlotRecord {
  readonly slot: number;
  readonly pid: number;
  readonly seq: number;
  readonly bootUs: number;
  /** The weight used for shares, after sanitising. */
  readonly weight: number;
  /** Set when the stored weight was NaN, infinite or ≤ 0 (DEFAULT_WEIGHT is used instead). */
  readonly weightSanitised: boolean;
  readonly active: boolean;
  readonly heartbeatUs: number;
  /** Clamped to [0, 1e6]. */
  readonly busyPpm: number;
  /** The process writing the slot; `pid` when the stored owner_pid is 0. A hint (a hole another
   *  peer may fill with anything): believe it only where it names a process we know (ours, or the
   *  supervisor of an engine we started). */
  readonly ownerPid: number;
  readonly name: string;
}

/** An occupied slot whose fields kept changing through every retry of the native snapshot. It is
 *  in `slots` too, used as read; pid and heartbeat (each one atomic word) are exact. */
export interface TornSlot {
  readonly slot: number;
  readonly pid: number;
  readonly heartbeatUs: number;
}

export interface DecodedSegment {
  /** null when the header matches ABI v1; otherwise nothing else was decoded. */
  readonly headerProblem: HeaderProblem | null;
  /** Occupied slots in slot order, torn ones included (used as read). */
  readonly slots: readonly SlotRecord[];
  /** The occupied slots among them that were torn. */
  readonly torn: readonly TornSlot[];
  /** Indices of free slots (pid 0). */
  readonly free: readonly number[];
}

const utf8 = new TextDecoder('utf-8', { fatal: false });

export function sanitiseWeight(raw: number): { weight: number; sanitised: boolean } {
  if (!Number.isFinite(raw) || raw <= 0) return { weight: DEFAULT_WEIGHT, sanitised: true };
  return { weight: raw, sanitised: false };
}

/** Unicode bidirectional controls (ALM, LRM, RLM, the embeddings and overrides, the isolates):
 *  in a name they only serve to make it display as something else ("\u202eexe.gnp" as png.exe). */
const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** Text written by someone else, made safe to show: bidi controls stripped. */
export function stripBidiControls(text: string): string {
  return text.replace(BIDI_CONTROLS, '');
}

/** The stored name up to its first NUL, invalid UTF-8 replaced by U+FFFD, control characters
 *  replaced and bidi controls stripped, so that it can be printed anywhere and reads as it is. */
export function decodeName(bytes: Uint8Array): string {
  let end = bytes.indexOf(0);
  if (end === -1) end = bytes.length;
  // Fast path for printable ASCII, the usual case: no decoder, no regex.
  let ascii = '';
  for (let i = 0; i < end; i++) {
    const byte = bytes[i] ?? 0;
    if (byte < 0x20 || byte >= 0x7f) {
      const text = utf8.decode(bytes.subarray(0, end));
      return stripBidiControls(text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '\ufffd'));
    }
    ascii += String.fromCharCode(byte);
  }
  return ascii;
}

/** owner_pid lives in opencoti's tail padding: a peer that leaves it zero owns its own slot. */
export function ownerPidOf(pid: number, storedOwnerPid: number): number {
  return storedOwnerPid === 0 ? pid : storedOwnerPid;
}

/** A little-endian i64 as a Number (exact below 2^53, which every real µs timestamp is); cheaper
 *  than going through BigInt on every read. */
function readI64(view: DataView, offset: number): number {
  return view.getInt32(offset + 4, true) * 4294967296 + view.getUint32(offset, true);
}

export function checkHeader(view: DataView): HeaderProblem | null {
  if (view.byteLength !== SEGMENT_SIZE) return 'size';
  for (let i = 0; i < 8; i++) {
    const expected = i < MAGIC.length ? MAGIC.charCodeAt(i) : 0;
    if (view.getUint8(HEADER_OFFSET.magic + i) !== expected) return 'magic';
  }
  if (view.getUint32(HEADER_OFFSET.version, true) !== VERSION) return 'version';
  if (view.getUint32(HEADER_OFFSET.slot_count, true) !== SLOT_COUNT) return 'slot_count';
  return null;
}

/**
 * @param bytes a copy of the whole segment (SEGMENT_SIZE bytes)
 * @param tornMask bit i set when the native snapshot could not read slot i consistently: the slot
 *   is still decoded, as read (the seq hole is a hint, never a condition)
 */
export function decodeSegment(bytes: Uint8Array, tornMask = 0): DecodedSegment {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerProblem = checkHeader(view);
  if (headerProblem !== null) return { headerProblem, slots: [], torn: [], free: [] };
  const slots: SlotRecord[] = [];
  const torn: TornSlot[] = [];
  const free: number[] = [];
  for (let slot = 0; slot < SLOT_COUNT; slot++) {
    const base = slotOffset(slot);
    const pid = view.getUint32(base + SLOT_OFFSET.pid, true);
    const seq = view.getUint32(base + SLOT_OFFSET.seq, true);
    const heartbeatUs = readI64(view, base + SLOT_OFFSET.heartbeat_us);
    if (pid === 0) {
      free.push(slot);
      continue;
    }
    if ((tornMask & (1 << slot)) !== 0) torn.push({ slot, pid, heartbeatUs });
    const { weight, sanitised } = sanitiseWeight(view.getFloat32(base + SLOT_OFFSET.weight, true));
    const busyRaw = view.getUint32(base + SLOT_OFFSET.busy_ppm, true);
    slots.push({
      slot,
      pid,
      seq,
      bootUs: readI64(view, base + SLOT_OFFSET.boot_us),
      weight,
      weightSanitised: sanitised,
      // Any non-zero value counts: a writer from another language may store `true` as 0xFF.
      active: view.getUint32(base + SLOT_OFFSET.active, true) !== 0,
      heartbeatUs,
      busyPpm: Math.min(busyRaw, PPM),
      ownerPid: ownerPidOf(pid, view.getUint32(base + SLOT_OFFSET.owner_pid, true)),
      name: decodeName(bytes.subarray(base + SLOT_OFFSET.name, base + SLOT_OFFSET.name + NAME_SIZE)),
    });
  }
  return { headerProblem: null, slots, torn, free };
}

/** Fields of one slot, for writing test segments and fixtures exactly as another program would. */
export interface SlotFields {
  pid: number;
  seq?: number;
  bootUs?: number;
  weight?: number;
  active?: boolean | number;
  heartbeatUs?: number;
  busyPpm?: number;
  ownerPid?: number;
  name?: string | Uint8Array;
}

/** A fresh, valid segment image (header only). */
export function encodeEmptySegment(): Uint8Array {
  const bytes = new Uint8Array(SEGMENT_SIZE);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < MAGIC.length; i++) view.setUint8(HEADER_OFFSET.magic + i, MAGIC.charCodeAt(i));
  view.setUint32(HEADER_OFFSET.version, VERSION, true);
  view.setUint32(HEADER_OFFSET.slot_count, SLOT_COUNT, true);
  return bytes;
}

/** Write one slot into a segment image, straight from the ABI table. */
export function encodeSlot(bytes: Uint8Array, slot: number, fields: SlotFields): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const base = slotOffset(slot);
  view.setUint32(base + SLOT_OFFSET.pid, fields.pid >>> 0, true);
  view.setUint32(base + SLOT_OFFSET.seq, (fields.seq ?? 0) >>> 0, true);
  view.setBigInt64(base + SLOT_OFFSET.boot_us, BigInt(Math.trunc(fields.bootUs ?? 0)), true);
  view.setFloat32(base + SLOT_OFFSET.weight, fields.weight ?? DEFAULT_WEIGHT, true);
  const active = fields.active ?? false;
  view.setUint32(base + SLOT_OFFSET.active, typeof active === 'number' ? active >>> 0 : active ? 1 : 0, true);
  view.setBigInt64(base + SLOT_OFFSET.heartbeat_us, BigInt(Math.trunc(fields.heartbeatUs ?? 0)), true);
  view.setUint32(base + SLOT_OFFSET.busy_ppm, (fields.busyPpm ?? 0) >>> 0, true);
  view.setUint32(base + SLOT_OFFSET.owner_pid, (fields.ownerPid ?? fields.pid) >>> 0, true);
  const name = typeof fields.name === 'string' ? new TextEncoder().encode(fields.name) : (fields.name ?? new Uint8Array());
  const nameField = bytes.subarray(base + SLOT_OFFSET.name, base + SLOT_OFFSET.name + NAME_SIZE);
  nameField.fill(0);
  nameField.set(name.subarray(0, NAME_SIZE));
}
