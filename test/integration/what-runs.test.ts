/** Over HTTP (and so from a browser dashboard) a profile may not choose what runs; a plan refuses
 *  an engine whose executable is missing; the dashboard's lists of what this machine has. Against
 *  a real `gpu-share serve` whose HOME holds every tool's model folder and whose PATH a stand-in
 *  llama-server. */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExecutableView, LaunchOutcome, LocalModelList, PlacementPlan } from '../../electron/core/contract.js';
import { makeModelHome, type ModelHome } from '../fixtures/model-folders.js';
import { CLI } from '../fixtures/procs.js';
import { call, startServe, until, type Served } from '../fixtures/serve.js';

const GiB = 2 ** 30;
let dir: string;
let served: Served;
let fixture: ModelHome;
let marker: string;
let bin: string;

interface ErrorBody {
  error: { code: string; message: string; field?: string };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-what-runs-'));
  fixture = makeModelHome(join(dir, 'home'));
  bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'llama-server'), '#!/bin/sh\necho "version: 4567 (abc1234)" >&2\n');
  chmodSync(join(bin, 'llama-server'), 0o755);
  const empty = join(dir, 'empty');
  mkdirSync(empty);
  marker = join(dir, 'ran');
  const sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: 'GPU-what-runs', name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: GiB, processes: null, health: 'OK' }] }));
  const model = fixture.expected[0]?.path ?? '';
  const home = fixture.home;
  served = await startServe({
    dataDir: join(dir, 'data'),
    sim,
    env: {
      HOME: home,
      PATH: `${bin}:${process.env['PATH'] ?? ''}`,
      XDG_CACHE_HOME: join(home, '.cache'),
      OLLAMA_MODELS: join(home, '.ollama', 'models'),
      HF_HUB_CACHE: join(home, '.cache', 'huggingface', 'hub'),
      LLAMA_CACHE: join(home, '.cache', 'llama.cpp'),
    },
    // Made on this machine: a command engine, and llama-servers whose executables cannot run.
    profiles: [
      { id: 'local-command', name: 'local-command', capabilities: ['local'], engineKind: 'command', command: '/bin/sleep', args: ['30'], contextSize: 1, priority: 'lab' },
      { id: 'off-path', name: 'off-path', capabilities: ['off'], engineKind: 'llama-server', modelPath: model, contextSize: 256, priority: 'interactive', env: { PATH: empty } },
      { id: 'gone', name: 'gone', capabilities: ['gone'], engineKind: 'llama-server', command: join(dir, 'uninstalled', 'llama-server'), modelPath: model, contextSize: 256, priority: 'interactive' },
    ],
  });
}, 30_000);

afterAll(async () => {
  await served?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('over HTTP a profile may not choose what runs', () => {
  it('refuses to create a command profile, so launching it runs nothing', async () => {
    const created = await call<ErrorBody>(served, 'POST', '/api/profiles', { id: 'evil', name: 'evil', capabilities: ['evil'], engineKind: 'command', command: '/bin/sh', args: ['-c', `touch ${marker}`], contextSize: 1, priority: 'lab' });
    expect(created.status).toBe(403);
    expect(created.body.error).toMatchObject({ code: 'FORBIDDEN', field: 'engineKind' });
    expect(created.body.error.message).toContain('profiles.json');
    const launched = await call(served, 'POST', '/api/engines', { profileId: 'evil' });
    expect(launched.status).toBe(404);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(existsSync(marker)).toBe(false);
  });

  it('refuses to edit a command profile made on this machine, or to turn one into it', async () => {
    expect((await call<ErrorBody>(served, 'PUT', '/api/profiles/local-command', { args: ['-c', 'id'] })).status).toBe(403);
    const turned = await call<ErrorBody>(served, 'PUT', '/api/profiles/off-path', { engineKind: 'command', command: '/bin/sh' });
    expect(turned.status).toBe(403);
  });

  it('lets a llama-server profile pick an executable found on this machine (with its version) and set ordinary arguments, not another executable nor loader environment', async () => {
    const listed = await call<ExecutableView[]>(served, 'GET', '/api/executables');
    expect(listed.status).toBe(200);
    const found = listed.body.find((e) => e.path === join(bin, 'llama-server'));
    expect(found).toEqual({ path: join(bin, 'llama-server'), kind: 'llama-server', source: 'PATH', version: 'version: 4567 (abc1234)' });
    const model = fixture.expected[0]?.path ?? '';
    const profile = (extra: Record<string, unknown>): Record<string, unknown> => ({ name: `llama-${Math.random().toString(36).slice(2, 8)}`, capabilities: ['chat'], engineKind: 'llama-server', modelPath: model, contextSize: 256, priority: 'interactive', ...extra });
    const picked = await call<{ id: string }>(served, 'POST', '/api/profiles', profile({ command: join(bin, 'llama-server'), args: ['--flash-attn', 'on'], env: { CUDA_VISIBLE_DEVICES: '0' } }));
    expect(picked.status).toBe(201);
    const other = await call<ErrorBody>(served, 'POST', '/api/profiles', profile({ command: '/bin/sh', args: ['-c', `touch ${marker}`] }));
    expect(other.status).toBe(403);
    expect(other.body.error.field).toBe('command');
    const loader = await call<ErrorBody>(served, 'POST', '/api/profiles', profile({ env: { LD_PRELOAD: join(dir, 'x.so') } }));
    expect(loader.status).toBe(403);
    expect(loader.body.error.field).toBe('env');
    expect((await call(served, 'PUT', `/api/profiles/${picked.body.id}`, { env: { PATH: dir } })).status).toBe(403);
    expect((await call(served, 'PUT', `/api/profiles/${picked.body.id}`, { args: ['--threads', '2'] })).status).toBe(200);
  });
});

describe('a plan checks the engine\'s executable', () => {
  it('REJECT_HEALTH with ENGINE_EXECUTABLE_MISSING naming it, and nothing starts', async () => {
    const offPath = await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'off-path' });
    expect(offPath.body.verdict).toBe('REJECT_HEALTH');
    expect(offPath.body.reasons).toEqual([{ code: 'ENGINE_EXECUTABLE_MISSING', executable: 'llama-server', executableProblem: 'NOT_ON_PATH' }]);
    const gone = await call<PlacementPlan>(served, 'POST', '/api/plan', { profileId: 'gone' });
    expect(gone.body.reasons).toEqual([{ code: 'ENGINE_EXECUTABLE_MISSING', executable: join(dir, 'uninstalled', 'llama-server'), executableProblem: 'MISSING' }]);
    const launched = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: 'gone' });
    expect(launched.body.engine).toBeNull();
    expect(launched.body.plan.verdict).toBe('REJECT_HEALTH');
  });
});

