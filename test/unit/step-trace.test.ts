/**
 * The step trace's analysis (`bench:pacing --serve --trace`): two engines at 2:1 over three
 * periods, steps laid out by hand so that every figure can be worked out on paper.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { analyseSteps, readSteps, stepTraceTable, stepsByWindow, type Step } from '../bench/step-trace.js';

// Period 120 ms: slot 0 (weight 2) runs 0–80 ms, slot 1 (weight 1) 80–120 ms.
const schedule = { periodUs: 120_000, windows: [{ slot: 0, startUs: 0, lengthUs: 80_000 }, { slot: 1, startUs: 80_000, lengthUs: 40_000 }] };

const heavy: Step[] = [
  // Window 1 (0–80 ms): three steps, 100 µs apart.
  [0, 2_000],
  [2_100, 1_000],
  [3_200, 1_000],
  // Window 2 (120–200 ms): its last step starts 1 ms before the end and runs 1 ms past it.
  [120_000, 2_000],
  [122_100, 1_000],
  [199_000, 2_000],
  // Window 3 (240–320 ms): a step held 30 ms, then one more.
  [240_000, 30_000],
  [270_100, 1_000],
];
const light: Step[] = [
  // Window 1 (80–120 ms): a clean start.
  [80_000, 3_000],
  [83_100, 1_000],
  // Window 2 (200–240 ms): starts 50 µs early, beside the heavy engine's last step (ends at 201 ms).
  [199_950, 3_000],
  [203_050, 1_000],
  // Window 3 (320–360 ms): no step.
];

const findings = analyseSteps({ schedule, intervals: [[0, 360_000]], engines: [{ label: 'w2', slot: 0, steps: heavy }, { label: 'w1', slot: 1, steps: light }] });

describe('step trace: where the windows went', () => {
  it("puts each step in its engine's window, the window's first step up to a few ms early, and leaves out windows with none", () => {
    expect(stepsByWindow(schedule, 1, 0, 360_000, light).map((w) => [w.window, w.steps.length])).toEqual([
      [[80_000, 120_000], 2],
      [[200_000, 240_000], 2],
    ]);
    expect(stepsByWindow(schedule, 0, 0, 360_000, heavy).map((w) => w.steps.length)).toEqual([3, 3, 2]);
  });

  it("counts only the windows inside the intervals both engines ran in (a run's together blocks)", () => {
    // The second period (120–240 ms) lies between two blocks.
    const [w2, w1] = analyseSteps({ schedule, intervals: [[0, 120_000], [240_000, 360_000]], engines: [{ label: 'w2', slot: 0, steps: heavy }, { label: 'w1', slot: 1, steps: light }] });
    expect(w2).toMatchObject({ windows: 2, stepsPerWindow: 2.5, heldSteps: 1 });
    expect(w2?.lastStepEnd.pastEnd).toBe(0);
    expect(w1).toMatchObject({ windows: 1, stepsPerWindow: 2 });
    expect(w1?.overlappedStarts.windows).toBe(0);
  });

  it('gives steps by place, the gaps between them, and the long and held steps apart', () => {
    const [w2, w1] = findings;
    expect(w2).toMatchObject({ label: 'w2', windowMs: 80, windows: 3, stepsPerWindow: 2.7, longSteps: 1, heldSteps: 1, heldMs: 30 });
    // The held first step of window 3 is left out of the places: (2,000 + 2,000) / 2; then
    // (1,000 + 1,000 + 1,000 + 2,000 + 1,000) / 5.
    expect(w2?.byPlaceUs).toEqual({ first: 2_000, secondToSixth: 1_200, seventhTo21st: null, later: null });
    // 100, 100, 100, 75,900 and 100 µs.
    expect(w2?.gapUs).toBe(15_260);
    expect(w1).toMatchObject({ label: 'w1', windowMs: 40, windows: 2, stepsPerWindow: 2, gapUs: 100, longSteps: 0, heldSteps: 0, heldMs: 0 });
    expect(w1?.byPlaceUs).toEqual({ first: 3_000, secondToSixth: 1_000, seventhTo21st: null, later: null });
  });

  it("counts the windows that started beside the previous window's last step, and what their first steps cost", () => {
    const [w2, w1] = findings;
    // The light engine's second window began 1,050 µs before the heavy engine's last step ended.
    expect(w1?.overlappedStarts).toEqual({ windows: 1, pct: 50, firstSixMs: 4, cleanFirstSixMs: 4 });
    // The heavy engine's windows all began clean: first six steps 4, 5 and 31 ms.
    expect(w2?.overlappedStarts).toEqual({ windows: 0, pct: 0, firstSixMs: null, cleanFirstSixMs: 13.33 });
  });

  it("says where each window's first step started and its last step ended against the window's edges", () => {
    const [w2, w1] = findings;
    // The heavy engine's first steps start at its windows' starts; the light engine's at 80 ms (its
    // window's start) and at 199.95 ms, 50 µs before its window of 200 ms.
    expect(w2?.firstStepStartUs).toBe(0);
    expect(w1?.firstStepStartUs).toBe(-25);
    // The heavy engine's last steps end at 4.2, 201 and 271.1 ms: 75,800 µs idle, 1,000 past the
    // end, 48,900 idle.
    expect(w2?.lastStepEnd).toEqual({ medianUs: -48_900, pastEnd: 1, pastEndPct: 33.3 });
    // The light engine's at 84.1 and 204.05 ms, of windows that end at 120 and 240.
    expect(w1?.lastStepEnd).toEqual({ medianUs: -35_925, pastEnd: 0, pastEndPct: 0 });
  });

  it('prints one row per engine', () => {
    const lines = stepTraceTable(findings).split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^engine +window ms +windows +steps\/window +µs by place: 1st/);
    expect(lines[2]).toMatch(/^w2 +80 +3 +2\.7 +2000 +1200 +— +— +15260 +0 +-48900 +1 \(33\.3 %\) +0 \(0 %\) +— \(13\.33\) +1 +1 \(30\)$/);
    expect(lines[3]).toMatch(/^w1 +40 +2 +2 +3000 +1000 +— +— +100 +-25 +-35925 +0 \(0 %\) +1 \(50 %\) +4 \(4\) +0 +0 \(0\)$/);
  });

  it("reads a host's step lines, skipping other lines and a torn last one", () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpushare-steps-'));
    try {
      const file = join(dir, 'steps.123');
      writeFileSync(file, ['{"k":"step","t":100,"pid":123,"mono":5,"us":700}', '{"k":"truncated","t":1}', '{"k":"step","t":900,"pid":123,"mono":805,"us":650}', '{"k":"step","t":16'].join('\n'));
      expect(readSteps(file)).toEqual([
        [100, 700],
        [900, 650],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
