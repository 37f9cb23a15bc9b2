/** The supervisor → engine control lines: what parses, and that nothing else does or throws. */
import { describe, expect, it } from 'vitest';
import { formatControl, parseControlLine } from '../../electron/core/engines/control-protocol.js';

describe('control protocol', () => {
  it('round-trips a weight', () => {
    expect(parseControlLine(formatControl({ cmd: 'weight', weight: 2.5 }))).toEqual({ cmd: 'weight', weight: 2.5 });
  });

  it('round-trips the gateway\'s count of requests', () => {
    expect(parseControlLine(formatControl({ cmd: 'requests', inFlight: 0 }))).toEqual({ cmd: 'requests', inFlight: 0 });
    expect(parseControlLine(formatControl({ cmd: 'requests', inFlight: 3 }))).toEqual({ cmd: 'requests', inFlight: 3 });
  });

  it('ignores anything that is not a valid command', () => {
    for (const line of ['', 'weight 2', '{}', '[]', 'null', '{"cmd":"weight"}', '{"cmd":"weight","weight":0}', '{"cmd":"weight","weight":101}', '{"cmd":"weight","weight":"2"}', '{"cmd":"weight","weight":1e400}', '{"cmd":"exit"}', '{"cmd":"requests"}', '{"cmd":"requests","inFlight":-1}', '{"cmd":"requests","inFlight":1.5}', '{"cmd":"requests","inFlight":"2"}', '{"cmd":"requests","inFlight":2000000}', `{"cmd":"weight","weight":1,"pad":"${'x'.repeat(2000)}"}`, '\u0000\u0001']) {
      expect(parseControlLine(line), line.slice(0, 40)).toBeNull();
    }
  });
});
