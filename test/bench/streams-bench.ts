/**
 * Event streams whose clients never read: `gpu-share serve` on a simulated device with a chatty
 * command engine (its output lines are `log` events), N clients that open `/api/events` and then
 * never read, for S seconds. Reports serve's RSS (from /proc) before and at its peak, how many
 * streams were accepted, refused (429) and dropped for not reading, and `/props` latency under
 * that load, with the load average beside it.
 *
 *   npm run bench:streams -- [--streams 20] [--seconds 30] [--cli PATH] [--json]
 *
 * `--cli` runs another checkout's `bin/gpu-share.js` (to compare with the code before a change).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { GiB } from '../../electron/core/planner/policy.js';
import { flagsOrExit } from '../fixtures/flags.js';
import { CLI } from '../fixtures/procs.js';
import { removeSegment } from '../fixtures/segments.js';
import { runBenchScript } from './stop-on-signal.js';

export interface StreamsResult {
  streams: number;
  seconds: number;
  accepted: number;
  refused: number;
  dropped: number;
  rssBeforeMiB: number;
  rssPeakMiB: number;
  rssEndMiB: number;
  propsMs: { median: number; max: number; samples: number; slowestAtS: number };
  load: [number, number, number];
}

const rssMiB = (pid: number): number => {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Math.round(Number(match?.[1] ?? 0) / 1024);
};

async function propsLatency(base: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${base}/props`);
  await response.text();
  return performance.now() - started;
}

export async function runStreamsBench(options: { streams: number; seconds: number; cli: string; log?: (line: string) => void }): Promise<StreamsResult> {
  const log = options.log ?? (() => undefined);
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-streams-'));
  const key = `GPU-streams-${process.pid}`;
  const sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' }] }));
  const data = join(dir, 'data');
  mkdirSync(data, { mode: 0o700 });
  // A command engine that prints 2,000 lines a second: each is a `log` event on every stream.
  const chatty = 'setInterval(() => { for (let i = 0; i < 20; i++) console.log("line " + "x".repeat(160)); }, 10);';
  writeFileSync(join(data, 'profiles.json'), JSON.stringify({ version: 1, profiles: [{ id: 'chatty', name: 'chatty', capabilities: ['chat'], engineKind: 'command', command: process.execPath, args: ['-e', chatty], contextSize: 1, priority: 'background' }] }), { mode: 0o600 });
  const child = spawn(process.execPath, [options.cli, 'serve', '--port', '0', '--data-dir', data, '--sim', sim], { stdio: ['ignore', 'pipe', 'pipe'] });
  let dropped = 0;
  createInterface({ input: child.stderr }).on('line', (line) => {
    if (line.includes('dropped an event stream')) dropped++;
  });
  const sockets: Socket[] = [];
  try {
    const first = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`serve exited with ${String(code)}`)));
    });
    const match = /^dashboard: (http:\/\/127\.0\.0\.1:(\d+))\/#token=([A-Za-z0-9_-]+)$/.exec(first);
    if (match === null) throw new Error(`unexpected first line: ${first}`);
    const [, base = '', portText = '', token = ''] = match;
    const port = Number(portText);
    const launched = await fetch(`${base}/api/engines`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ profileId: 'chatty' }) });
    log(`chatty engine: ${launched.status}`);
    await new Promise((r) => setTimeout(r, 3_000));
    const pid = child.pid ?? 0;
    const rssBeforeMiB = rssMiB(pid);
    let accepted = 0;
    let refused = 0;
    for (let i = 0; i < options.streams; i++) {
      const socket = connect(port, '127.0.0.1');
      sockets.push(socket);
      socket.on('error', () => undefined);
      // The status line is read; nothing after it ever is.
      socket.once('data', (chunk: Buffer) => {
        const status = / (\d{3}) /.exec(chunk.toString('latin1', 0, 64))?.[1];
        if (status === '200') accepted++;
        else if (status === '429') refused++;
        socket.pause();
      });
      socket.write(`GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${token}\r\n\r\n`);
    }
    let rssPeakMiB = rssBeforeMiB;
    const latencies: number[] = [];
    const opened = Date.now();
    const until = opened + options.seconds * 1000;
    let slowest = { ms: 0, atS: 0 };
    while (Date.now() < until) {
      const ms = await propsLatency(base);
      latencies.push(ms);
      if (ms > slowest.ms) slowest = { ms, atS: Math.round((Date.now() - opened) / 100) / 10 };
      rssPeakMiB = Math.max(rssPeakMiB, rssMiB(pid));
      await new Promise((r) => setTimeout(r, 500));
    }
    const rssEndMiB = rssMiB(pid);
    latencies.sort((a, b) => a - b);
    const result: StreamsResult = {
      streams: options.streams,
      seconds: options.seconds,
      accepted,
      refused,
      dropped,
      rssBeforeMiB,
      rssPeakMiB,
      rssEndMiB,
      propsMs: { median: Math.round(latencies[Math.floor(latencies.length / 2)] ?? 0), max: Math.round(latencies.at(-1) ?? 0), samples: latencies.length, slowestAtS: slowest.atS },
      load: loadavg().map((n) => Math.round(n * 100) / 100) as [number, number, number],
    };
    return result;
  } finally {
    for (const socket of sockets) socket.destroy();
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await new Promise((r) => (child.exitCode === null && child.signalCode === null ? child.once('exit', r) : r(null)));
    clearTimeout(killer);
    removeSegment(key);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const usage = 'usage: npm run bench:streams -- [--streams 20] [--seconds 30] [--cli PATH] [--json]';
  const values = flagsOrExit('bench:streams', usage, { streams: { type: 'string', default: '20' }, seconds: { type: 'string', default: '30' }, cli: { type: 'string', default: CLI }, json: { type: 'boolean', default: false } });
  const streams = Number(values.streams);
  const seconds = Number(values.seconds);
  if (!Number.isInteger(streams) || streams < 1 || streams > 1000) throw new Error(`--streams: must be a whole number from 1 to 1000 (got ${values.streams})`);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 3600) throw new Error(`--seconds: must be a number of seconds up to 3600 (got ${values.seconds})`);
  const result = await runStreamsBench({ streams, seconds, cli: values.cli, log: (line) => process.stderr.write(`${line}\n`) });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const rows: [string, string][] = [
    ['streams opened / accepted / refused (429) / dropped (not reading)', `${result.streams} / ${result.accepted} / ${result.refused} / ${result.dropped}`],
    [`serve RSS before / peak / end over ${result.seconds} s (MiB)`, `${result.rssBeforeMiB} / ${result.rssPeakMiB} / ${result.rssEndMiB} (growth ${result.rssPeakMiB - result.rssBeforeMiB})`],
    ['/props latency median / max (ms)', `${result.propsMs.median} / ${result.propsMs.max} (${result.propsMs.samples} samples; the slowest ${result.propsMs.slowestAtS} s after the streams opened)`],
    ['load average (1, 5, 15 min)', result.load.join(', ')],
  ];
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(68)} ${v}\n`);
}

if (process.argv[1]?.endsWith('streams-bench.js')) runBenchScript('bench:streams', main);
