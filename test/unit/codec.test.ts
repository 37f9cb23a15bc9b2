import { describe, expect, it } from 'vitest';
import { SEGMENT_SIZE, slotOffset, SLOT_OFFSET } from '../../electron/core/registry/abi.js';
import { decodeName, decodeSegment, encodeEmptySegment, encodeSlot, sanitiseWeight } from '../../electron/core/registry/codec.js';

describe('codec', () => {
  it('decodes what encodeSlot wrote, field by field', () => {
    const bytes = encodeEmptySegment();
    encodeSlot(bytes, 3, { pid: 77, seq: 4, bootUs: 123, weight: 1.5, active: true, heartbeatUs: 999, busyPpm: 250_000, ownerPid: 78, name: 'qwen-chat' });
    const decoded = decodeSegment(bytes);
    expect(decoded.headerProblem).toBeNull();
    expect(decoded.slots).toEqual([
      { slot: 3, pid: 77, seq: 4, bootUs: 123, weight: 1.5, weightSanitised: false, active: true, heartbeatUs: 999, busyPpm: 250_000, ownerPid: 78, name: 'qwen-chat' },
    ]);
    expect(decoded.free).toHaveLength(15);
    expect(decoded.free).not.toContain(3);
  });

  it('reports each header problem and decodes nothing past it', () => {
    const wrongMagic = encodeEmptySegment();
    wrongMagic[0] = 'X'.charCodeAt(0);
    expect(decodeSegment(wrongMagic).headerProblem).toBe('magic');
    const wrongVersion = encodeEmptySegment();
    new DataView(wrongVersion.buffer).setUint32(8, 2, true);
    expect(decodeSegment(wrongVersion).headerProblem).toBe('version');
    const wrongSlots = encodeEmptySegment();
    new DataView(wrongSlots.buffer).setUint32(12, 32, true);
    expect(decodeSegment(wrongSlots).headerProblem).toBe('slot_count');
    expect(decodeSegment(new Uint8Array(100)).headerProblem).toBe('size');
    const trailingGarbageInMagic = encodeEmptySegment();
    trailingGarbageInMagic[6] = 1;
    expect(decodeSegment(trailingGarbageInMagic).headerProblem).toBe('magic');
  });

  it('reads a slot whatever its seq hole holds, and one the snapshot reported torn as read', () => {
    const bytes = encodeEmptySegment();
    encodeSlot(bytes, 0, { pid: 10, seq: 7, heartbeatUs: 5 });
    encodeSlot(bytes, 1, { pid: 11, seq: 2, heartbeatUs: 6 });
    encodeSlot(bytes, 2, { pid: 12, seq: 2, heartbeatUs: 7 });
    encodeSlot(bytes, 3, { pid: 13, seq: 0xabababab, ownerPid: 0xabababab, heartbeatUs: 8, weight: 500 });
    const decoded = decodeSegment(bytes, 1 << 2);
    expect(decoded.slots.map((s) => s.pid)).toEqual([10, 11, 12, 13]);
    expect(decoded.slots[3]?.weight).toBe(500);
    expect(decoded.torn).toEqual([{ slot: 2, pid: 12, heartbeatUs: 7 }]);
  });

  it('uses any finite weight > 0 as written, and refuses NaN, infinite and ≤ 0 ones', () => {
    expect(sanitiseWeight(Number.NaN)).toEqual({ weight: 1, sanitised: true });
    expect(sanitiseWeight(Number.POSITIVE_INFINITY)).toEqual({ weight: 1, sanitised: true });
    expect(sanitiseWeight(Number.NEGATIVE_INFINITY)).toEqual({ weight: 1, sanitised: true });
    expect(sanitiseWeight(0)).toEqual({ weight: 1, sanitised: true });
    expect(sanitiseWeight(-2)).toEqual({ weight: 1, sanitised: true });
    // Another peer's weights outside our own 0.01–100 are its to choose (opencoti's 500).
    expect(sanitiseWeight(1e-30)).toEqual({ weight: 1e-30, sanitised: false });
    expect(sanitiseWeight(500)).toEqual({ weight: 500, sanitised: false });
    expect(sanitiseWeight(3e38)).toEqual({ weight: 3e38, sanitised: false });
    expect(sanitiseWeight(2)).toEqual({ weight: 2, sanitised: false });
  });

  it('turns names into display text: invalid UTF-8 replaced, control characters removed, no NUL needed', () => {
    expect(decodeName(new Uint8Array([0x68, 0xc3, 0xa9, 0, 0x41]))).toBe('hé');
    expect(decodeName(new Uint8Array([0xff, 0xfe, 0x41]))).toBe('\ufffd\ufffdA');
    expect(decodeName(new Uint8Array([0x41, 0x0a, 0x1b, 0x42]))).toBe('A\ufffd\ufffdB');
    const full = new Uint8Array(48).fill(0x61);
    expect(decodeName(full)).toBe('a'.repeat(48));
  });

  it('counts any non-zero active word as active and clamps busy_ppm', () => {
    const bytes = encodeEmptySegment();
    encodeSlot(bytes, 0, { pid: 1, active: 0xff, busyPpm: 0xffffffff });
    const [slot] = decodeSegment(bytes).slots;
    expect(slot?.active).toBe(true);
    expect(slot?.busyPpm).toBe(1_000_000);
  });

  it('reads a heartbeat stored as a little-endian i64 at offset 24', () => {
    const bytes = new Uint8Array(SEGMENT_SIZE);
    bytes.set(encodeEmptySegment());
    const view = new DataView(bytes.buffer);
    view.setUint32(slotOffset(5) + SLOT_OFFSET.pid, 9, true);
    view.setBigInt64(slotOffset(5) + SLOT_OFFSET.heartbeat_us, 1_796_000_000_000_123n, true);
    expect(decodeSegment(bytes).slots[0]?.heartbeatUs).toBe(1_796_000_000_000_123);
  });
});

