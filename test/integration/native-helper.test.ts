/** The native helper on real segments: create/validate, CAS claims, heartbeats, updates, torn
 *  slots, and what an opener does with a segment its creator abandoned. */
import { chmodSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { RegistryError, loadRegistryHelper, type SegmentHandle } from '../../native/helper.js';
import { SEGMENT_SIZE, slotOffset, SLOT_OFFSET } from '../../electron/core/registry/abi.js';
import { decodeSegment, encodeEmptySegment, encodeSlot } from '../../electron/core/registry/codec.js';
import { removeSegment, shmPath, testKey } from '../fixtures/segments.js';

const helper = loadRegistryHelper();
const keys: string[] = [];
const handles: SegmentHandle[] = [];

function key(prefix: string): string {
  const k = testKey(prefix);
  keys.push(k);
  return k;
}

function open(gpuKey: string, create = true, readonly = false): SegmentHandle {
  const { handle } = helper.open(shmPath(gpuKey), { create, readonly });
  handles.push(handle);
  return handle;
}

function read(handle: SegmentHandle): ReturnType<typeof decodeSegment> {
  const buf = new Uint8Array(SEGMENT_SIZE);
  return decodeSegment(buf, helper.snapshot(handle, buf));
}

const claim = (handle: SegmentHandle, slot: number, pid: number, expectedPid = 0, expectedHeartbeatUs = 0): boolean =>
  helper.claim(handle, { slot, expectedPid, expectedHeartbeatUs, pid, ownerPid: pid, bootUs: 1000 + pid, weight: 1.5, active: true, name: `p${pid}`, nowUs: helper.wallUs() });

afterEach(() => {
  for (const handle of handles.splice(0)) helper.close(handle);
  for (const k of keys.splice(0)) removeSegment(k);
});

describe('native helper', () => {
  it('creates a segment exclusively with mode 0600 and an ABI v1 header; a second open finds it', () => {
    const k = key('create');
    const first = helper.open(shmPath(k), { create: true, readonly: false });
    handles.push(first.handle);
    expect(first.created).toBe(true);
    expect(statSync(shmPath(k)).mode & 0o777).toBe(0o600);
    expect(statSync(shmPath(k)).size).toBe(4096);
    const second = helper.open(shmPath(k), { create: true, readonly: false });
    handles.push(second.handle);
    expect(second.created).toBe(false);
    expect(readFileSync(shmPath(k)).subarray(0, 16)).toEqual(Buffer.from(encodeEmptySegment().subarray(0, 16)));
  });

  it('honours another mode for the segment it creates', () => {
    const k = key('mode');
    handles.push(helper.open(shmPath(k), { create: true, readonly: false, mode: 0o640 }).handle);
    expect(statSync(shmPath(k)).mode & 0o777).toBe(0o640);
  });

  it('does not create a segment for an observer', () => {
    const k = key('observe');
    expect(() => helper.open(shmPath(k), { create: false, readonly: true })).toThrowError(expect.objectContaining({ code: 'NOT_FOUND' }) as Error);
  });

  it('claims by compare-and-swap: the second claim of a slot loses', () => {
    const handle = open(key('cas'));
    expect(claim(handle, 4, 501)).toBe(true);
    expect(claim(handle, 4, 502)).toBe(false);
    const [slot] = read(handle).slots;
    expect(slot).toMatchObject({ slot: 4, pid: 501, ownerPid: 501, bootUs: 1501, weight: 1.5, active: true, name: 'p501', busyPpm: 0 });
  });

  it('reclaims a dead slot only while its heartbeat is still the one judged dead', () => {
    const handle = open(key('reclaim'));
    expect(claim(handle, 0, 601)).toBe(true);
    const heartbeat = read(handle).slots[0]?.heartbeatUs ?? 0;
    expect(claim(handle, 0, 602, 601, heartbeat - 1)).toBe(false);
    expect(claim(handle, 0, 602, 601, heartbeat)).toBe(true);
    expect(read(handle).slots[0]?.pid).toBe(602);
    // The old owner finds out at its next heartbeat.
    expect(helper.heartbeat(handle, 0, 601, 1601, helper.wallUs())).toBe(false);
  });

  it('heartbeats, updates under the seq and releases only for the owner', () => {
    const handle = open(key('owner'));
    expect(claim(handle, 2, 701)).toBe(true);
    expect(helper.heartbeat(handle, 2, 701, 1701, 42)).toBe(true);
    expect(helper.heartbeat(handle, 2, 701, 9999, 43)).toBe(false); // same pid, other process (boot)
    expect(helper.update(handle, 2, 701, 1701, { weight: 4, active: false, busyPpm: 2_000_000, ownerPid: 9, name: 'é'.repeat(30) })).toBe(true);
    const [slot] = read(handle).slots;
    expect(slot).toMatchObject({ heartbeatUs: 42, weight: 4, active: false, busyPpm: 1_000_000, ownerPid: 9 });
    expect(Buffer.byteLength(slot?.name ?? '')).toBeLessThanOrEqual(47); // truncated, NUL kept
    expect(slot?.seq).toBe(4); // two even-to-even brackets: claim, update
    expect(helper.release(handle, 2, 702, 1702)).toBe(false);
    expect(helper.release(handle, 2, 701, 1701)).toBe(true);
    expect(read(handle).free).toContain(2);
  });

  it('refuses writes through a read-only mapping', () => {
    const k = key('ro');
    open(k);
    const ro = open(k, false, true);
    expect(() => claim(ro, 0, 801)).toThrowError(expect.objectContaining({ code: 'READ_ONLY' }) as Error);
  });

  it('reads a slot whatever its alignment holes hold: an odd seq left behind, or 0xAB padding', () => {
    const k = key('holes');
    const handle = open(k);
    const bytes = encodeEmptySegment();
    encodeSlot(bytes, 1, { pid: 901, seq: 3, heartbeatUs: 77, weight: 2 });
    encodeSlot(bytes, 2, { pid: 902, heartbeatUs: 78, weight: 500, name: 'c-peer' });
    // A peer written from opencoti's field list leaves its padding uninitialised.
    bytes.fill(0xab, slotOffset(2) + SLOT_OFFSET.seq, slotOffset(2) + SLOT_OFFSET.seq + 4);
    bytes.fill(0xab, slotOffset(2) + SLOT_OFFSET.owner_pid, slotOffset(2) + SLOT_OFFSET.owner_pid + 4);
    writeFileSync(shmPath(k), bytes);
    const decoded = read(handle);
    expect(decoded.torn).toEqual([]);
    expect(decoded.slots.map((s) => [s.slot, s.pid, s.weight, s.heartbeatUs])).toEqual([
      [1, 901, 2, 77],
      [2, 902, 500, 78],
    ]);
    expect(decoded.slots[1]?.name).toBe('c-peer');
  });

  it('zeroes both holes when it claims a slot and when it releases it', () => {
    const k = key('zero-holes');
    const handle = open(k);
    const bytes = encodeEmptySegment();
    bytes.fill(0xab, slotOffset(3) + SLOT_OFFSET.seq, slotOffset(3) + SLOT_OFFSET.seq + 4);
    bytes.fill(0xab, slotOffset(3) + SLOT_OFFSET.owner_pid, slotOffset(3) + SLOT_OFFSET.owner_pid + 4);
    writeFileSync(shmPath(k), bytes);
    expect(claim(handle, 3, 1201)).toBe(true);
    const word = (offset: number): number => readFileSync(shmPath(k)).readUInt32LE(slotOffset(3) + offset);
    expect(word(SLOT_OFFSET.seq)).toBe(2); // a fresh bracket: odd while writing, then 2
    expect(word(SLOT_OFFSET.owner_pid)).toBe(0); // owner = pid: the hole stays zero
    expect(helper.release(handle, 3, 1201, 2201)).toBe(true);
    expect(word(SLOT_OFFSET.pid)).toBe(0);
    expect(word(SLOT_OFFSET.seq)).toBe(0);
    expect(word(SLOT_OFFSET.owner_pid)).toBe(0);
  });

  it('sets a segment of ours that others can write back to 0600 when not shared, and says so', () => {
    const k = key('tighten');
    writeFileSync(shmPath(k), encodeEmptySegment());
    chmodSync(shmPath(k), 0o666);
    const shared = helper.open(shmPath(k), { create: true, readonly: false, shared: true });
    handles.push(shared.handle);
    expect(shared.tightened).toBe(false);
    expect(statSync(shmPath(k)).mode & 0o777).toBe(0o666);
    const own = helper.open(shmPath(k), { create: true, readonly: false });
    handles.push(own.handle);
    expect(own.tightened).toBe(true);
    expect(statSync(shmPath(k)).mode & 0o777).toBe(0o600);
    const again = helper.open(shmPath(k), { create: false, readonly: true });
    handles.push(again.handle);
    expect(again.tightened).toBe(false);
  });

  it('survives its file being truncated under the mapping: BROKEN, never SIGBUS', () => {
    for (const size of [0, 100]) {
      const k = key(`cut${size}`);
      const handle = open(k);
      const ro = open(k, false, true);
      expect(claim(handle, 0, 1301)).toBe(true);
      truncateSync(shmPath(k), size);
      // Cut to 0, the first access faults; cut inside the page nothing faults, and the size check
      // (every 100 ms) finds it. Either way each handle answers BROKEN within that time.
      const brokenWithin = (call: () => unknown): unknown => {
        const started = Date.now();
        while (Date.now() - started < 2000) {
          try {
            call();
          } catch (error) {
            return error;
          }
        }
        return null;
      };
      expect(brokenWithin(() => helper.snapshot(ro, new Uint8Array(SEGMENT_SIZE)))).toMatchObject({ code: 'BROKEN' });
      expect(brokenWithin(() => helper.heartbeat(handle, 0, 1301, 2301, helper.wallUs()))).toMatchObject({ code: 'BROKEN' });
      // Once broken, always broken: the handle is never touched again.
      expect(() => helper.snapshot(ro, new Uint8Array(SEGMENT_SIZE))).toThrowError(expect.objectContaining({ code: 'BROKEN' }) as Error);
      expect(() => helper.update(handle, 0, 1301, 2301, { weight: 1, active: true, busyPpm: 0, ownerPid: 1301 })).toThrowError(expect.objectContaining({ code: 'BROKEN' }) as Error);
      expect(() => helper.release(handle, 0, 1301, 2301)).toThrowError(expect.objectContaining({ code: 'BROKEN' }) as Error);
    }
  });

  it('adopts a segment whose creator died before initialising it (all zero, or zero-sized)', () => {
    for (const size of [SEGMENT_SIZE, 0]) {
      const k = key('abandoned');
      writeFileSync(shmPath(k), new Uint8Array(size), { mode: 0o600 });
      const started = Date.now();
      const handle = open(k);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900); // waited for the creator first
      expect(read(handle).headerProblem).toBeNull();
      expect(readFileSync(shmPath(k)).subarray(0, 8).toString('latin1')).toBe('OCGPU\0\0\0');
    }
  });

  it('never adopts a non-zero segment without a header, and never writes it', () => {
    const k = key('garbage');
    const bytes = new Uint8Array(SEGMENT_SIZE);
    bytes[100] = 1;
    writeFileSync(shmPath(k), bytes);
    expect(() => open(k)).toThrowError(RegistryError);
    expect(new Uint8Array(readFileSync(shmPath(k)))).toEqual(bytes);
  });

  it('keeps the heartbeat word whole while another process stores it', () => {
    const k = key('hb');
    const handle = open(k);
    expect(claim(handle, 0, 1001)).toBe(true);
    // Values whose two 32-bit halves both change: a torn read would mix them.
    const a = 0x0000_0001_ffff_ffff;
    const b = 0x0000_0002_0000_0000;
    const buf = new Uint8Array(SEGMENT_SIZE);
    for (let i = 0; i < 2000; i++) {
      helper.heartbeat(handle, 0, 1001, 2001, i % 2 === 0 ? a : b);
      helper.snapshot(handle, buf);
      const hb = Number(new DataView(buf.buffer).getBigInt64(slotOffset(0) + SLOT_OFFSET.heartbeat_us, true));
      expect([a, b]).toContain(hb);
    }
  });
});
