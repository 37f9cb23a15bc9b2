/**
 * The soak: `gpu-share serve` on a simulated device with room for about two small built-in
 * engines, and four clients doing a seeded mix of launches, gateway streams, stops, weight changes,
 * dry-run plans and state reads for N minutes, on three working profiles, one whose model file is
 * gone and one whose engine crashes as it starts. Outcomes are counted by kind: capacity answers
 * (QUEUE, REJECT_*, 429, 503) are the device saying no, conflicts are races the API reports
 * correctly (a weight for an engine that just stopped), internal errors are ours and must be 0.
 * At the end every engine is stopped and nothing may be left: no engine process, no lease, no
 * registry peer.
 *
 *   npm run soak -- --minutes 10 [--seed N] [--json]
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { flagsOrExit } from '../fixtures/flags.js';
import type { AppState, EngineView, LaunchOutcome } from '../../electron/core/contract.js';
import { GiB, MiB } from '../../electron/core/planner/policy.js';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { writeGguf } from '../fixtures/gguf.js';
import { ROOT } from '../fixtures/procs.js';
import { pick, seededRandom } from '../fixtures/random.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, startServe, streamChat, until, type Served } from '../fixtures/serve.js';
import { runBenchScript } from './stop-on-signal.js';

export interface SoakResult {
  minutes: number;
  seed: number;
  operations: number;
  byOperation: Record<string, number>;
  ok: number;
  capacity: number;
  conflicts: number;
  internalErrors: number;
  /** The first few internal errors, for the report. */
  errorSamples: string[];
  tokensStreamed: number;
  leaked: { engines: number; leaseBytes: number; peers: number; processes: number };
}

