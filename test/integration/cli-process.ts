/**
 * Test helper: run the real `gpu-share` command (`node bin/gpu-share.js …`) as a child process,
 * collect its output line by line with arrival times, wait for lines, signal it, and clean up
 * every child and every segment a test used. Call `cleanupAfterEach()` once at the top of a test
 * file: after each test it kills the children still running and removes the test's segments,
 * whether the test passed or not.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import { segmentFileName } from '../../electron/core/registry/location.js';

/** The repository root (this file lives in test/integration/). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI_PATH = join(REPO_ROOT, 'bin', 'gpu-share.js');

/** One line of output, with the `performance.now()` at which this process received it. */
export interface OutputLine {
  readonly text: string;
  readonly at: number;
}

export interface ExitResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export type Stream = 'stdout' | 'stderr';
export type LineMatcher = RegExp | ((text: string) => boolean);

export interface WaitOptions {
  stream?: Stream;
  /** Only consider lines with an index ≥ this (default 0: lines already received count too). */
  fromIndex?: number;
}

interface Waiter {
  readonly stream: Stream;
  readonly fromIndex: number;
  readonly test: (text: string) => boolean;
  readonly resolve: (line: OutputLine) => void;
  readonly reject: (error: Error) => void;
}

const running = new Set<CliProcess>();
const usedKeys = new Set<string>();
let keyCounter = 0;

/** The shared-memory file of a gpu key on Linux (cosmopolitan's shm_open name, docs/registry.md). */
export function segmentPath(gpuKey: string): string {
  return `/dev/shm/${segmentFileName(gpuKey)}`;
}

/** A gpu key no other test (in this or another process) uses; its segment is removed after the
 *  test. Matches [A-Za-z0-9._-]{1,40}. */
export function uniqueKey(prefix: string): string {
  keyCounter++;
  const key = `t-${prefix}-${process.pid}-${keyCounter}-${randomBytes(3).toString('hex')}`;
  if (!/^[A-Za-z0-9._-]{1,40}$/.test(key)) throw new Error(`uniqueKey: prefix ${JSON.stringify(prefix)} makes an invalid key ${key}`);
  usedKeys.add(key);
  return key;
}

export interface CliOptions {
  /** Added to this process's environment (e.g. a fake NVML library). */
  env?: Record<string, string>;
}

/** A running `gpu-share` process. */
export class CliProcess {
  readonly child: ChildProcess;
  readonly args: readonly string[];
  readonly startedAt: number;
  readonly stdout: OutputLine[] = [];
  readonly stderr: OutputLine[] = [];
  private readonly partial: Record<Stream, string> = { stdout: '', stderr: '' };
  private readonly waiters = new Set<Waiter>();
  private exitResult: ExitResult | null = null;
  private readonly exited: Promise<ExitResult>;

