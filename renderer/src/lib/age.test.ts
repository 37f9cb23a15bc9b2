import { describe, expect, it } from 'vitest';
import { ageLevel, ageOutInMs, CRASHED_VISIBLE_MS, DEPARTED_VISIBLE_MS, expireRows, markAgedOut, reconcileRows, rowOpacity } from './age.js';
import { peerRow } from '../test/fixtures.js';

describe('heartbeat age', () => {
  it('turns amber past 1 s, red past 2 s, dead at 3 s', () => {
    expect(ageLevel(0)).toBe('fresh');
    expect(ageLevel(1000)).toBe('fresh');
    expect(ageLevel(1001)).toBe('amber');
    expect(ageLevel(2000)).toBe('amber');
    expect(ageLevel(2001)).toBe('red');
    expect(ageLevel(2999)).toBe('red');
    expect(ageLevel(3000)).toBe('dead');
    expect(ageLevel(Number.NaN)).toBe('dead');
  });

  it('fades a row at 3 s and a departed row', () => {
    expect(rowOpacity(2999, false)).toBe(1);
    expect(rowOpacity(3000, false)).toBeLessThan(1);
    expect(rowOpacity(100, true)).toBeLessThan(1);
  });
});

describe('reconcileRows', () => {
  const a = peerRow({ slot: 0, pid: 10, name: 'a' });
  const b = peerRow({ slot: 2, pid: 20, name: 'b', sharePct: 40, active: true, heartbeatAgeMs: 2600 });

  it('keeps a departed peer faded for a while with a departure, then drops it', () => {
    const first = reconcileRows([], [a, b], 1000);
    expect(first.departures).toEqual([]);
    const second = reconcileRows(first.rows, [a], 2000);
    expect(second.departures).toEqual([{ slot: 2, pid: 20, name: 'b', atMs: 2000, how: 'aged-out' }]);
    expect(second.rows.map((r) => [r.peer.slot, r.departedAtMs])).toEqual([
      [0, null],
      [2, 2000],
    ]);
    // A departed peer holds no share any more.
    expect(second.rows[1]?.peer.sharePct).toBe(0);
    const third = reconcileRows(second.rows, [a], 3000);
    expect(third.departures).toEqual([]);
    expect(third.rows).toHaveLength(2);
    expect(reconcileRows(third.rows, [a], 2000 + DEPARTED_VISIBLE_MS).rows).toHaveLength(1);
    expect(expireRows(third.rows, 2000 + DEPARTED_VISIBLE_MS - 1)).toHaveLength(2);
    expect(expireRows(third.rows, 2000 + DEPARTED_VISIBLE_MS)).toHaveLength(1);
  });

  it('tells a clean exit (fresh heartbeat) from an aged-out peer', () => {
    const fresh = peerRow({ slot: 5, pid: 50, name: 'quits', heartbeatAgeMs: 300 });
    const gone = reconcileRows(reconcileRows([], [fresh], 0).rows, [], 100);
    expect(gone.departures.map((d) => d.how)).toEqual(['left']);
    expect(gone.rows[0]?.departedHow).toBe('left');
  });

  it('marks the peer the core reports aged out, before it leaves the list', () => {
    const rows = reconcileRows([], [a, b], 0).rows;
    const marked = markAgedOut(rows, 2, 20, 50);
    expect(marked.map((r) => [r.peer.slot, r.departedAtMs, r.departedHow])).toEqual([
      [0, null, null],
      [2, 50, 'aged-out'],
    ]);
    // Still listed by a late state: stays as it is; gone from the next: kept, not announced again.
    const next = reconcileRows(marked, [a], 100);
    expect(next.departures).toEqual([]);
    expect(next.rows[1]?.departedHow).toBe('aged-out');
  });

  it('shows only the new peer when another pid takes the slot', () => {
    const first = reconcileRows([], [b], 0);
    const taken = peerRow({ slot: 2, pid: 21, name: 'b2' });
    const second = reconcileRows(first.rows, [taken], 10);
    expect(second.rows.map((r) => r.peer.pid)).toEqual([21]);
    expect(second.departures).toEqual([]);
  });
});

describe('crashes and age-out countdowns', () => {
  it('counts down to the 3 s age-out once a heartbeat is late, and not before', () => {
    expect(ageOutInMs(400)).toBeNull();
    expect(ageOutInMs(1000)).toBeNull();
    expect(ageOutInMs(1400)).toBe(1600);
    expect(ageOutInMs(2900)).toBe(100);
    expect(ageOutInMs(3000)).toBeNull();
  });

  it('a managed peer whose engine crashed departs as crashed (fresh heartbeat or not) and stays long enough to restart it', () => {
    const mine = peerRow({ slot: 1, pid: 30, name: 'coder', engineId: 'coder-1', sharePct: 50, active: true, heartbeatAgeMs: 200 });
    const first = reconcileRows([], [mine], 1000, [{ id: 'coder-1', state: 'running' }]);
    const gone = reconcileRows(first.rows, [], 1200, [{ id: 'coder-1', state: 'crashed' }]);
    expect(gone.departures).toEqual([{ slot: 1, pid: 30, name: 'coder', atMs: 1200, how: 'crashed' }]);
    expect(gone.rows[0]?.departedHow).toBe('crashed');
    expect(gone.rows[0]?.peer.sharePct).toBe(0);
    // Still there long after an aged-out row would have gone, until CRASHED_VISIBLE_MS.
    expect(expireRows(gone.rows, 1200 + DEPARTED_VISIBLE_MS + 1000)).toHaveLength(1);
    expect(expireRows(gone.rows, 1200 + CRASHED_VISIBLE_MS)).toHaveLength(0);
    // Stopped (not crashed) and fresh: it simply left.
    const stopped = reconcileRows(first.rows, [], 1200, [{ id: 'coder-1', state: 'stopped' }]);
    expect(stopped.departures[0]?.how).toBe('left');
  });
});
