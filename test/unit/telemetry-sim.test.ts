/** Simulated telemetry: strict validation with JSON paths, re-reading a changed file, and a broken
 *  file followed by a fixed one. */
import { mkdtempSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { parseSimTelemetry, SimProvider } from '../../electron/core/telemetry/sim-provider.js';
import { TelemetryError } from '../../electron/core/telemetry/types.js';

const GiB = 1024 ** 3;
let dir = '';
let n = 0;
const clock = new FakeClock();

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-sim-'));
});
afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

/** A fresh file per call; `mtimeS` sets its modification time so that two writes in the same
 *  millisecond still differ. */
function file(content: unknown): string {
  n++;
  const path = join(dir, `sim-${n}.json`);
  write(path, content, n);
  return path;
}

function write(path: string, content: unknown, mtimeS: number): void {
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  utimesSync(path, mtimeS, 1_700_000_000 + mtimeS);
}

const device = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  key: 'sim-0',
  name: 'Simulated 24 GB',
  totalBytes: 24 * GiB,
  usedBytes: 2 * GiB,
  ...over,
});

function badInput(content: unknown): TelemetryError {
  const path = file(content);
  try {
    new SimProvider({ file: path, wallUs: () => clock.wallUs() });
  } catch (error) {
    expect(error).toBeInstanceOf(TelemetryError);
    expect((error as TelemetryError).code).toBe('BAD_INPUT');
    expect((error as TelemetryError).message).toContain(path);
    return error as TelemetryError;
  }
  throw new Error('expected BAD_INPUT');
}

