/**
 * What a supervisor tells the processes it started, one JSON object per line on their stdin (the
 * same pipe whose end tells them the supervisor is gone):
 *
 *   {"cmd":"weight","weight":W}     take weight W (0.01–100) in the registry from the next update
 *
 * Anything else is not a command: `parseControlLine` returns null for it and never throws.
 */
export type ControlCommand = { cmd: 'weight'; weight: number };

const MAX_LINE = 1024;

export function formatControl(command: ControlCommand): string {
  return JSON.stringify({ cmd: command.cmd, weight: command.weight });
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
  if (record['cmd'] !== 'weight') return null;
  const weight = record['weight'];
  if (typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0.01 || weight > 100) return null;
  return { cmd: 'weight', weight };
}

/** Calls `onCommand` for each control line on this process's stdin (when it is a pipe). */
export async function readControlLines(input: NodeJS.ReadableStream, onCommand: (command: ControlCommand) => void): Promise<void> {
  const { createInterface } = await import('node:readline');
  createInterface({ input, crlfDelay: Infinity }).on('line', (line) => {
    const command = parseControlLine(line);
    if (command !== null) onCommand(command);
  });
}
