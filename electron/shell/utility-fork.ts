/**
 * Which engine processes start as Electron utility processes, and with what (pure: utility-spawn.ts
 * does the forking). The supervisor asks for `node <script> args…` (the built-in engine host,
 * `gpu-share run`); in the app `node` is the app's own executable, which may not run scripts as
 * Node (the RunAsNode fuse is off), so such a request becomes utilityProcess.fork(script, args).
 * Anything else (a llamafile started directly) is an ordinary process.
 */
import { basename, extname } from 'node:path';
import type { SpawnRequest } from '../core/engines/supervisor.js';

export interface UtilityForkPlan {
  modulePath: string;
  args: string[];
  /** V8 flags asked for before the script (a heap limit, the young generation's size):
   *  utilityProcess's execArgv. */
  execArgv: string[];
  env: Record<string, string>;
  /** The name in app metrics and `child-process-gone` reports. */
  serviceName: string;
}

const SCRIPT_EXTENSIONS = new Set(['.js', '.mjs', '.cjs']);
/** The only Node options a utility process is started with: a heap limit (the estimator) and the
 *  young generation's size (the built-in engine host, BUILTIN_HOST_NODE_FLAGS). */
const V8_FLAG = /^--max-(old|semi)-space-size=\d+$/;

export function utilityForkPlan(request: SpawnRequest, nodePath: string, baseEnv: NodeJS.ProcessEnv): UtilityForkPlan | null {
  // V8 flags before the script go to the utility process's execArgv.
  const flagCount = request.args.findIndex((arg) => !V8_FLAG.test(arg));
  const execArgv = request.args.slice(0, Math.max(0, flagCount));
  const [script, ...args] = request.args.slice(execArgv.length);
  if (request.command !== nodePath || script === undefined || !SCRIPT_EXTENSIONS.has(extname(script))) return null;
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(baseEnv)) if (value !== undefined) env[key] = value;
  Object.assign(env, request.env);
  // Were it inherited, a child that starts Electron-based tools would turn them into Node.
  delete env['ELECTRON_RUN_AS_NODE'];
  const nameAt = args.indexOf('--name');
  const engineName = nameAt >= 0 ? args[nameAt + 1] : undefined;
  const role = basename(script, extname(script));
  return { modulePath: script, args, execArgv, env, serviceName: engineName === undefined ? `GPU Share ${role}` : `GPU Share ${role}: ${engineName}` };
}

/** `ps -A -o pid=,ppid=` output → children by parent pid. Lines that are not two numbers are
 *  skipped. */
export function parseProcessTable(text: string): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const line of text.split('\n')) {
    const match = /^\s*(\d+)\s+(\d+)\s*$/.exec(line);
    if (match === null) continue;
    const pid = Number(match[1]);
    const ppid = Number(match[2]);
    const list = children.get(ppid);
    if (list === undefined) children.set(ppid, [pid]);
    else list.push(pid);
  }
  return children;
}

/** Every descendant of `pid`, parents before their children (a cycle in a torn table ends). */
export function descendantsOf(pid: number, children: ReadonlyMap<number, readonly number[]>): number[] {
  const found: number[] = [];
  const seen = new Set<number>([pid]);
  const queue = [pid];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of children.get(next) ?? []) {
      if (seen.has(child)) continue;
      seen.add(child);
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}