const OPERATIONS = ['launch', 'stream', 'stream', 'stream', 'stop', 'weight', 'plan', 'state'] as const;
type Operation = (typeof OPERATIONS)[number];

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function runSoak(options: { minutes: number; seed: number; workers?: number; log?: (line: string) => void }): Promise<SoakResult> {
  const log = options.log ?? (() => undefined);
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-soak-'));
  const key = `GPU-soak-${process.pid}`;
  const model = join(dir, 'small.gguf');
  writeGguf(model, { embedding: 512, layers: 6, contextLength: 1024, feedForward: 1024, heads: 8, vocab: 1024, type: 'q8_0', seed: 7 });
  const sim = join(dir, 'sim.json');
  // 1 GiB reserve + 420 MiB: two small engines (each ~51 MiB measured-or-estimated, 179 MiB
  // required to load) fit at once; a third must evict, queue or be refused.
  writeFileSync(sim, JSON.stringify({ devices: [{ key, name: 'Soak sim', totalBytes: GiB + 420 * MiB, usedBytes: 0, processes: null, health: 'OK' }] }));
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir);
  // The crasher is a command profile, the local user's to make: written before serve starts.
  const crasher = join(dir, 'crasher.mjs');
  writeFileSync(crasher, 'setTimeout(() => process.exit(3), 400);\n');
  const crasherProfile = { id: 'crasher', name: 'crasher', capabilities: ['crasher'], engineKind: 'command', command: process.execPath, args: [crasher, '--port', '9'], contextSize: 512, priority: 'lab' as const };
  const served: Served = await startServe({ dataDir, sim, profiles: [crasherProfile] });
  const result: SoakResult = { minutes: options.minutes, seed: options.seed, operations: 0, byOperation: {}, ok: 0, capacity: 0, conflicts: 0, internalErrors: 0, errorSamples: [], tokensStreamed: 0, leaked: { engines: 0, leaseBytes: 0, peers: 0, processes: 0 } };
  const pids = new Set<number>();
  const internal = (what: string): void => {
    result.internalErrors++;
    if (result.errorSamples.length < 10) result.errorSamples.push(what);
  };
  /** Sorts an answer into ok / capacity / conflict / internal. */
  const judge = (what: string, status: number, body: unknown): void => {
    // The contract's codes (/api) and the gateway's OpenAI-style ones (/v1), alike.
    const code = (body as { error?: { code?: string } } | null)?.error?.code?.toUpperCase();
    if (status >= 200 && status < 300) result.ok++;
    else if (status === 503 && code === 'NOT_ADMITTED') result.capacity++;
    else if (status === 429) result.capacity++;
    else if (status === 409 || (status === 503 && code === 'ENGINE_GONE')) result.conflicts++;
    else internal(`${what}: ${status} ${JSON.stringify(body).slice(0, 300)}`);
  };
  try {
    const working = ['alpha', 'beta', 'gamma'].map((id, i) => ({ id, name: id, capabilities: [id], engineKind: 'builtin', modelPath: model, contextSize: 512, threads: 1, priority: (['interactive', 'background', 'lab'] as const)[i] }));
    // Two that never work: a model file deleted after its profile was added (its loads are
    // REJECT_HEALTH, then the gateway skips it), and an engine that crashes 0.4 s after it starts.
    const doomed = join(dir, 'doomed.gguf');
    copyFileSync(model, doomed);
    const broken = [{ id: 'broken', name: 'broken', capabilities: ['broken'], engineKind: 'builtin', modelPath: doomed, contextSize: 512, threads: 1, priority: 'background' as const }];
    const profiles = [...working, ...broken, crasherProfile];
    for (const p of [...working, ...broken]) {
      const answer = await call(served, 'POST', '/api/profiles', p);
      judge('profile', answer.status, answer.body);
    }
    rmSync(doomed);
    const deadline = Date.now() + options.minutes * 60_000;
    const engines = async (): Promise<EngineView[]> => (await call<AppState>(served, 'GET', '/api/state')).body.engines;
    const worker = async (w: number): Promise<void> => {
      const random = seededRandom(options.seed * 100 + w);
      while (Date.now() < deadline) {
        const op: Operation = pick(random, OPERATIONS);
        result.operations++;
        result.byOperation[op] = (result.byOperation[op] ?? 0) + 1;
        const profile = pick(random, profiles);
        try {
          switch (op) {
            case 'launch': {
              const answer = await call<LaunchOutcome>(served, 'POST', '/api/engines', { profileId: profile.id });
              if (answer.status === 200 && answer.body.engine === null) result.capacity++;
              else judge('launch', answer.status, answer.body);
              if (answer.body.engine) pids.add(answer.body.engine.pid);
              break;
            }
            case 'stream': {
              const answer = await streamChat(served, profile.id, 8 + Math.floor(random() * 40));
              // Another client stopped the engine mid-answer: the stream says so, and it counts as a race.
              if (answer.errorCode?.toUpperCase() === 'ENGINE_GONE') result.conflicts++;
              else if (answer.errorCode !== undefined) internal(`stream: error event ${answer.errorCode}`);
              else judge('stream', answer.status, answer.body ?? null);
              result.tokensStreamed += answer.pieces.length;
              break;
            }
            case 'stop': {
              const running = (await engines()).filter((e) => e.state === 'running');
              if (running.length === 0) break;
              const target = pick(random, running);
              const answer = await call(served, 'POST', `/api/engines/${target.id}/${random() < 0.2 ? 'kill' : 'stop'}`);
              judge('stop', answer.status, answer.body);
              break;
            }
            case 'weight': {
              const running = (await engines()).filter((e) => e.state === 'running' || e.state === 'loading');
              if (running.length === 0) break;
              const answer = await call(served, 'PUT', `/api/engines/${pick(random, running).id}/weight`, { weight: pick(random, [0.5, 1, 2, 4]) });
              judge('weight', answer.status, answer.body);
              break;
            }
            case 'plan': {
              const answer = await call(served, 'POST', '/api/plan', { profileId: profile.id });
              judge('plan', answer.status, answer.body);
              break;
            }
            case 'state': {
              const answer = await call(served, 'GET', '/api/state');
              judge('state', answer.status, answer.body);
              break;
            }
          }
        } catch (error) {
          internal(`${op}: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    };
    const progress = setInterval(() => log(`soak: ${result.operations} operations, ${result.ok} ok, ${result.capacity} capacity, ${result.conflicts} conflicts, ${result.internalErrors} internal errors`), 15_000);
    await Promise.all(Array.from({ length: options.workers ?? 4 }, (_, w) => worker(w)));
    clearInterval(progress);

    // Stop everything; then nothing may be left.
    for (const engine of await engines()) {
      pids.add(engine.pid);
      if (engine.state !== 'running' && engine.state !== 'loading') continue;
      const answer = await call(served, 'POST', `/api/engines/${engine.id}/stop`);
      judge('final stop', answer.status, answer.body);
    }
    const final = (await call<AppState>(served, 'GET', '/api/state')).body;
    result.leaked.engines = final.engines.filter((e) => e.state === 'running' || e.state === 'loading' || e.state === 'stopping').length;
    result.leaked.leaseBytes = final.devices[0]?.vram?.leaseBytes ?? 0;
    await until(async () => ((await call<GpuPeersView>(served, 'GET', '/gpu/peers', undefined, null)).body.peers.length === 0 ? true : undefined), 4_000, 'registry empty').catch(() => undefined);
    result.leaked.peers = (await call<GpuPeersView>(served, 'GET', '/gpu/peers', undefined, null)).body.peers.length;
    result.leaked.processes = [...pids].filter(alive).length;
  } finally {
    await served.stop();
    removeSegment(key);
    rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

async function main(): Promise<void> {
  const values = flagsOrExit('soak', 'usage: npm run soak -- [--minutes M] [--seed N] [--json]', { minutes: { type: 'string', default: '2' }, seed: { type: 'string', default: '1' }, json: { type: 'boolean', default: false } });
  const minutes = Number(values.minutes);
  const seed = Number(values.seed);
  if (!Number.isFinite(minutes) || minutes <= 0 || minutes > 24 * 60) throw new Error(`--minutes: must be a number of minutes above 0 (got ${values.minutes})`);
  if (!Number.isInteger(seed)) throw new Error(`--seed: must be a whole number (got ${values.seed})`);
  const result = await runSoak({ minutes, seed, log: (line) => process.stderr.write(`${line}\n`) });
  const file = join(ROOT, 'bench-results', 'soak.json');
  mkdirSync(join(ROOT, 'bench-results'), { recursive: true });
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } else {
    const rows: [string, string][] = [
      ['minutes', String(minutes)],
      ['operations', `${result.operations} (${Object.entries(result.byOperation).map(([k, v]) => `${k} ${v}`).join(', ')})`],
      ['ok', String(result.ok)],
      ['capacity answers (QUEUE, REJECT_*, 429, 503)', String(result.capacity)],
      ['conflicts (races reported as 409)', String(result.conflicts)],
      ['internal errors (must be 0)', String(result.internalErrors)],
      ['tokens streamed', String(result.tokensStreamed)],
      ['left at the end: engines / lease bytes / peers / processes', `${result.leaked.engines} / ${result.leaked.leaseBytes} / ${result.leaked.peers} / ${result.leaked.processes}`],
    ];
    for (const [k, v] of rows) process.stdout.write(`${k.padEnd(60)} ${v}\n`);
    for (const sample of result.errorSamples) process.stdout.write(`  error: ${sample}\n`);
    process.stdout.write(`results: ${file}\n`);
  }
  const leaked = Object.values(result.leaked).some((n) => n > 0);
  process.exitCode = result.internalErrors > 0 || leaked ? 1 : 0;
}

if (process.argv[1]?.endsWith('soak.js')) runBenchScript('soak', main);
