/** POSIX process control: a command's process group with signals, and (Linux) the whole tree with
 *  its CPU time from procfs (process-tree-linux.ts). */
import type { ProcessControl } from './process-control.js';
import { LinuxProcessTree } from './process-tree-linux.js';

const signal = (target: number, sig: NodeJS.Signals | 0): boolean => {
  try {
    process.kill(target, sig);
    return true;
  } catch {
    return false;
  }
};

/** The root's group (it leads one: started detached), or the root alone when it leads none. */
const signalGroup = (rootPid: number, sig: NodeJS.Signals | 0): boolean => signal(-rootPid, sig) || signal(rootPid, sig);

export function posixProcessControl(): ProcessControl {
  const linux = process.platform === 'linux';
  const trees = new Map<number, LinuxProcessTree>();
  const treeOf = (rootPid: number): LinuxProcessTree => {
    let tree = trees.get(rootPid);
    if (tree === undefined) {
      tree = new LinuxProcessTree(rootPid);
      trees.set(rootPid, tree);
    }
    return tree;
  };
  const outsideGroup = (rootPid: number): { pid: number; startTicks: number }[] =>
    linux ? treeOf(rootPid).members().filter((member) => member.pgid !== rootPid).map(({ pid, startTicks }) => ({ pid, startTicks })) : [];
  /** The group, then the members that left it, as the last walk found them: at a window edge
   *  nothing is read, only signalled. */
  const signalTree = (rootPid: number, sig: NodeJS.Signals): boolean => {
    let any = signalGroup(rootPid, sig);
    for (const { pid } of outsideGroup(rootPid)) any = signal(pid, sig) || any;
    return any;
  };
  return {
    hold: (rootPid) => {
      if (linux) treeOf(rootPid).walk();
    },
    suspend: (rootPid) => signalTree(rootPid, 'SIGSTOP'),
    resume: (rootPid) => signalTree(rootPid, 'SIGCONT'),
    // macOS has no procfs; its CPU time needs proc_pid_rusage over the group, not wired yet:
    // unknown, not 0.
    cpuTimeUs: (rootPid) => (linux ? treeOf(rootPid).walk().cpuUs : null),
    outsideGroup,
    signal: (rootPid, sig) => {
      if (linux) treeOf(rootPid).walk(); // the latest members: whatever was born since is ended too
      return signalTree(rootPid, sig);
    },
    alive: (rootPid) => (linux ? treeOf(rootPid).walk().members.length > 0 : signalGroup(rootPid, 0)),
    release: (rootPid) => void trees.delete(rootPid),
  };
}