describe('simulated telemetry', () => {
  it('reads a valid file, with defaults for the optional fields', () => {
    const path = file({
      devices: [
        device(),
        {
          key: 'sim.gpu_1',
          name: 'Second',
          totalBytes: 8 * GiB,
          usedBytes: 8 * GiB,
          processes: [
            { pid: 10, usedBytes: GiB },
            { pid: 11, usedBytes: 0 },
          ],
          health: 'DEGRADED',
          utilizationPct: 12.5,
          temperatureC: -5,
          powerW: 180.5,
        },
      ],
    });
    const p = new SimProvider({ file: path, wallUs: () => clock.wallUs() });
    expect(p.source).toBe('simulated');
    expect(p.sample()).toStrictEqual([
      { key: 'sim-0', name: 'Simulated 24 GB', totalBytes: 24 * GiB, usedBytes: 2 * GiB, processes: null, utilizationPct: null, temperatureC: null, powerW: null, health: 'OK', sampledAtUs: clock.wallUs(), source: 'simulated' },
      {
        key: 'sim.gpu_1',
        name: 'Second',
        totalBytes: 8 * GiB,
        usedBytes: 8 * GiB,
        processes: [
          { pid: 10, usedBytes: GiB },
          { pid: 11, usedBytes: 0 },
        ],
        utilizationPct: 12.5,
        temperatureC: -5,
        powerW: 180.5,
        health: 'DEGRADED',
        sampledAtUs: clock.wallUs(),
        source: 'simulated',
      },
    ]);
    expect(parseSimTelemetry(JSON.stringify({ devices: [] }), 'x.json')).toEqual([]);
    expect(parseSimTelemetry(JSON.stringify({ devices: [device({ processes: null, utilizationPct: null })] }), 'x.json')[0]?.processes).toBeNull();
  });

  const cases: [string, unknown, string][] = [
    ['not JSON', '{"devices": [', 'not valid JSON'],
    ['a top-level array', [], '(top level): must be an object (got an array)'],
    ['no devices', {}, 'devices: is missing'],
    ['devices not an array', { devices: { a: 1 } }, 'devices: must be an array (got an object)'],
    ['an unknown top-level field', { devices: [], extra: 1 }, 'extra: unknown field'],
    ['a device that is not an object', { devices: [device(), 7] }, 'devices[1]: must be an object (got number 7)'],
    ['a missing key', { devices: [{ name: 'x', totalBytes: 1, usedBytes: 0 }] }, 'devices[0].key: is missing'],
    ['a missing totalBytes', { devices: [{ key: 'a', name: 'x', usedBytes: 0 }] }, 'devices[0].totalBytes: is missing'],
    ['usedBytes above totalBytes', { devices: [device(), device({ key: 'sim-1', totalBytes: 100, usedBytes: 101 })] }, 'devices[1].usedBytes: must not exceed totalBytes (101 > 100)'],
    ['bytes as a string', { devices: [device({ totalBytes: '24G' })] }, 'devices[0].totalBytes: must be a number of bytes (got a string ("24G"))'],
    ['negative bytes', { devices: [device({ usedBytes: -1 })] }, 'devices[0].usedBytes: must not be negative (got -1)'],
    ['fractional bytes', { devices: [device({ usedBytes: 1.5 })] }, 'devices[0].usedBytes: must be a whole number of bytes (got 1.5)'],
    ['infinite bytes', '{"devices":[{"key":"a","name":"x","totalBytes":1e400,"usedBytes":0}]}', 'devices[0].totalBytes: must be finite'],
    ['bytes beyond 2^53', { devices: [device({ totalBytes: 2 ** 60 })] }, 'devices[0].totalBytes: must be at most 9007199254740991'],
    ['a key with a slash', { devices: [device({ key: 'GPU/0' })] }, 'devices[0].key: may contain only'],
    ['a key over 40 characters', { devices: [device({ key: 'k'.repeat(41) })] }, 'devices[0].key: must be at most 40 characters'],
    ['a key that is a number', { devices: [device({ key: 3 })] }, 'devices[0].key: must be a string (got number 3)'],
    ['a duplicate key', { devices: [device(), device()] }, 'devices[1].key: duplicate key "sim-0" (also devices[0].key)'],
    ['an empty name', { devices: [device({ name: ' ' })] }, 'devices[0].name: must be a non-empty string'],
    ['an unknown health', { devices: [device({ health: 'BROKEN' })] }, 'devices[0].health: must be one of OK, DEGRADED, FAILED, UNKNOWN (got a string ("BROKEN"))'],
    ['utilization above 100', { devices: [device({ utilizationPct: 150 })] }, 'devices[0].utilizationPct: must be between 0 and 100 (got 150)'],
    ['a temperature that is text', { devices: [device({ temperatureC: 'hot' })] }, 'devices[0].temperatureC: must be a finite number or null'],
    ['a negative power draw', { devices: [device({ powerW: -3 })] }, 'devices[0].powerW'],
    ['a misspelt field', { devices: [device({ usedbytes: 5 })] }, 'devices[0].usedbytes: unknown field'],
    ['processes not an array', { devices: [device({ processes: {} })] }, 'devices[0].processes: must be an array or null (got an object)'],
    ['a pid of 0', { devices: [device({ processes: [{ pid: 0, usedBytes: 1 }] })] }, 'devices[0].processes[0].pid: must be a positive whole number (got number 0)'],
    ['a duplicate pid', { devices: [device({ processes: [{ pid: 5, usedBytes: 1 }, { pid: 5, usedBytes: 2 }] })] }, 'devices[0].processes[1].pid: duplicate pid 5'],
    ['negative process bytes', { devices: [device({ processes: [{ pid: 5, usedBytes: -3 }] })] }, 'devices[0].processes[0].usedBytes: must not be negative'],
    ['a process without usedBytes', { devices: [device({ processes: [{ pid: 5 }] })] }, 'devices[0].processes[0].usedBytes: is missing'],
    ['an unknown process field', { devices: [device({ processes: [{ pid: 5, usedBytes: 1, name: 'x' }] })] }, 'devices[0].processes[0].name: unknown field'],
  ];
  it.each(cases)('rejects %s with the JSON path in the message', (_what, content, expected) => {
    expect(badInput(content).message).toContain(expected);
  });

  it('lists every problem, not only the first', () => {
    const message = badInput({ devices: [device({ usedBytes: -1 }), device({ key: 'b', health: 'x' })] }).message;
    expect(message).toContain('devices[0].usedBytes');
    expect(message).toContain('devices[1].health');
  });

  it('re-reads the file when it changes between samples', () => {
    const path = file({ devices: [device()] });
    const p = new SimProvider({ file: path, wallUs: () => clock.wallUs() });
    expect(p.sample()[0]?.usedBytes).toBe(2 * GiB);
    expect(p.sample()[0]?.usedBytes).toBe(2 * GiB);
    write(path, { devices: [device({ usedBytes: 3 * GiB, processes: [{ pid: 42, usedBytes: GiB }] })] }, 10_001);
    clock.advance(500_000);
    expect(p.sample()[0]).toMatchObject({ usedBytes: 3 * GiB, processes: [{ pid: 42, usedBytes: GiB }], sampledAtUs: clock.wallUs() });
    // Same size, only the content differs: the new mtime tells.
    write(path, { devices: [device({ usedBytes: 4 * GiB, processes: [{ pid: 42, usedBytes: GiB }] })] }, 10_002);
    expect(p.sample()[0]?.usedBytes).toBe(4 * GiB);
  });

  it('throws while the file is broken or missing, and works again once it is fixed', () => {
    const path = file({ devices: [device()] });
    const p = new SimProvider({ file: path, wallUs: () => clock.wallUs() });
    expect(p.sample()).toHaveLength(1);

    write(path, { devices: [device({ usedBytes: 99 * GiB })] }, 20_001);
    expect(() => p.sample()).toThrow(/devices\[0\]\.usedBytes: must not exceed totalBytes/);
    // Unchanged and still broken: still an error, not the old figures.
    expect(() => p.sample()).toThrow(TelemetryError);

    write(path, '{ broken', 20_002);
    expect(() => p.sample()).toThrow(/not valid JSON/);

    unlinkSync(path);
    expect(() => p.sample()).toThrow(/cannot be read/);

    write(path, { devices: [device({ usedBytes: 5 * GiB })] }, 20_003);
    expect(p.sample()[0]?.usedBytes).toBe(5 * GiB);
  });

  it('refuses to start on a missing file', () => {
    expect(() => new SimProvider({ file: join(dir, 'absent.json'), wallUs: () => 0 })).toThrow(/absent\.json cannot be read/);
  });

  it('hands out copies: changing a sample does not change the next', () => {
    const p = new SimProvider({ file: file({ devices: [device({ processes: [{ pid: 1, usedBytes: 1 }] })] }), wallUs: () => clock.wallUs() });
    const first = p.sample()[0];
    if (first?.processes) first.processes[0] = { pid: 2, usedBytes: 2 };
    expect(p.sample()[0]?.processes).toEqual([{ pid: 1, usedBytes: 1 }]);
  });
});
