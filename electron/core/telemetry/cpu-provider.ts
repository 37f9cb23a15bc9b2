/**
 * The host as a device: `cpu-0` (engines share the CPU and RAM), or `metal-0` on macOS, where the
 * GPU uses unified memory and RAM is its memory. One sample:
 *
 * - totalBytes: os.totalmem(); usedBytes: total − MemAvailable from /proc/meminfo on Linux (what
 *   can be allocated without swapping, page cache excluded), else total − os.freemem().
 * - processes: the resident set (VmRSS of /proc/<pid>/status) of the pids given to trackPids(), the
 *   engines we started; a pid that is gone (or a zombie, which has no memory) is left out. Only
 *   Linux can say this cheaply: elsewhere processes is null.
 * - utilizationPct: busy share of all CPUs since the previous sample (/proc/stat on Linux, os.cpus()
 *   times elsewhere); null on the first sample.
 * - temperatureC, powerW: null (no portable source); health: OK.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { DeviceSample, TelemetryProvider } from './types.js';

export interface CpuProviderOptions {
  wallUs: () => number;
  /** 'cpu' (key cpu-0, the default) or 'metal' (key metal-0). */
  source?: 'cpu' | 'metal';
  platform?: NodeJS.Platform;
  /** Where procfs is mounted; tests point it at a fixture directory. Default /proc. */
  procRoot?: string;
  /** Host figures; tests replace them. Default node:os. */
  host?: HostInfo;
}

/** The node:os functions the provider reads. */
export interface HostInfo {
  totalmem(): number;
  freemem(): number;
  cpus(): os.CpuInfo[];
}

interface CpuTimes {
  busy: number;
  total: number;
}

export class CpuProvider implements TelemetryProvider {
  readonly source: 'cpu' | 'metal';
  readonly key: 'cpu-0' | 'metal-0';
  private readonly wallUs: () => number;
  private readonly linux: boolean;
  private readonly procRoot: string;
  private readonly host: HostInfo;
  private tracked: number[] = [];
  private lastTimes: CpuTimes | null = null;
  private lastPct: number | null = null;

  constructor(options: CpuProviderOptions) {
    this.source = options.source ?? 'cpu';
    this.key = this.source === 'metal' ? 'metal-0' : 'cpu-0';
    this.wallUs = options.wallUs;
    this.linux = (options.platform ?? process.platform) === 'linux';
    this.procRoot = options.procRoot ?? '/proc';
    this.host = options.host ?? os;
  }

  /** The pids whose resident memory `processes` reports (replaces the previous set). */
  trackPids(pids: readonly number[]): void {
    this.tracked = [...new Set(pids)].filter((pid) => Number.isInteger(pid) && pid > 0).sort((a, b) => a - b);
  }

  sample(): DeviceSample[] {
    const nowUs = this.wallUs();
    const totalBytes = this.host.totalmem();
    const available = this.linux ? this.memAvailable() : null;
    const usedBytes = Math.min(totalBytes, Math.max(0, totalBytes - (available ?? this.host.freemem())));
    const model = this.host.cpus()[0]?.model.trim();
    const name = model !== undefined && model !== '' ? model : this.source === 'metal' ? 'Apple GPU (unified memory)' : 'CPU';
    return [
      {
        key: this.key,
        name,
        totalBytes,
        usedBytes,
        processes: this.linux ? this.residentSets() : null,
        utilizationPct: this.utilization(),
        temperatureC: null,
        powerW: null,
        health: 'OK',
        sampledAtUs: nowUs,
        source: this.source,
      },
    ];
  }

  close(): void {
    this.tracked = [];
  }

  /** MemAvailable in bytes, or null when /proc/meminfo lacks it (kernels before 3.14). */
  private memAvailable(): number | null {
    const text = readText(join(this.procRoot, 'meminfo'));
    const kb = text === null ? null : kbField(text, 'MemAvailable');
    return kb === null ? null : kb * 1024;
  }

  private residentSets(): DeviceSample['processes'] {
    const usage: { pid: number; usedBytes: number }[] = [];
    for (const pid of this.tracked) {
      const status = readText(join(this.procRoot, String(pid), 'status'));
      const kb = status === null ? null : kbField(status, 'VmRSS');
      if (kb !== null) usage.push({ pid, usedBytes: kb * 1024 });
    }
    return usage;
  }

  private utilization(): number | null {
    const times = this.linux ? procStatTimes(readText(join(this.procRoot, 'stat'))) : osTimes(this.host.cpus());
    if (times === null) return null;
    const last = this.lastTimes;
    if (last !== null && times.total > last.total) {
      const pct = (100 * (times.busy - last.busy)) / (times.total - last.total);
      this.lastPct = Math.round(Math.min(100, Math.max(0, pct)) * 10) / 10;
    }
    // No tick elapsed since the previous sample: keep its figure (and its baseline).
    if (last === null || times.total > last.total) this.lastTimes = times;
    return this.lastPct;
  }
}

/** cpu-0: the host CPU and RAM. */
export function createCpuProvider(options: Omit<CpuProviderOptions, 'source'>): CpuProvider {
  return new CpuProvider({ ...options, source: 'cpu' });
}

/** metal-0: an Apple GPU, whose memory is the host's RAM. */
export function createMetalProvider(options: Omit<CpuProviderOptions, 'source'>): CpuProvider {
  return new CpuProvider({ ...options, source: 'metal' });
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/** "Name:   1234 kB" → 1234. */
function kbField(text: string, field: string): number | null {
  const match = new RegExp(`^${field}:\\s*(\\d+)\\s*kB\\s*$`, 'm').exec(text);
  return match?.[1] === undefined ? null : Number(match[1]);
}

/** The aggregate line of /proc/stat: user nice system idle iowait irq softirq steal (guest time is
 *  already inside user and nice). Idle is idle + iowait. */
function procStatTimes(text: string | null): CpuTimes | null {
  const line = text?.split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) return null;
  const fields = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (fields.length < 4 || fields.some((f) => !Number.isFinite(f))) return null;
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

function osTimes(cpus: os.CpuInfo[]): CpuTimes | null {
  if (cpus.length === 0) return null;
  let busy = 0;
  let total = 0;
  for (const { times } of cpus) {
    const all = times.user + times.nice + times.sys + times.idle + times.irq;
    total += all;
    busy += all - times.idle;
  }
  return { busy, total };
}
