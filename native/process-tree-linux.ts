/**
 * A paced command's process tree on Linux, read from procfs: the command (the root, leader of its
 * own process group) and every descendant, found by walking each thread's `children` list. Found
 * by ancestry, a descendant that left the group (setsid) is still part of the tree. A member whose
 * parent exits is re-parented away from the tree, so every member found once is remembered (by
 * pid and start time, which a re-used pid does not match) for as long as it lives. What is not
 * found: a process born and orphaned between two walks (at most one sampling interval, 50 ms).
 */
import { readFileSync, readdirSync } from 'node:fs';

export interface TreeMember {
  pid: number;
  /** Start time in clock ticks since boot (`/proc/PID/stat` field 22): with the pid, an identity
   *  that a re-used pid does not match. */
  startTicks: number;
  /** Its process group: the root's, or not (a member that left the group, with setsid). */
  pgid: number;
}

interface ProcStat {
  state: string;
  pgid: number;
  startTicks: number;
  /** utime + stime, clock ticks (the fallback when schedstat is missing). */
  cpuTicks: number;
}

/** /proc/<pid>/stat, fields after the parenthesised command (which may itself hold spaces). */
function readStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // Field n of stat is at n - 3 here: state 3, pgrp 5, utime 14, stime 15, starttime 22.
  const state = fields[0] ?? '';
  const pgid = Number(fields[2]);
  const startTicks = Number(fields[19]);
  const cpuTicks = Number(fields[11]) + Number(fields[12]);
  if (!Number.isFinite(pgid) || !Number.isFinite(startTicks)) return null;
  return { state, pgid, startTicks, cpuTicks: Number.isFinite(cpuTicks) ? cpuTicks : 0 };
}

const TICKS_PER_SECOND = 100; // USER_HZ on every Linux ABI Node supports

/** One process's threads: their CPU time (schedstat, ns; null when unreadable) and children. */
function readThreads(pid: number): { cpuNs: number | null; children: number[] } {
  const children: number[] = [];
  let cpuNs: number | null = null;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return { cpuNs, children };
  }
  for (const tid of tids) {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      if (Number.isFinite(ns)) cpuNs = (cpuNs ?? 0) + ns;
    } catch {
      // the thread exited between readdir and read, or no schedstat on this kernel
    }
    try {
      for (const child of readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ')) {
        const n = Number(child);
        if (child !== '' && Number.isInteger(n) && n > 0) children.push(n);
      }
    } catch {
      // gone, or a kernel without CONFIG_PROC_CHILDREN: the group still reaches its members
    }
  }
  return { cpuNs, children };
}

/** When a process started (field 22 of /proc/<pid>/stat, clock ticks since boot); null when it is
 *  not there. With the pid, it names one process across pid reuse. */
export function linuxProcessStartTicks(pid: number): number | null {
  return readStat(pid)?.startTicks ?? null;
}

/** CPU time of one process, µs: its threads' schedstat (ns precision), utime+stime otherwise. */
export function linuxCpuTimeUs(pid: number): number | null {
  const { cpuNs } = readThreads(pid);
  if (cpuNs !== null && cpuNs > 0) return cpuNs / 1000;
  const stat = readStat(pid);
  return stat === null ? null : (stat.cpuTicks * 1_000_000) / TICKS_PER_SECOND;
}

export class LinuxProcessTree {
  /** Every live member found so far, by pid. */
  private known = new Map<number, TreeMember>();

  constructor(readonly rootPid: number) {}

  /**
   * Walk the tree now: which processes belong to it, and their CPU time summed (µs). A member that
   * exits takes its CPU time with it, so the sum can fall; callers count only increases. null when
   * no member is left (zombies are not members: they run nothing and hold nothing).
   */
  walk(): { members: TreeMember[]; cpuUs: number | null } {
    const found = new Map<number, TreeMember>();
    let cpuUs = 0;
    const queue = [this.rootPid, ...this.known.keys()];
    while (queue.length > 0) {
      const pid = queue.pop() as number;
      if (found.has(pid)) continue;
      const stat = readStat(pid);
      if (stat === null || stat.state === 'Z' || stat.state === 'X') continue;
      const remembered = this.known.get(pid);
      // A remembered pid that now starts at another time is someone else's process.
      if (remembered !== undefined && remembered.startTicks !== stat.startTicks) continue;
      found.set(pid, { pid, startTicks: stat.startTicks, pgid: stat.pgid });
      const threads = readThreads(pid);
      cpuUs += threads.cpuNs !== null && threads.cpuNs > 0 ? threads.cpuNs / 1000 : (stat.cpuTicks * 1_000_000) / TICKS_PER_SECOND;
      queue.push(...threads.children);
    }
    this.known = found;
    return { members: [...found.values()], cpuUs: found.size === 0 ? null : cpuUs };
  }

  /** The members as the last walk found them (no procfs read). */
  members(): TreeMember[] {
    return [...this.known.values()];
  }
}

/** The pids of a process's tree right now (itself included while alive): one walk, nothing
 *  remembered. */
export function linuxTreePids(rootPid: number): number[] {
  return new LinuxProcessTree(rootPid).walk().members.map((m) => m.pid);
}
