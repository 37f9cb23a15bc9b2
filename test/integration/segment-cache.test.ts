/** The API's registry cache on real segments: at most 64 keys, the least recently read evicted
 *  and unmapped (counted in /proc/self/maps), whatever keys are asked for. */
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { loadRegistryHelper } from '../../native/helper.js';
import { systemClock } from '../../electron/core/clock.js';
import { RegistryMember } from '../../electron/core/registry/member.js';
import { SEGMENT_CACHE_LIMIT, SegmentCache } from '../../electron/core/registry/segment-cache.js';
import { segmentFileName } from '../../electron/core/registry/location.js';
import { RegistrySegment } from '../../electron/core/registry/segment.js';
import { removeSegment } from '../fixtures/segments.js';

const helper = loadRegistryHelper();
const clock = systemClock(() => helper.wallUs());
const PREFIX = `t-lru-${process.pid}-`;
const keys = Array.from({ length: 80 }, (_, i) => `${PREFIX}${i}`);

afterAll(() => {
  for (const key of keys) removeSegment(key);
});

/** Our test segments mapped into this process now. */
const paths = new Set(keys.map((key) => `/dev/shm/${segmentFileName(key)}`));
const mapped = (): number => readFileSync('/proc/self/maps', 'utf8').split('\n').filter((line) => paths.has(line.slice(line.indexOf('/')))).length;

describe.skipIf(process.platform !== 'linux')('SegmentCache', () => {
  it('keeps at most 64 segments mapped, evicting the least recently read, and reads an evicted one again', () => {
    for (const [i, key] of keys.entries()) {
      const segment = RegistrySegment.openForJoin(helper, key);
      new RegistryMember(segment, clock, { pid: 2_000_000 + i, ownerPid: process.pid, bootUs: clock.wallUs(), name: `p${i}`, weight: 1, active: true }).join();
      segment.close();
    }
    expect(mapped()).toBe(0);
    const reported: string[] = [];
    const cache = new SegmentCache(clock, (key) => RegistrySegment.openForObserve(helper, key), (key, message) => reported.push(`${key}: ${message}`));
    for (const key of keys) expect(cache.peers(key)).toHaveLength(1);
    expect(cache.size).toBe(SEGMENT_CACHE_LIMIT);
    expect(mapped()).toBe(SEGMENT_CACHE_LIMIT);
    // Thousands of keys nobody created (what /gpu/peers?gpu_key= may be asked) stay bounded too.
    for (let i = 0; i < 5_000; i++) expect(cache.peers(`t-absent-${process.pid}-${i}`)).toEqual([]);
    expect(cache.size).toBe(SEGMENT_CACHE_LIMIT);
    expect(mapped()).toBe(0);
    // An evicted key is opened again when asked for.
    expect(cache.peers(keys[0] ?? '')[0]?.record.name).toBe('p0');
    expect(mapped()).toBe(1);
    cache.close();
    expect(mapped()).toBe(0);
    expect(reported).toEqual([]);
  });
});
