/** Window overshoot: the schedule's "since my window ended", and the report lines' parsing. */
import { describe, expect, it } from 'vitest';
import { formatPacerLine, OvershootLog, parsePacerLine } from '../../electron/core/pacer/overshoot.js';
import { buildSchedule, usSinceWindowEnd } from '../../electron/core/pacer/schedule.js';
import { formatHostEvent, parseHostLine } from '../../electron/core/engines/host-protocol.js';

describe('overshoot', () => {
  it('measures the time since a window ended, 0 inside it', () => {
    const schedule = buildSchedule([
      { slot: 0, share: 2 / 3 },
      { slot: 1, share: 1 / 3 },
    ]);
    const period = schedule.periodUs;
    const base = period * 1_000_000; // a wall time at a period start
    expect(usSinceWindowEnd(schedule, 0, base + 10_000)).toBe(0);
    expect(usSinceWindowEnd(schedule, 0, base + 83_000)).toBe(3_000);
    expect(usSinceWindowEnd(schedule, 1, base + 5_000)).toBe(5_000); // slot 1's window ended at the period's end
    expect(usSinceWindowEnd(schedule, 7, base)).toBe(0);
  });

  it('batches values and round-trips the report line; anything else is not one', () => {
    const log = new OvershootLog();
    for (let i = 0; i < 300; i++) log.record(i);
    log.record(Number.NaN);
    log.record(-1);
    const batch = log.take();
    expect(batch).toHaveLength(256);
    expect(parsePacerLine(formatPacerLine([1, 250]))).toEqual([1, 250]);
    for (const line of ['gpu-share: pacer ', 'gpu-share: pacer {"overshoots_us":[-1]}', 'gpu-share: pacer {"overshoots_us":"x"}', 'gpu-share: pacer {', 'gpu-share: joined x', `gpu-share: pacer {"overshoots_us":[${'1,'.repeat(300)}1]}`]) {
      expect(parsePacerLine(line), line.slice(0, 40)).toBeNull();
    }
  });

  it("reads the engine host's pacer event with the same check as the stderr line", () => {
    expect(parseHostLine(formatHostEvent({ event: 'pacer', overshoots_us: [0, 4_200] }))).toEqual({ event: 'pacer', overshoots_us: [0, 4_200] });
    for (const list of ['[-1]', '"x"', '[1e9]', `[${'1,'.repeat(300)}1]`, '[null]']) {
      expect(parseHostLine(`{"event":"pacer","overshoots_us":${list}}`), list.slice(0, 20)).toBeNull();
    }
  });
});
