import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Whether the module at `moduleUrl` (its `import.meta.url`) is the script this process was
 *  started with (`node script.js …`, or a utility process's module), links resolved: a child
 *  process's entry module runs its main only then, never when a test imports it. */
export function isEntryPoint(moduleUrl: string): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false;
  }
}

/** Whether a process with this pid exists (EPERM: it does, owned by another user). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
