/** A self-pacing engine (joinAsPacedPeer) on a real segment and the real clock, while it waits for
 *  its window: every wake-up of a waiting engine is taken from the working engine's window. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadRegistryHelper } from '../../native/helper.js';
import { systemClock } from '../../electron/core/clock.js';
import { joinAsPacedPeer } from '../../electron/core/pacer/paced-peer.js';
import { RegistryMember } from '../../electron/core/registry/member.js';
import { RegistrySegment } from '../../electron/core/registry/segment.js';
import { removeSegment, testKey } from '../fixtures/segments.js';

const helper = loadRegistryHelper();
const cleanups: (() => void)[] = [];

afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe('a paced peer waiting for its window', () => {
  it('holds its 50 ms tick off while the gate naps', async () => {
    const gpuKey = testKey('naps');
    const segment = RegistrySegment.openForJoin(helper, gpuKey);
    cleanups.push(() => {
      segment.close();
      removeSegment(gpuKey);
    });
    // Another engine, active at weight 9: a 400 ms period, ours the last 40 ms of it.
    const other = new RegistryMember(segment, systemClock(() => helper.wallUs()), { pid: 4_000_001, ownerPid: 4_000_001, bootUs: 1, name: 'other', weight: 9, active: true });
    other.join();
    const peer = joinAsPacedPeer(helper, { gpuKey, weight: 1, name: 'self' });
    cleanups.push(() => peer.leave());
    const ticks = vi.spyOn(peer.gate, 'refresh');

    // Step until a step has waited twice: the second wait is a whole one (from our window's end
    // to its next start, 360 ms); the first may be anything.
    const waits: { ticks: number; sleptUs: number }[] = [];
    for (let i = 0; i < 1_000_000 && waits.length < 2; i++) {
      const ticksBefore = ticks.mock.calls.length;
      const sleptBefore = peer.gate.stats.sleptUs;
      const decision = await peer.afterStep(500);
      if (decision.kind === 'wait') waits.push({ ticks: ticks.mock.calls.length - ticksBefore, sleptUs: peer.gate.stats.sleptUs - sleptBefore });
    }
    const waited = waits[1];
    expect(waited).toBeDefined();
    expect(waited?.sleptUs).toBeGreaterThan(200_000);
    // Without the hold it ticks every 50 ms of the wait (~7). A nap of exactly 50 ms may end in
    // the same turn of the event loop as the tick: that costs no wake-up of its own.
    expect(waited?.ticks).toBeLessThanOrEqual(1);
  });
});
