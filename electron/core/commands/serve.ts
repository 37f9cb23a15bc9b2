/**
 * `gpu-share serve`: the whole core headless — registry observer, planner, supervisor, telemetry —
 * and the loopback API with the dashboard. Prints one line once it is ready:
 *
 *   dashboard: http://127.0.0.1:PORT/#token=TOKEN
 *
 * SIGINT/SIGTERM stop the engines it started (gracefully; a second signal kills them) and exit.
 */
import { createServer as createNetServer } from 'node:net';
import { openDataDir } from '../data-lock.js';
import type { RegistryHelper } from '../../../native/helper.js';
import type { CoreLaunchers } from '../app-types.js';
import { startCore } from '../app.js';
import { startApiServer } from '../api/server.js';
import { DEFAULT_API_PORT } from '../contract.js';
import { POLICY_M10_V1, withQueueDepth } from '../planner/policy.js';
import { openNodeSettings, readFolderSettings } from '../settings.js';
import { rendererDir } from '../paths.js';
import { stopSignals, type CommandIo } from './io.js';

export interface ServeOptions {
  /** null: the port in the settings (7787 by default). 0 picks a free one. */
  port: number | null;
  simFile: string | undefined;
  dataDir: string;
  launchers: CoreLaunchers;
  /** `--queue-limit N`: overrides the policy's queue.maxDepth (recorded in its revision); undefined
   *  keeps the policy's. */
  queueLimit: number | undefined;
}

/** The port the settings file asks for, read without creating or changing anything (as `plan`
 *  reads it); a bad file is named when the settings open. */
function settingsPort(dataDir: string): number {
  return readFolderSettings(dataDir).apiPort ?? DEFAULT_API_PORT;
}

/** Is 127.0.0.1:port free? (0 always is.) Asked before anything is written, so that a busy port
 *  leaves no new file behind. */
function portFree(port: number): Promise<boolean> {
  if (port === 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const probe = createNetServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host: '127.0.0.1', port, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

const busyPort = (port: number): string => `gpu-share: port ${port} is in use (another gpu-share serve, or another program); pick another with --port N, or --port 0 for any free one`;

export async function runServe(options: ServeOptions, io: CommandIo, helper: RegistryHelper): Promise<number> {
  const port = options.port ?? settingsPort(options.dataDir);
  if (!(await portFree(port))) {
    io.err(busyPort(port));
    return 1;
  }
  const lock = openDataDir(options.dataDir, 'serve', (line) => io.err(line));
  try {
    return await serveHolding(options, io, helper, port);
  } finally {
    lock.release();
  }
}

async function serveHolding(options: ServeOptions, io: CommandIo, helper: RegistryHelper, port: number): Promise<number> {
  const settings = openNodeSettings(options.dataDir, DEFAULT_API_PORT, (line) => io.err(line));
  if (settings.loadProblem) io.err(settings.loadProblem.message);
  const signals = stopSignals(() => io.err('gpu-share: stopping… (engines get 10 s to stop)'));
  const policy = options.queueLimit === undefined ? POLICY_M10_V1 : withQueueDepth(POLICY_M10_V1, options.queueLimit);
  const core = await startCore({ dataDir: options.dataDir, settings, simFile: options.simFile, helper, launchers: options.launchers, policy, log: (line) => io.err(line) });
  try {
    let server: Awaited<ReturnType<typeof startApiServer>>;
    try {
      server = await startApiServer({ core, port, staticDir: rendererDir(), log: (line) => io.err(line) });
    } catch (error) {
      // Taken between the probe and now.
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      io.err(busyPort(port));
      return 1;
    }
    io.out(`dashboard: ${server.dashboardUrl}`);
    const signal = await signals.stopped;
    io.err(`gpu-share: ${signal}: stopping the engines and the server`);
    await server.close();
    return 0;
  } finally {
    await core.close();
    signals.release();
  }
}