  constructor(args: readonly string[], options: CliOptions = {}) {
    this.args = [...args];
    this.startedAt = performance.now();
    this.child = spawn(process.execPath, [CLI_PATH, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...options.env } });
    running.add(this);
    this.child.stdout?.setEncoding('utf8');
    this.child.stderr?.setEncoding('utf8');
    this.child.stdout?.on('data', (chunk: string) => this.onData('stdout', chunk));
    this.child.stderr?.on('data', (chunk: string) => this.onData('stderr', chunk));
    this.exited = new Promise<ExitResult>((resolve) => {
      const finish = (result: ExitResult): void => {
        if (this.exitResult !== null) return;
        for (const stream of ['stdout', 'stderr'] as const) {
          if (this.partial[stream] !== '') this.push(stream, this.partial[stream], performance.now());
          this.partial[stream] = '';
        }
        this.exitResult = result;
        running.delete(this);
        for (const waiter of [...this.waiters]) {
          this.waiters.delete(waiter);
          waiter.reject(new Error(`process exited (code ${String(result.code)}, signal ${String(result.signal)}) before printing the line\n${this.describe()}`));
        }
        resolve(result);
      };
      // 'close' comes after both pipes ended, so every line has been collected.
      this.child.on('close', (code, signal) => finish({ code, signal }));
      this.child.on('error', (error) => {
        this.push('stderr', `spawn error: ${error.message}`, performance.now());
        finish({ code: null, signal: null });
      });
    });
  }

  get pid(): number {
    const pid = this.child.pid;
    if (pid === undefined) throw new Error(`process did not start: ${this.args.join(' ')}`);
    return pid;
  }

  /** The exit result once it has exited, null while it runs. */
  get result(): ExitResult | null {
    return this.exitResult;
  }

  get isRunning(): boolean {
    return this.exitResult === null;
  }

  lines(stream: Stream = 'stdout'): string[] {
    return this[stream].map((line) => line.text);
  }

  /** Resolves when the process has exited and its output has been read to the end. */
  exit(): Promise<ExitResult> {
    return this.exited;
  }

  /** Waits at most timeoutMs for the exit; rejects (leaving the process running) if it does not. */
  async exitWithin(timeoutMs: number): Promise<ExitResult> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms\n${this.describe()}`)), timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Sends a signal; false when the process has already exited. */
  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    if (this.exitResult !== null || this.child.exitCode !== null || this.child.signalCode !== null) return false;
    return this.child.kill(signal);
  }

  /** The first line (received so far or later) that matches; rejects on timeout or exit. */
  waitForLine(matcher: LineMatcher, timeoutMs: number, options: WaitOptions = {}): Promise<OutputLine> {
    const stream = options.stream ?? 'stdout';
    const fromIndex = options.fromIndex ?? 0;
    const test = typeof matcher === 'function' ? matcher : (text: string): boolean => matcher.test(text);
    const found = this[stream].slice(fromIndex).find((line) => test(line.text));
    if (found !== undefined) return Promise.resolve(found);
    if (this.exitResult !== null) {
      return Promise.reject(new Error(`process has exited (code ${String(this.exitResult.code)}) without printing the line\n${this.describe()}`));
    }
    return new Promise<OutputLine>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`no ${stream} line matching ${String(matcher)} within ${timeoutMs} ms\n${this.describe()}`));
      }, timeoutMs);
      const waiter: Waiter = {
        stream,
        fromIndex,
        test,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      this.waiters.add(waiter);
    });
  }

  /** The command and the tail of its output, for failure messages. */
  describe(): string {
    const tail = (stream: Stream): string => this.lines(stream).slice(-8).join('\n    ');
    return `  gpu-share ${this.args.join(' ')} (pid ${String(this.child.pid)})\n  stdout:\n    ${tail('stdout')}\n  stderr:\n    ${tail('stderr')}`;
  }

  private onData(stream: Stream, chunk: string): void {
    const at = performance.now();
    const parts = (this.partial[stream] + chunk).split('\n');
    this.partial[stream] = parts.pop() ?? '';
    for (const text of parts) this.push(stream, text, at);
  }

  private push(stream: Stream, text: string, at: number): void {
    const line: OutputLine = { text, at };
    const index = this[stream].length;
    this[stream].push(line);
    for (const waiter of [...this.waiters]) {
      if (waiter.stream === stream && index >= waiter.fromIndex && waiter.test(text)) {
        this.waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  }
}

/** Starts `gpu-share <args>`. */
export function startCli(args: readonly string[], options: CliOptions = {}): CliProcess {
  return new CliProcess(args, options);
}

export interface CliRun extends ExitResult {
  readonly stdout: string[];
  readonly stderr: string[];
  readonly startedAt: number;
  readonly exitedAt: number;
}

/** Runs `gpu-share <args>` to completion (killed and rejected after timeoutMs). */
export async function runCli(args: readonly string[], timeoutMs = 10_000, options: CliOptions = {}): Promise<CliRun> {
  const proc = startCli(args, options);
  try {
    const result = await proc.exitWithin(timeoutMs);
    return { ...result, stdout: proc.lines('stdout'), stderr: proc.lines('stderr'), startedAt: proc.startedAt, exitedAt: performance.now() };
  } finally {
    proc.kill('SIGKILL');
  }
}

/** Kills every child still running (SIGKILL) and removes every segment of this test's keys. */
export async function cleanupAll(): Promise<void> {
  const children = [...running];
  for (const proc of children) proc.kill('SIGKILL');
  await Promise.all(children.map((proc) => proc.exitWithin(5_000).catch(() => undefined)));
  // recursive: a test may put a directory at a segment name.
  for (const key of usedKeys) rmSync(segmentPath(key), { force: true, recursive: true });
  usedKeys.clear();
}

/** Registers cleanupAll as an afterEach hook of the calling test file. */
export function cleanupAfterEach(): void {
  afterEach(cleanupAll);
}

/** Every child still running (for a final check). */
export function runningChildren(): readonly CliProcess[] {
  return [...running];
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
