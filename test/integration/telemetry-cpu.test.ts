/** The host as a device (cpu-0, metal-0): real /proc figures and a real child's resident memory,
 *  and exact figures from a fixture procfs. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../electron/core/clock.js';
import { createCpuProvider, createMetalProvider, type HostInfo } from '../../electron/core/telemetry/cpu-provider.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
const clock = new FakeClock();
const wallUs = (): number => clock.wallUs();
const children: ChildProcess[] = [];
let dir = '';

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-cpu-'));
});
afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** A child that holds `mib` MiB resident and says "ready". */
async function holder(mib: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', `const b = Buffer.alloc(${mib} * 1024 * 1024, 1); console.log('ready'); setInterval(() => b[0]++, 1000);`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`holder exited with ${code}`)));
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) resolve();
    });
  });
  return child;
}

function burn(ms: number): void {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
}

describe.skipIf(process.platform !== 'linux')('cpu-0 on this Linux host', () => {
  it('reports the host: model name, RAM, used = total - MemAvailable, no temperature', () => {
    const p = createCpuProvider({ wallUs });
    const [s] = p.sample();
    if (s === undefined) throw new Error('no sample');
    expect(s).toMatchObject({ key: 'cpu-0', source: 'cpu', health: 'OK', temperatureC: null, utilizationPct: null, processes: [], sampledAtUs: clock.wallUs() });
    expect(s.name).toBe(os.cpus()[0]?.model.trim());
    expect(s.totalBytes).toBe(os.totalmem());
    const available = Number(/^MemAvailable:\s*(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1]) * 1024;
    // Memory moves between the two reads; 256 MiB is far above what a test host does in between.
    expect(Math.abs(s.usedBytes - (s.totalBytes - available))).toBeLessThan(256 * MiB);
    expect(s.usedBytes).toBeGreaterThan(0);
    expect(s.usedBytes).toBeLessThanOrEqual(s.totalBytes);
  });

  it('measures utilization from /proc/stat between two samples (null on the first)', () => {
    const p = createCpuProvider({ wallUs });
    expect(p.sample()[0]?.utilizationPct).toBeNull();
    burn(150);
    const pct = p.sample()[0]?.utilizationPct;
    expect(pct).not.toBeNull();
    expect(pct).toBeGreaterThan(0);
    expect(pct).toBeLessThanOrEqual(100);
  });

  it('reports the resident memory of tracked pids, leaving out the ones that are gone', async () => {
    const child = await holder(96);
    const pid = child.pid ?? 0;
    const gone = await holder(1);
    const gonePid = gone.pid ?? 0;
    gone.kill('SIGKILL');
    await new Promise((resolve) => gone.once('exit', resolve));

    const p = createCpuProvider({ wallUs });
    p.trackPids([pid, gonePid, pid, -1, 0]);
    const processes = p.sample()[0]?.processes;
    expect(processes).toHaveLength(1);
    const used = processes?.[0]?.usedBytes ?? 0;
    expect(processes?.[0]?.pid).toBe(pid);
    expect(used).toBeGreaterThanOrEqual(96 * MiB);
    const vmRss = Number(/^VmRSS:\s*(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024;
    expect(Math.abs(used - vmRss)).toBeLessThan(16 * MiB);

    p.trackPids([]);
    expect(p.sample()[0]?.processes).toEqual([]);
  });
});

describe('cpu-0 and metal-0 from a fixture procfs and host', () => {
  const host = (cpus: os.CpuInfo[] = []): HostInfo => ({ totalmem: () => 16 * GiB, freemem: () => 4 * GiB, cpus: () => cpus });
  const cpu = (user: number, idle: number): os.CpuInfo => ({ model: '  Fake CPU @ 3.0GHz ', speed: 3000, times: { user, nice: 0, sys: 0, idle, irq: 0 } });

  function procfs(stat: string, pids: Record<number, string> = {}): string {
    const root = join(dir, `proc-${Math.random().toString(36).slice(2)}`);
    mkdirSync(root);
    writeFileSync(join(root, 'meminfo'), 'MemTotal:       16777216 kB\nMemFree:         1048576 kB\nMemAvailable:    6291456 kB\n');
    writeFileSync(join(root, 'stat'), stat);
    for (const [pid, status] of Object.entries(pids)) {
      mkdirSync(join(root, pid));
      writeFileSync(join(root, pid, 'status'), status);
    }
    return root;
  }

  it('reads MemAvailable, VmRSS and /proc/stat deltas exactly', () => {
    const root = procfs('cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 100 0 50 800 50 0 0 0 0 0\n', {
      10: 'Name:\tengine\nVmRSS:\t  204800 kB\n',
      11: 'Name:\tzombie\nState:\tZ (zombie)\n',
    });
    const p = createCpuProvider({ wallUs, platform: 'linux', procRoot: root, host: host([cpu(1, 1)]) });
    p.trackPids([10, 11, 12]);
    expect(p.sample()).toStrictEqual([
      {
        key: 'cpu-0',
        name: 'Fake CPU @ 3.0GHz',
        totalBytes: 16 * GiB,
        usedBytes: 16 * GiB - 6 * GiB,
        processes: [{ pid: 10, usedBytes: 200 * MiB }],
        utilizationPct: null,
        temperatureC: null,
        powerW: null,
        health: 'OK',
        sampledAtUs: clock.wallUs(),
        source: 'cpu',
      },
    ]);
    // +100 ticks: 30 busy (user 20, system 10), 70 idle (idle 60, iowait 10) -> 30 %.
    writeFileSync(join(root, 'stat'), 'cpu  120 0 60 860 60 0 0 0 0 0\n');
    expect(p.sample()[0]?.utilizationPct).toBe(30);
    // No tick elapsed: the previous figure stands.
    expect(p.sample()[0]?.utilizationPct).toBe(30);
    writeFileSync(join(root, 'stat'), 'cpu  220 0 60 860 60 0 0 0 0 0\n');
    expect(p.sample()[0]?.utilizationPct).toBe(100);
  });

  it('uses total - freemem and os.cpus() times where there is no procfs; processes unknown', () => {
    const cpus = [cpu(100, 900)];
    const p = createMetalProvider({ wallUs, platform: 'darwin', host: { ...host(), cpus: () => cpus } });
    const first = p.sample()[0];
    expect(first).toMatchObject({ key: 'metal-0', source: 'metal', name: 'Fake CPU @ 3.0GHz', totalBytes: 16 * GiB, usedBytes: 12 * GiB, processes: null, utilizationPct: null });
    cpus[0] = cpu(125, 975);
    expect(p.sample()[0]?.utilizationPct).toBe(25);
  });
});
