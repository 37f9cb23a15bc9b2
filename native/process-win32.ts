/** Windows process control: a paced command's tree is the job object it is put in right after it
 *  starts (native/jobs-win32.c, in the registry helper's DLL, bound here through koffi): every
 *  member suspended with NtSuspendProcess, CPU time from the job's accounting, and the job ends
 *  its members when our handle to it closes, however we exit. Type-checked on every platform, run
 *  on Windows. */
import { existsSync } from 'node:fs';
import koffi from 'koffi';
import { helperCandidates } from './helper.js';
import type { ProcessControl } from './process-control.js';

type Job = { readonly __job: unique symbol };

export function win32ProcessControl(): ProcessControl {
  const libraryPath = helperCandidates().find((path) => existsSync(path));
  if (libraryPath === undefined) throw new Error(`the native helper is missing; tried:\n  ${helperCandidates().join('\n  ')}\nbuild it with: npm run build:native`);
  const lib = koffi.load(libraryPath);
  koffi.opaque('gs_job');
  const hold = lib.func('gs_job *gs_job_hold(uint32_t pid)') as (pid: number) => Job | null;
  const suspend = lib.func('int32_t gs_job_suspend(gs_job *job, int32_t resume)') as (job: Job, resume: number) => number;
  const cpuUs = lib.func('int64_t gs_job_cpu_us(gs_job *job)') as (job: Job) => number | bigint;
  const aliveCount = lib.func('int32_t gs_job_alive(gs_job *job)') as (job: Job) => number;
  const terminate = lib.func('int32_t gs_job_terminate(gs_job *job, uint32_t code)') as (job: Job, code: number) => number;
  const close = lib.func('void gs_job_close(gs_job *job)') as (job: Job) => void;

  const jobs = new Map<number, Job>();
  /** Without a job (it could not be assigned one), nothing of the tree can be reached. */
  const withJob = <T>(rootPid: number, use: (job: Job) => T, otherwise: T): T => {
    const job = jobs.get(rootPid);
    return job === undefined ? otherwise : use(job);
  };

  return {
    hold: (rootPid) => {
      if (jobs.has(rootPid)) return;
      const job = hold(rootPid);
      if (job === null) throw new Error(`cannot put process ${rootPid} in a job object (it may already be in one that forbids it)`);
      jobs.set(rootPid, job);
    },
    suspend: (rootPid) => withJob(rootPid, (job) => suspend(job, 0) > 0, false),
    resume: (rootPid) => withJob(rootPid, (job) => suspend(job, 1) > 0, false),
    cpuTimeUs: (rootPid) =>
      withJob<number | null>(
        rootPid,
        (job) => {
          const us = Number(cpuUs(job));
          return us < 0 ? null : us;
        },
        null,
      ),
    outsideGroup: () => [], // a job has no outside: its members' children join it
    // Windows has no SIGTERM: ending a process is TerminateProcess (Node's child.kill does the same).
    signal: (rootPid, _signal) => withJob(rootPid, (job) => aliveCount(job) > 0 && terminate(job, 1) === 0, false),
    alive: (rootPid) => withJob(rootPid, (job) => aliveCount(job) > 0, false),
    release: (rootPid) =>
      withJob(
        rootPid,
        (job) => {
          jobs.delete(rootPid);
          close(job);
        },
        undefined,
      ),
  };
}
