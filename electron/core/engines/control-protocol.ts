/**
 * What a supervisor tells the processes it started, one JSON object per line on their stdin (the
 * same pipe whose end tells them the supervisor is gone):
 *
 *   {"cmd":"weight","weight":W}       take weight W (0.01–100) in the registry from the next update
 *   {"cmd":"requests","inFlight":N}   the gateway has N requests for this engine, being answered
 *                                     or waiting for their turn (0–1000000): activity it knows
 *
 * Anything else is not a command: `parseControlLine` returns null for it and never throws.
 */
export type ControlCommand = { cmd: 'weight'; weight: number } | { cmd: 'requests'; inFlight: number };

const MAX_LINE = 1024;
const MAX_IN_FLIGHT = 1_000_000;

export function formatControl(command: ControlCommand): string {
  return command.cmd === 'weight' ? JSON.stringify({ cmd: command.cmd, weight: command.weight }) : JSON.stringify({ cmd: command.cmd, inFlight: command.inFlight });
}

export function parseControlLine(line: string): ControlCommand | null {
  if (typeof line !== 'string' || line.length > MAX_LINE) return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const record = value as Record<string, unknown>;
  if (record['cmd'] === 'weight') {
    const weight = record['weight'];
    if (typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0.01 || weight > 100) return null;
    return { cmd: 'weight', weight };
  }
  if (record['cmd'] === 'requests') {
    const inFlight = record['inFlight'];
    if (typeof inFlight !== 'number' || !Number.isInteger(inFlight) || inFlight < 0 || inFlight > MAX_IN_FLIGHT) return null;
    return { cmd: 'requests', inFlight };
  }
  return null;
}

/** An Electron utility process's channel to its parent (absent under plain Node). */
interface ParentPort {
  on(event: 'message', listener: (message: { data: unknown }) => void): void;
}

/**
 * Calls `onCommand` for each control line from the supervisor: on stdin when it is a pipe (a
 * child process), or as messages on `process.parentPort` (an Electron utility process, whose stdin
 * cannot be a pipe).
 */
export async function readControlLines(input: NodeJS.ReadableStream, onCommand: (command: ControlCommand) => void): Promise<void> {
  const take = (line: unknown): void => {
    const command = typeof line === 'string' ? parseControlLine(line.trim()) : null;
    if (command !== null) onCommand(command);
  };
  const parentPort = (process as NodeJS.Process & { parentPort?: ParentPort }).parentPort;
  parentPort?.on('message', (message) => take(message.data));
  const { createInterface } = await import('node:readline');
  createInterface({ input, crlfDelay: Infinity }).on('line', take);
}
