/** The supervisor with real processes: command engines paced through `gpu-share run`, graceful
 *  stop, SIGKILL escalation, crash detection, eviction on a simulated device, and no orphan after
 *  the supervisor itself is SIGKILLed. */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../electron/core/clock.js';
import { Supervisor, type LaunchSpec, type SupervisorEvent } from '../../electron/core/engines/supervisor.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { simSupervisorDeps } from '../fixtures/supervisor-deps.js';
import { loadRegistryHelper } from '../../native/helper.js';
import { BURN_ENGINE, CLI, FAKE_LLAMA_SERVER, SUPERVISOR_PROC, procState, readBurnOutput, until , PACED_2_1_HIGH, PACED_2_1_LOW } from '../fixtures/procs.js';
import { removeSegment, testKey } from '../fixtures/segments.js';

const helper = loadRegistryHelper();
const clock = systemClock(() => helper.wallUs());
const supervisors: Supervisor[] = [];
const keys: string[] = [];

function supervisorOn(totalBytes = 24 * GiB, events: SupervisorEvent[] = []): { supervisor: Supervisor; gpuKey: string } {
  const gpuKey = testKey('sup');
  keys.push(gpuKey);
  const supervisor = new Supervisor(simSupervisorDeps({ clock, gpuKey, totalBytes, onEvent: (event) => events.push(event) }));
  supervisors.push(supervisor);
  return { supervisor, gpuKey };
}

function commandSpec(id: string, command: string, args: string[], overrides: Partial<LaunchSpec> = {}): LaunchSpec {
  return { profileId: id, name: id, kind: 'command', capability: 'chat', modelPath: null, modelKey: `model-${id}`, contextSize: 1, gpuLayers: 0, threads: null, weight: 1, priority: 'background', pinned: false, command, args, env: {}, peakBytes: 1 * GiB, peakSource: 'ESTIMATED', ...overrides };
}

const burn = (id: string, overrides: Partial<LaunchSpec> = {}): LaunchSpec => commandSpec(id, process.execPath, [BURN_ENGINE, '--mode', 'unaware', '--token-ms', '2', '--duration-s', '60'], overrides);

function peersOf(gpuKey: string): { pid: number; name: string }[] {
  const r = spawnSync(process.execPath, [CLI, 'peers', '--gpu-key', gpuKey, '--json'], { encoding: 'utf8' });
  return (JSON.parse(r.stdout) as { peers: { pid: number; name: string }[] }).peers;
}

afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stopAll(1_000);
  for (const k of keys.splice(0)) removeSegment(k);
});

