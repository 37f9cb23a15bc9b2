/** RegistryMember on real segments with a fake clock: slot choice, rejoin after being reclaimed,
 *  full registry, leave. */
import { afterEach, describe, expect, it } from 'vitest';
import { loadRegistryHelper } from '../../native/helper.js';
import { FakeClock } from '../../electron/core/clock.js';
import { RegistryMember, type MemberIdentity } from '../../electron/core/registry/member.js';
import { RegistryObserver } from '../../electron/core/registry/observer.js';
import { RegistrySegment } from '../../electron/core/registry/segment.js';
import { bootLogLine } from '../../electron/core/registry/view.js';
import { removeSegment, testKey } from '../fixtures/segments.js';

const helper = loadRegistryHelper();
const segments: RegistrySegment[] = [];

function segment(gpuKey: string): RegistrySegment {
  const s = RegistrySegment.openForJoin(helper, gpuKey);
  segments.push(s);
  return s;
}

afterEach(() => {
  for (const s of segments.splice(0)) {
    s.close();
    removeSegment(s.gpuKey);
  }
});

const identity = (pid: number, weight = 1, active = true): MemberIdentity => ({ pid, ownerPid: pid, bootUs: 10_000 + pid, name: `engine-${pid}`, weight, active });

describe('RegistryMember', () => {
  it('joins the lowest free slot and is seen by an observer with its share', () => {
    const clock = new FakeClock();
    const seg = segment(testKey('member'));
    const members = [new RegistryMember(seg, clock, identity(11, 2)), new RegistryMember(seg, clock, identity(12)), new RegistryMember(seg, clock, identity(13))];
    expect(members.map((m) => m.join())).toEqual([0, 1, 2]);
    const view = new RegistryObserver(clock, false).view(seg.gpuKey, seg, 0);
    expect(view.self).toEqual({ pid: 11, name: 'engine-11', weight: 2, share_pct: 50, busy_pct: 0, active: true });
    expect(view.peers.map((p) => [p.pid, p.share_pct])).toEqual([[12, 25], [13, 25]]);
    expect(bootLogLine(seg.gpuKey, 0, 2, 3)).toBe(`gpu-share: joined /opencoti-gpu-${seg.gpuKey} slot 0 (weight 2, 3 peers alive)`);
  });

  it('takes the lowest dead slot before a higher free one', () => {
    const clock = new FakeClock();
    const seg = segment(testKey('dead'));
    const a = new RegistryMember(seg, clock, identity(21));
    const b = new RegistryMember(seg, clock, identity(22));
    a.join();
    b.join();
    clock.advance(3_500_000); // neither heartbeats: both dead now
    b.tick(); // b heartbeats again; a stays dead
    const c = new RegistryMember(seg, clock, identity(23));
    expect(c.join()).toBe(0);
  });

  it('rejoins when its slot was reclaimed while it was stopped past 3 s', () => {
    const clock = new FakeClock();
    const seg = segment(testKey('rejoin'));
    const stopped = new RegistryMember(seg, clock, identity(31));
    expect(stopped.join()).toBe(0);
    clock.advance(4_000_000);
    const thief = new RegistryMember(seg, clock, identity(32));
    expect(thief.join()).toBe(0);
    expect(stopped.tick()).toBe('rejoined');
    expect(stopped.slot).toBe(1);
    expect(thief.tick()).toBe('ok');
  });

  it('fails the 17th join with "registry full (16 slots)"', () => {
    const clock = new FakeClock();
    const seg = segment(testKey('full'));
    for (let i = 0; i < 16; i++) new RegistryMember(seg, clock, identity(100 + i)).join();
    expect(() => new RegistryMember(seg, clock, identity(200)).join()).toThrowError('registry full (16 slots)');
  });

  it('publishes weight, activity and busy changes, and frees its slot on leave', () => {
    const clock = new FakeClock();
    const seg = segment(testKey('set'));
    const member = new RegistryMember(seg, clock, identity(41, 1, false));
    member.join();
    expect(member.set({ weight: 3, active: true, busyPpm: 420_000 })).toBe('ok');
    const [record] = seg.read().slots;
    expect(record).toMatchObject({ pid: 41, weight: 3, active: true, busyPpm: 420_000, name: 'engine-41' });
    member.leave();
    expect(seg.read().slots).toEqual([]);
    expect(member.slot).toBeNull();
  });
});