describe('codec: the opencoti layout and display safety', () => {
  it('reads a slot written at the natural C offsets of opencoti\'s field list, owner_pid 0 meaning pid', () => {
    // Written from opencoti's field list alone: 16-byte header, slot i at 16 + 88·i, name at 36,
    // and our words (seq at 4, owner_pid at 84) left zero as such a peer leaves its holes.
    const bytes = encodeEmptySegment();
    const view = new DataView(bytes.buffer);
    const base = 16 + 88 * 2;
    view.setUint32(base + 0, 4242, true);
    view.setBigInt64(base + 8, 111n, true);
    view.setFloat32(base + 16, 2.5, true);
    view.setUint32(base + 20, 1, true);
    view.setBigInt64(base + 24, 1_796_000_000_000_000n, true);
    view.setUint32(base + 32, 500_000, true);
    bytes.set(new TextEncoder().encode('opencoti-llamafile'), base + 36);
    const [slot] = decodeSegment(bytes).slots;
    expect(slot).toEqual({
      slot: 2, pid: 4242, seq: 0, bootUs: 111, weight: 2.5, weightSanitised: false, active: true,
      heartbeatUs: 1_796_000_000_000_000, busyPpm: 500_000, ownerPid: 4242, name: 'opencoti-llamafile',
    });
    // A supervisor's slot keeps its owner.
    view.setUint32(base + 84, 99, true);
    expect(decodeSegment(bytes).slots[0]?.ownerPid).toBe(99);
  });

  it('strips bidi controls from names: "\\u202eexe.gnp" reads as it is stored, not as png.exe', () => {
    const encode = (text: string): Uint8Array => new TextEncoder().encode(text);
    expect(decodeName(encode('\u202eexe.gnp'))).toBe('exe.gnp');
    expect(decodeName(encode('a\u2066b\u2069c\u200f\u061c\u202ad'))).toBe('abcd');
    expect(decodeName(encode('llama·3 ✓'))).toBe('llama·3 ✓');
  });
});