describe('supervisor', () => {
  it('launches a command engine under the process gate, shows it in the registry, and stops it gracefully', async () => {
    const events: SupervisorEvent[] = [];
    const { supervisor, gpuKey } = supervisorOn(24 * GiB, events);
    const dir = mkdtempSync(join(tmpdir(), 'gpu-share-sup-'));
    const out = join(dir, 'burner.jsonl');
    const spec = burn('burner');
    const result = await supervisor.launch({ ...spec, args: [...spec.args, '--out', out] });
    expect(result.plan.verdict).toBe('ADMIT');
    expect(result.engine?.state).toBe('running');
    expect(peersOf(gpuKey).map((p) => p.name)).toContain('burner');
    // Stop it mid-decode, as a user would: a graceful stop then exits 0.
    await until(() => readBurnOutput(out).tokens.length > 0, 10_000, 'the first tokens');
    const stopped = await supervisor.stop(result.engine?.id ?? '');
    expect(stopped.state).toBe('stopped');
    expect(stopped.exitCode).toBe(0);
    expect(events.some((e) => e.kind === 'plan')).toBe(true);
    expect(events.filter((e) => e.kind === 'state').map((e) => (e.kind === 'state' ? e.engine.state : ''))).toEqual(['loading', 'running', 'stopping', 'stopped']);
    rmSync(dir, { recursive: true, force: true });
  });

  it('detects a crash with its exit code and last log lines', async () => {
    const { supervisor } = supervisorOn();
    const result = await supervisor.launch(commandSpec('crasher', 'sh', ['-c', 'sleep 0.3; echo "boom: out of memory" >&2; exit 3']));
    await until(() => supervisor.get(result.engine?.id ?? '')?.state === 'crashed', 5_000, 'the crash');
    const status = supervisor.get(result.engine?.id ?? '');
    expect(status?.exitCode).toBe(3);
    expect(status?.lastLines.join('\n')).toContain('boom: out of memory');
  });

  it('escalates to SIGKILL for an engine that ignores SIGTERM, and leaves nothing behind', async () => {
    const { supervisor } = supervisorOn();
    const result = await supervisor.launch(commandSpec('stubborn', 'sh', ['-c', 'trap "" TERM; while :; do sleep 0.05; done']));
    const started = Date.now();
    const stopped = await supervisor.stop(result.engine?.id ?? '', 700);
    expect(Date.now() - started).toBeGreaterThanOrEqual(650);
    expect(stopped.exitSignal).toBe('SIGKILL');
    const left = spawnSync('pgrep', ['-f', 'trap "" TERM; while'], { encoding: 'utf8' }).stdout.trim();
    expect(left).toBe('');
  });

  it('evicts an idle lower-priority engine to make room, and refuses what can never fit with the planner’s reasons', async () => {
    const { supervisor } = supervisorOn(6 * GiB);
    // 6 GiB device, 1.25 GiB reserve: a 3 GiB lab engine leaves too little for a 2.5 GiB interactive one.
    const lab = await supervisor.launch(burn('lab-engine', { priority: 'lab', peakBytes: 3 * GiB }));
    expect(lab.engine?.state).toBe('running');
    const chat = await supervisor.launch(burn('chat-engine', { priority: 'interactive', peakBytes: 2.5 * GiB }));
    expect(chat.plan.verdict).toBe('ADMIT_AFTER_EVICTION');
    expect(chat.plan.evictions.map((e) => e.id)).toEqual([lab.engine?.id]);
    expect(supervisor.get(lab.engine?.id ?? '')?.state).toBe('stopped');
    expect(chat.engine?.state).toBe('running');
    const huge = await supervisor.launch(burn('huge', { priority: 'interactive', peakBytes: 20 * GiB }));
    expect(huge.engine).toBeNull();
    expect(huge.plan.verdict).toBe('REJECT_CAPACITY');
    expect(huge.plan.reasons[0]).toMatchObject({ code: 'EXCEEDS_DEVICE' });
    // Never one of higher priority: a lab launch cannot displace the interactive engine.
    const another = await supervisor.launch(burn('another', { priority: 'lab', peakBytes: 2.5 * GiB }));
    expect(another.plan.verdict).not.toBe('ADMIT_AFTER_EVICTION');
    expect(supervisor.get(chat.engine?.id ?? '')?.state).toBe('running');
  });

  it('waits for a llama-server’s /health before calling it running', async () => {
    const { supervisor } = supervisorOn();
    const port = 20_000 + (process.pid % 20_000);
    const started = Date.now();
    // An executable standing in for llama-server (it gets llama-server's flags first).
    const executable = join(mkdtempSync(join(tmpdir(), 'gpushare-llama-')), 'llama-server');
    writeFileSync(executable, `#!/bin/sh\nexec "${process.execPath}" "${FAKE_LLAMA_SERVER}" "$@"\n`, { mode: 0o755 });
    const result = await supervisor.launch(commandSpec('llama', executable, [], { kind: 'llama-server', modelPath: '/models/fake.gguf', args: ['--port', String(port), '--load-ms', '1200'] }));
    expect(result.engine?.state).toBe('running');
    expect(result.engine?.port).toBe(port);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_100);
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
  });

  it('refuses to signal anything it did not start', async () => {
    const { supervisor } = supervisorOn();
    await expect(supervisor.stop('not-ours')).rejects.toThrowError('no engine not-ours was started by this supervisor');
  });

  it('leaves no engine running 5 s after the supervisor is killed with SIGKILL', async () => {
    const gpuKey = testKey('orphan');
    keys.push(gpuKey);
    const proc = spawn(process.execPath, [SUPERVISOR_PROC, gpuKey, '--', process.execPath, BURN_ENGINE, '--mode', 'unaware', '--token-ms', '2', '--duration-s', '60'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve) => createInterface({ input: proc.stdout }).once('line', resolve));
    const { wrapperPid, enginePid, state } = JSON.parse(line) as { wrapperPid: number; enginePid: number; state: string };
    expect(state).toBe('running');
    expect(enginePid).toBeGreaterThan(0);
    proc.kill('SIGKILL');
    const killedAt = Date.now();
    await until(() => procState(enginePid) === null && procState(wrapperPid) === null, 5_000, 'the engine and its wrapper to exit');
    expect(Date.now() - killedAt).toBeLessThan(5_000);
  });
});

describe('supervisor pacing', () => {
  it('paces two command engines (burn engines) at 2:1 through the process gate on one core (clearly paced: 1.5–2.7)', async () => {
    const { supervisor } = supervisorOn();
    const outs = [`/tmp/sup-burn-a-${process.pid}.jsonl`, `/tmp/sup-burn-b-${process.pid}.jsonl`];
    const pinned = (out: string): string[] => ['-c', '0', process.execPath, BURN_ENGINE, '--mode', 'unaware', '--token-ms', '5', '--duration-s', '7', '--out', out];
    const engines = await Promise.all([
      supervisor.launch(commandSpec('heavy', 'taskset', pinned(outs[0] ?? ''), { weight: 2 })),
      supervisor.launch(commandSpec('light', 'taskset', pinned(outs[1] ?? ''), { weight: 1 })),
    ]);
    expect(engines.map((e) => e.engine?.state)).toEqual(['running', 'running']);
    await until(() => supervisor.list().every((e) => e.state !== 'running'), 15_000, 'both engines to finish', 100);
    const [a, b] = outs.map((out) => readBurnOutput(out));
    for (const out of outs) rmSync(out, { force: true });
    const t0 = Math.max(a?.tokens[0] ?? 0, b?.tokens[0] ?? 0);
    const rate = (tokens: number[]): number => tokens.filter((t) => t >= t0 + 2e6 && t < t0 + 5.5e6).length;
    const ratio = rate(a?.tokens ?? []) / Math.max(1, rate(b?.tokens ?? []));
    expect(ratio).toBeGreaterThan(PACED_2_1_LOW);
    expect(ratio).toBeLessThan(PACED_2_1_HIGH);
  });
});
