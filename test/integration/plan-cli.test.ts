/** `gpu-share plan` end to end: a generated GGUF, simulated telemetry, the real CLI. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GiB } from '../../electron/core/planner/policy.js';
import type { PlacementPlan } from '../../electron/core/planner/types.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { CLI } from '../fixtures/procs.js';

let dir = '';
let model = '';

function sim(name: string, devices: unknown[]): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ devices }));
  return file;
}

function plan(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, 'plan', '--data-dir', join(dir, 'data'), ...args], { encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-plan-'));
  model = join(dir, 'tiny.gguf');
  writeGguf(model, TINY_GGUF_SPEC);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const device = (usedBytes: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ key: 'GPU-sim-0', name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes, processes: [{ pid: 4242, usedBytes }], health: 'OK', ...extra });

describe('gpu-share plan', () => {
  it('admits a small model on a mostly free device and prints the PlacementPlan as JSON', () => {
    const r = plan(['--model', model, '--ctx', '256', '--sim', sim('free', [device(2 * GiB)]), '--json']);
    expect(r.code).toBe(0);
    const p = JSON.parse(r.stdout) as Record<string, unknown> & { breakdown: Record<string, number>; reasons: { code: string }[] };
    expect(p['verdict']).toBe('ADMIT');
    expect(p['policy']).toBe('m10-v1');
    expect(p['attribution']).toBe('KNOWN');
    expect(p['fingerprint']).toMatch(/^[0-9a-f]{16}$/);
    expect(p.reasons[0]?.code).toBe('FITS');
    expect(Object.keys(p.breakdown)).toEqual(expect.arrayContaining(['totalBytes', 'observedUsedBytes', 'managedResidentBytes', 'unmanagedExternalBytes', 'futureLeaseBytes', 'reserveBytes', 'schedulableBytes', 'requirementBytes']));
    expect(p.breakdown['totalBytes']).toBe(24 * GiB);
    expect(p.breakdown['unmanagedExternalBytes']).toBe(2 * GiB);
    // m10-v1: max(1 GiB, 5 %) + the 256 MiB runtime margin.
    expect(p.breakdown['reserveBytes']).toBe(Math.round(0.05 * 24 * GiB) + 256 * 1024 ** 2);
    expect(p.breakdown['schedulableBytes']).toBe(24 * GiB - 2 * GiB - Math.round(0.05 * 24 * GiB) - 256 * 1024 ** 2);
    // No serve runs for this folder: its files were read, and the plan says so.
    expect(p['inputs']).toMatchObject({ from: 'files', dataDir: join(dir, 'data') });
  });

  it('shows what the model needs, part by part, adding up to the requirement it was planned with (text and --json)', () => {
    const file = sim('needs', [device(2 * GiB)]);
    const json = JSON.parse(plan(['--model', model, '--ctx', '256', '--sim', file, '--json']).stdout) as PlacementPlan;
    const m = json.memory;
    expect(m.contextSize).toBe(256);
    expect(m.peakSource).toBe('ESTIMATED');
    for (const part of [m.weightsBytes, m.kvCacheBytes, m.computeBytes]) expect(part).toBeGreaterThan(0);
    expect((m.weightsBytes ?? 0) + (m.kvCacheBytes ?? 0) + (m.computeBytes ?? 0)).toBe(m.peakBytes);
    expect(m.peakBytes + m.marginBytes).toBe(m.requirementBytes);
    expect(m.peakBytes).toBe(json.request.peakBytes);
    expect(m.requirementBytes).toBe(json.breakdown.requirementBytes);
    // Twice the context: twice the KV cache, the same weights.
    const doubled = (JSON.parse(plan(['--model', model, '--ctx', '512', '--sim', file, '--json']).stdout) as PlacementPlan).memory;
    expect(doubled.weightsBytes).toBe(m.weightsBytes);
    expect(doubled.kvCacheBytes).toBe(2 * (m.kvCacheBytes ?? 0));
    const text = plan(['--model', model, '--ctx', '256', '--sim', file]).stdout;
    expect(text).toContain('memory needs (estimated from the model file):');
    for (const [label, bytes] of [['weights', m.weightsBytes], ['KV cache (256 tok)', m.kvCacheBytes], ['compute buffers', m.computeBytes], ['+ margin', m.marginBytes], ['= requirement', m.requirementBytes]] as const) {
      expect(text).toContain(`  ${label.padEnd(22)} `);
      expect(text).toMatch(new RegExp(`${label.replace(/[()+=]/g, '\\$&')}\\s+\\S+ \\S+\\s+\\(${bytes} B\\)`));
    }
  });

  it('prints a readable breakdown and exits 4 when the device is full of someone else’s memory', () => {
    const r = plan(['--model', model, '--ctx', '256', '--sim', sim('full', [device(23 * GiB)])]);
    expect(r.code).toBe(4);
    expect(r.stdout).toContain('verdict: REJECT_CAPACITY');
    expect(r.stdout).toMatch(/unmanaged external\s+23\.00 GiB/);
    expect(r.stdout).toMatch(/schedulable\s+0 B/);
  });

  it('refuses a failed device (REJECT_HEALTH, exit 4) and queues lab work under pressure (exit 3)', () => {
    expect(plan(['--model', model, '--ctx', '256', '--sim', sim('lost', [device(1 * GiB, { health: 'FAILED' })])]).code).toBe(4);
    const r = plan(['--model', model, '--ctx', '256', '--priority', 'lab', '--sim', sim('pressure', [device(20 * GiB)]), '--json']);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toMatchObject({ verdict: 'QUEUE', reasons: [{ code: 'PRESSURE_DEFERS_BACKGROUND', pressure: 'ELEVATED' }] });
  });

  it('gives the same fingerprint when run twice over the same file, and records the node and the accelerator', () => {
    const file = sim('twice', [device(5 * GiB)]);
    const runs = [1, 2].map(() => plan(['--model', model, '--ctx', '256', '--sim', file, '--json']));
    const [first, second] = runs.map((r) => {
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { fingerprint: string; plannedAtUs: number; node: string; accelerator: unknown; queue: unknown; request: { weight: number } };
    });
    expect(second?.fingerprint).toBe(first?.fingerprint);
    expect(second?.plannedAtUs).toBeGreaterThan(first?.plannedAtUs ?? Number.POSITIVE_INFINITY);
    expect(first).toMatchObject({ node: hostname(), accelerator: { key: 'GPU-sim-0', name: 'Sim 24GB' }, queue: { depth: 0, maxDepth: 32 }, request: { weight: 3 } });
    // Another weight is another input: another fingerprint (one byte of use: the unit tests).
    const weighted = JSON.parse(plan(['--model', model, '--ctx', '256', '--weight', '2', '--sim', file, '--json']).stdout) as { fingerprint: string };
    expect(weighted.fingerprint).not.toBe(first?.fingerprint);
  });

  it('takes --gpu N and --gpu-key K like every command (--device K is an alias); a device that is not there is a usage error', () => {
    const two = sim('two', [device(2 * GiB), { ...device(1 * GiB), key: 'GPU-sim-1', name: 'Sim 8GB', totalBytes: 8 * GiB, processes: [] }]);
    const key = (args: string[]): string => (JSON.parse(plan(['--model', model, '--ctx', '256', '--sim', two, '--json', ...args]).stdout) as PlacementPlan).accelerator.key;
    expect(key([])).toBe('GPU-sim-0');
    expect(key(['--gpu', '1'])).toBe('GPU-sim-1');
    expect(key(['--gpu-key', 'GPU-sim-1'])).toBe('GPU-sim-1');
    expect(key(['--device', 'GPU-sim-1'])).toBe('GPU-sim-1');
    const past = plan(['--model', model, '--ctx', '256', '--sim', two, '--gpu', '2']);
    expect(past.code).toBe(2);
    expect(past.stderr).toMatch(/--gpu 2: this machine has 2 device\(s\) \(0: GPU-sim-0, 1: GPU-sim-1\)/);
    const unknown = plan(['--model', model, '--ctx', '256', '--sim', two, '--gpu-key', 'GPU-nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--gpu-key: no device GPU-nope; this machine has GPU-sim-0, GPU-sim-1/);
    const both = plan(['--model', model, '--ctx', '256', '--sim', two, '--gpu', '0', '--gpu-key', 'GPU-sim-1']);
    expect(both.code).toBe(2);
    const help = spawnSync(process.execPath, [CLI, 'plan', '--help'], { encoding: 'utf8' }).stdout;
    for (const flag of ['--gpu <n>', '--gpu-key <key>', '--device <key>']) expect(help).toContain(flag);
  });

  it('warns of a context above the trained one (CONTEXT_ABOVE_TRAINED, both numbers) and plans as asked', () => {
    const file = sim('trained', [device(2 * GiB)]);
    const json = JSON.parse(plan(['--model', model, '--ctx', '8192', '--sim', file, '--json']).stdout) as PlacementPlan;
    expect(json.verdict).toBe('ADMIT');
    expect(json.reasons.at(-1)).toEqual({ code: 'CONTEXT_ABOVE_TRAINED', contextSize: 8192, trainContextSize: 256 });
    expect(plan(['--model', model, '--ctx', '8192', '--sim', file]).stdout).toContain('CONTEXT_ABOVE_TRAINED (warning): a context of 8192 tokens is above the 256 the model was trained for');
    expect((JSON.parse(plan(['--model', model, '--ctx', '256', '--sim', file, '--json']).stdout) as PlacementPlan).reasons.map((r) => r.code)).toEqual(['FITS']);
  });

  it('names what is wrong with bad input', () => {
    const missing = plan(['--model', join(dir, 'nope.gguf'), '--ctx', '256']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--model');
    const badCtx = plan(['--model', model, '--ctx', 'lots']);
    expect(badCtx.code).toBe(2);
    expect(badCtx.stderr).toContain('--ctx');
    const badSim = plan(['--model', model, '--ctx', '256', '--sim', sim('bad', [{ key: 'GPU-x', name: 'x', totalBytes: 10, usedBytes: 20 }])]);
    expect(badSim.code).toBe(1);
    expect(badSim.stderr).toContain('devices[0].usedBytes');
    const notGguf = join(dir, 'not.gguf');
    writeFileSync(notGguf, 'hello');
    const bad = plan(['--model', notGguf, '--ctx', '256', '--sim', sim('ok', [device(1 * GiB)])]);
    // A file that is no model is the model's health, not the command's failure: REJECT_HEALTH.
    expect(bad.code).toBe(4);
    expect(bad.stdout).toContain('MODEL_NOT_GGUF');
    expect(bad.stdout).not.toContain('hello');
  });
});