describe('models on this machine', () => {
  it('lists the models of every tool\'s folder with their names, headers and whether each fits now', async () => {
    const list = await until(async () => {
      const answer = await call<LocalModelList>(served, 'GET', '/api/local-models');
      expect(answer.status).toBe(200);
      return answer.body.pending === 0 ? answer.body : undefined;
    }, 60_000, 'every header read and every model estimated');
    expect(list.models.map((m) => m.name).sort()).toEqual(fixture.expected.map((m) => m.name).sort());
    const llama = list.models.find((m) => m.name === 'llama3.2:3b');
    expect(llama).toMatchObject({ source: 'ollama', quantization: 'Q8_0', trainContextSize: 2048, problem: null, fit: { verdict: 'ADMIT', gpuKey: 'GPU-what-runs', contextSize: 2048 } });
    expect(llama?.fit?.requirementBytes).toBeGreaterThan(0);
  }, 90_000);
});

describe('gpu-share executables and gpu-share models', () => {
  const run = (args: string[]): { code: number | null; stdout: string; stderr: string } => {
    const home = fixture.home;
    const env = { ...process.env, HOME: home, PATH: `${bin}:${process.env['PATH'] ?? ''}`, XDG_CACHE_HOME: join(home, '.cache'), OLLAMA_MODELS: join(home, '.ollama', 'models'), HF_HUB_CACHE: join(home, '.cache', 'huggingface', 'hub'), LLAMA_CACHE: join(home, '.cache', 'llama.cpp') };
    const result = spawnSync(process.execPath, [CLI, ...args], { env, encoding: 'utf8', timeout: 60_000 });
    return { code: result.status, stdout: result.stdout, stderr: result.stderr };
  };

  it('adds an executable on this machine (one line for one that cannot be), and lists it with those found', () => {
    const data = join(dir, 'cli-data');
    const missing = run(['executables', '--add', join(dir, 'nope'), '--data-dir', data]);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim().split('\n')).toEqual([`gpu-share: ${join(dir, 'nope')}: no such file`]);
    const mine = join(dir, 'my-server');
    writeFileSync(mine, '#!/bin/sh\necho "my-server 1.2.3"\n');
    chmodSync(mine, 0o755);
    expect(run(['executables', '--add', mine, '--data-dir', data]).code).toBe(0);
    const listed = JSON.parse(run(['executables', '--json', '--data-dir', data]).stdout) as ExecutableView[];
    expect(listed).toEqual(expect.arrayContaining([
      { path: join(bin, 'llama-server'), kind: 'llama-server', source: 'PATH', version: 'version: 4567 (abc1234)' },
      { path: mine, kind: null, source: 'added', version: 'my-server 1.2.3' },
    ]));
  });

  it('lists the models other tools keep, every header read', () => {
    const result = run(['models', '--json', '--data-dir', join(dir, 'cli-data')]);
    expect(result.code).toBe(0);
    const list = JSON.parse(result.stdout) as LocalModelList;
    expect(list.models.map((m) => m.name).sort()).toEqual(fixture.expected.map((m) => m.name).sort());
    expect(list.models.every((m) => m.read && m.quantization === 'Q8_0')).toBe(true);
    expect(run(['models', '--data-dir', join(dir, 'cli-data')]).stdout).toContain('llama3.2:3b');
  }, 60_000);
});
