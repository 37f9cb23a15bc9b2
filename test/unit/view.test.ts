import { describe, expect, it } from 'vitest';
import { decodeSegment, encodeEmptySegment, encodeSlot } from '../../electron/core/registry/codec.js';
import { formatPeersTable } from '../../electron/core/registry/format.js';
import { judgeOneShot } from '../../electron/core/registry/liveness.js';
import { bootLogLine, buildPeersView, buildPropsBlock, resolvePeers } from '../../electron/core/registry/view.js';
import { checkGpuKey, checkIntervalMs, checkName, checkWeight } from '../../electron/core/registry/validate.js';
import { scheduleOf } from '../../electron/core/pacer/gate.js';

const NOW = 1_800_000_000_000_000;

function threePeers(): ReturnType<typeof resolvePeers> {
  const bytes = encodeEmptySegment();
  encodeSlot(bytes, 0, { pid: 10, weight: 2, active: true, heartbeatUs: NOW - 100_000, busyPpm: 512_345, name: 'qwen-chat' });
  encodeSlot(bytes, 2, { pid: 20, weight: 1, active: true, heartbeatUs: NOW - 200_000, name: 'coder' });
  encodeSlot(bytes, 5, { pid: 30, weight: 0.1, active: false, heartbeatUs: NOW, name: 'embed' });
  encodeSlot(bytes, 7, { pid: 40, weight: 1, active: true, heartbeatUs: NOW - 3_100_000, name: 'dead' });
  const decoded = decodeSegment(bytes);
  return resolvePeers(decoded, judgeOneShot(decoded.slots, NOW));
}

describe('foreign peers as they wrote themselves', () => {
  /** Two alive, active peers with these weights, one with 0xAB in both holes (a C peer). */
  function pair(foreignWeight: number, ownWeight: number): ReturnType<typeof resolvePeers> {
    const bytes = encodeEmptySegment();
    encodeSlot(bytes, 0, { pid: 10, seq: 0xabababab, ownerPid: 0xabababab, weight: foreignWeight, active: true, heartbeatUs: NOW - 100_000, name: 'c-peer' });
    encodeSlot(bytes, 1, { pid: 20, weight: ownWeight, active: true, heartbeatUs: NOW - 100_000, name: 'ours' });
    const decoded = decodeSegment(bytes);
    return resolvePeers(decoded, judgeOneShot(decoded.slots, NOW));
  }

  it('lists a peer with garbage in its holes and uses its weight 500 as is: 99.80 / 0.20 %', () => {
    const view = buildPeersView('cpu-0', pair(500, 1), 1);
    expect(view.self).toMatchObject({ pid: 20, weight: 1, share_pct: 0.2 });
    expect(view.peers).toEqual([expect.objectContaining({ pid: 10, name: 'c-peer', weight: 500, share_pct: 99.8 })]);
  });

  it('schedules weights 0.005 : 0.001 as opencoti does: 240 ms, 200 / 40', () => {
    const schedule = scheduleOf(pair(0.005, 0.001));
    expect(schedule.periodUs).toBe(240_000);
    expect(schedule.windows.map((w) => w.lengthUs)).toEqual([200_000, 40_000]);
  });
});

describe('views', () => {
  it('builds /gpu/peers: self apart, dead peers gone, idle peers at 0 %', () => {
    const view = buildPeersView('GPU-abc', threePeers(), 2);
    expect(view).toEqual({
      gpu_key: 'GPU-abc',
      self: { pid: 20, name: 'coder', weight: 1, share_pct: 33.33, busy_pct: 0, active: true },
      peers: [
        { pid: 10, name: 'qwen-chat', weight: 2, share_pct: 66.67, busy_pct: 51.2, active: true, heartbeat_age_ms: 100 },
        { pid: 30, name: 'embed', weight: 0.1, share_pct: 0, busy_pct: 0, active: false, heartbeat_age_ms: 0 },
      ],
    });
  });

  it('has no self for an observer, and wraps the view in the props block', () => {
    const view = buildPeersView('cpu-0', threePeers(), null);
    expect(view.self).toBeNull();
    expect(view.peers).toHaveLength(3);
    expect(buildPropsBlock(view, true)).toEqual({ opencoti: { gpu_share: { enabled: true, gpu_key: 'cpu-0', self: null, peers: view.peers } } });
  });

  it('prints the boot log line', () => {
    expect(bootLogLine('GPU-1', 2, 1.5, 3)).toBe('gpu-share: joined /opencoti-gpu-GPU-1 slot 2 (weight 1.5, 3 peers alive)');
    expect(bootLogLine('cpu-0', 0, 1, 1)).toBe('gpu-share: joined /opencoti-gpu-cpu-0 slot 0 (weight 1, 1 peer alive)');
  });

  it('formats the table with units and the self row', () => {
    expect(formatPeersTable(buildPeersView('cpu-0', threePeers(), 0))).toBe(
      [
        'GPU cpu-0 · 3 peers alive · 2 active',
        'PID  NAME              WEIGHT  SHARE   BUSY  ACTIVE  HEARTBEAT',
        ' 10  qwen-chat (self)       2  66.7%  51.2%  yes             —',
        ' 20  coder                  1  33.3%   0.0%  yes        200 ms',
        ' 30  embed                0.1   0.0%   0.0%  idle         0 ms',
      ].join('\n'),
    );
    expect(formatPeersTable({ gpu_key: 'cpu-0', self: null, peers: [] })).toContain('no peers alive');
  });
});

describe('flag validation', () => {
  it('accepts good values and names what is wrong with bad ones', () => {
    expect(checkGpuKey('GPU-8f2c1a7e-0d4b-4c1e-9a57-2b3c4d5e6f70')).toEqual({ ok: true, value: 'GPU-8f2c1a7e-0d4b-4c1e-9a57-2b3c4d5e6f70' });
    expect(checkGpuKey('a'.repeat(41))).toMatchObject({ ok: false, message: expect.stringContaining('at most 40') });
    expect(checkGpuKey('a/b')).toMatchObject({ ok: false });
    expect(checkGpuKey('')).toMatchObject({ ok: false });
    expect(checkWeight('1.5')).toEqual({ ok: true, value: 1.5 });
    for (const bad of ['0', '-1', 'abc', 'inf', 'NaN', '1e400', '', '0x10', '1000']) expect(checkWeight(bad), bad).toMatchObject({ ok: false });
    expect(checkName('é'.repeat(23))).toMatchObject({ ok: true });
    expect(checkName('é'.repeat(24))).toMatchObject({ ok: false, message: expect.stringContaining('47 bytes') });
    expect(checkName('a\nb')).toMatchObject({ ok: false });
    expect(checkIntervalMs('100')).toEqual({ ok: true, value: 100 });
    expect(checkIntervalMs('5')).toMatchObject({ ok: false });
  });
});
