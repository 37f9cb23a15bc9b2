/** The gateway's count of requests as an engine's activity (pacer/request-activity.ts), and the
 *  gateway's waiting line that keeps the count. */
import { describe, expect, it } from 'vitest';
import { GatewayQueue } from '../../electron/core/api/gateway-queue.js';
import { ACTIVITY_WINDOW_US } from '../../electron/core/pacer/busy.js';
import type { ActivitySource } from '../../electron/core/pacer/process-gate.js';
import { REQUEST_TAIL_US, requestActivity } from '../../electron/core/pacer/request-activity.js';

/** A fake clock and an inner source whose CPU time and verdict the test sets. */
function setup(inner: { busy?: boolean | null } = {}) {
  let now = 1_000_000;
  let cpu = 0;
  const source: ActivitySource = { workUs: () => cpu, ...(inner.busy === undefined ? {} : { busyNow: () => inner.busy ?? null }) };
  const activity = requestActivity(source, () => now);
  return {
    activity,
    /** Time passes; the engine uses `cpuUs` of CPU meanwhile. */
    advance(us: number, cpuUs = 0) {
      now += us;
      cpu += cpuUs;
    },
  };
}

describe('activity from the gateway\'s count of requests', () => {
  it('says nothing of its own until the gateway has spoken: the inner source decides', () => {
    expect(setup().activity.busyNow?.(1)).toBeNull();
    expect(setup({ busy: true }).activity.busyNow?.(1)).toBe(true);
  });

  it('is busy with a request in flight or waiting, known idle at none', () => {
    const { activity, advance } = setup();
    activity.setInFlight(2);
    expect(activity.busyNow?.(1)).toBe(true);
    activity.setInFlight(0);
    advance(50_000, 40_000);
    // The CPU of the request's tail is not a client of the engine's own port.
    expect(activity.busyNow?.(1)).toBe(false);
    advance(50_000, 0);
    expect(activity.busyNow?.(1)).toBe(false);
  });

  it('a better inner signal (a server\'s /metrics) wins while the gateway has nothing in flight', () => {
    const inner = { busy: true as boolean | null };
    const { activity } = setup(inner);
    activity.setInFlight(0);
    expect(activity.busyNow?.(1)).toBe(true);
    inner.busy = false;
    activity.setInFlight(1);
    expect(activity.busyNow?.(1)).toBe(true);
  });

  it('work past the gateway (CPU with no request of its own) hands the verdict back to CPU time for the activity window', () => {
    const { activity, advance } = setup();
    activity.setInFlight(0);
    // Quiet past the tail.
    for (let t = 0; t < REQUEST_TAIL_US + 100_000; t += 50_000) {
      advance(50_000, 100);
      expect(activity.busyNow?.(1)).toBe(false);
    }
    // A direct client: the engine burns CPU.
    advance(50_000, 45_000);
    expect(activity.busyNow?.(1)).toBeNull();
    // Suspended out of its window (no CPU): still "cannot say", not idle, within the window.
    advance(ACTIVITY_WINDOW_US - 100_000, 0);
    expect(activity.busyNow?.(1)).toBeNull();
    advance(200_000, 0);
    expect(activity.busyNow?.(1)).toBe(false);
  });
});

describe('the gateway\'s waiting line counts each engine\'s requests', () => {
  it('tells every change: granted, queued, left, released', () => {
    const told: [string, number][] = [];
    const queue = new GatewayQueue(8, (key, count) => told.push([key, count]));
    queue.enter('a', 'interactive', () => undefined);
    const second = queue.enter('a', 'background', () => undefined);
    queue.enter('a', 'background', () => undefined);
    queue.enter('b', 'interactive', () => undefined);
    expect(queue.count('a')).toBe(3);
    second.leave();
    second.leave();
    queue.release('a');
    queue.release('a');
    queue.release('b');
    expect(told).toEqual([
      ['a', 1],
      ['a', 2],
      ['a', 3],
      ['b', 1],
      ['a', 2],
      ['a', 1],
      ['a', 0],
      ['b', 0],
    ]);
    // A release with nothing served says nothing.
    queue.release('a');
    expect(told.length).toBe(8);
  });
});
