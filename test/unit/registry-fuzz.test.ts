/**
 * 10,000 fuzzed segments: random bytes, hostile weights, heartbeats far in the past and future,
 * invalid UTF-8, seqs that stay odd. Decoding never throws, every share is in [0, 1], and the
 * shares of the active peers sum to 1 (or there are none).
 */
import { describe, expect, it } from 'vitest';
import { SEGMENT_SIZE, SLOT_COUNT, slotOffset, SLOT_OFFSET } from '../../electron/core/registry/abi.js';
import { decodeSegment, encodeEmptySegment, type DecodedSegment } from '../../electron/core/registry/codec.js';
import { LivenessWatcher, judgeOneShot } from '../../electron/core/registry/liveness.js';
import { buildPeersView, resolvePeers, type AlivePeer } from '../../electron/core/registry/view.js';
import { pick, seededRandom } from '../fixtures/random.js';

const NOW_US = 1_800_000_000_000_000;
const HOSTILE_WEIGHTS = [Number.NaN, Infinity, -Infinity, -1, 0, -0, 1e-45, 1e-30, 3.4e38, 1e10, 0.5, 1, 2, 7.25];
const HEARTBEATS = [0, -1, NOW_US, NOW_US - 500_000, NOW_US - 2_999_999, NOW_US - 3_000_001, NOW_US + 2_000_000, NOW_US + 3_600_000_000, NOW_US - 3_600_000_000, Number.MAX_SAFE_INTEGER];

function randomBytes(random: () => number, n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) bytes[i] = Math.floor(random() * 256);
  return bytes;
}

function fuzzSegment(random: () => number): { bytes: Uint8Array; torn: number } {
  const kind = random();
  if (kind < 0.05) return { bytes: randomBytes(random, SEGMENT_SIZE), torn: 0 };
  const bytes = encodeEmptySegment();
  // Slot bytes random, then some fields set to hostile-but-plausible values.
  bytes.set(randomBytes(random, SEGMENT_SIZE - 64), 64);
  const view = new DataView(bytes.buffer);
  for (let slot = 0; slot < SLOT_COUNT; slot++) {
    const base = slotOffset(slot);
    if (random() < 0.2) view.setUint32(base + SLOT_OFFSET.pid, 0, true);
    if (random() < 0.7) view.setUint32(base + SLOT_OFFSET.seq, Math.floor(random() * 1000) * 2 + (random() < 0.15 ? 1 : 0), true);
    if (random() < 0.8) view.setFloat32(base + SLOT_OFFSET.weight, pick(random, HOSTILE_WEIGHTS), true);
    if (random() < 0.6) {
      const jitter = Math.floor(random() * 1_000_000) - 500_000;
      view.setBigInt64(base + SLOT_OFFSET.heartbeat_us, BigInt(pick(random, HEARTBEATS) + (random() < 0.5 ? jitter : 0)), true);
    }
    if (random() < 0.5) view.setUint32(base + SLOT_OFFSET.active, random() < 0.5 ? 1 : Math.floor(random() * 2 ** 32), true);
    if (random() < 0.3) {
      // Invalid UTF-8: lone continuation bytes, truncated sequences, overlongs, no NUL at all.
      const name = randomBytes(random, 48).map((b) => (random() < 0.5 ? 0x80 | (b & 0x3f) : b));
      bytes.set(name, base + SLOT_OFFSET.name);
    }
  }
  const torn = random() < 0.2 ? Math.floor(random() * 2 ** 16) : 0;
  return { bytes, torn };
}

function checkShares(peers: readonly AlivePeer[], decoded: DecodedSegment): void {
  for (const peer of peers) {
    expect(peer.share).toBeGreaterThanOrEqual(0);
    expect(peer.share).toBeLessThanOrEqual(1);
    if (!peer.record.active) expect(peer.share).toBe(0);
  }
  const active = peers.filter((peer) => peer.record.active);
  const total = active.reduce((sum, peer) => sum + peer.share, 0);
  if (active.length > 0) expect(Math.abs(total - 1)).toBeLessThan(1e-9);
  expect(peers.length).toBeLessThanOrEqual(decoded.slots.length);
}

function allNumbersFinite(value: unknown): boolean {
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(allNumbersFinite);
  if (value !== null && typeof value === 'object') return Object.values(value).every(allNumbersFinite);
  return true;
}

describe('registry fuzz', () => {
  it('decodes 10,000 hostile segments without throwing; shares stay in [0, 1] and sum to 1', () => {
    const random = seededRandom(0x5eed);
    const watcher = new LivenessWatcher();
    let withActive = 0;
    let decodedSlots = 0;
    for (let i = 0; i < 10_000; i++) {
      const { bytes, torn } = fuzzSegment(random);
      const decoded = decodeSegment(bytes, torn);
      decodedSlots += decoded.slots.length;
      for (const liveness of [judgeOneShot(decoded.slots, NOW_US), watcher.observe(decoded.slots, NOW_US + i * 1000, i * 1000)]) {
        const peers = resolvePeers(decoded, liveness);
        checkShares(peers, decoded);
        if (peers.some((peer) => peer.record.active)) withActive++;
        const view = buildPeersView('fuzz', peers, decoded.slots[0]?.slot ?? null);
        expect(allNumbersFinite(view)).toBe(true);
        for (const peer of view.peers) expect(typeof peer.name).toBe('string');
      }
    }
    // The fuzzer must reach the interesting paths, not only reject headers.
    expect(withActive).toBeGreaterThan(5_000);
    expect(decodedSlots).toBeGreaterThan(50_000);
  });
});
