/**
 * `gpu-share serve`: the whole core headless — registry observer, planner, supervisor, telemetry —
 * and the loopback API with the dashboard. Prints one line once it is ready:
 *
 *   dashboard: http://127.0.0.1:PORT/#token=TOKEN
 *
 * SIGINT/SIGTERM stop the engines it started (gracefully; a second signal kills them) and exit.
 */
import { mkdirSync } from 'node:fs';
import type { RegistryHelper } from '../../../native/helper.js';
import type { CoreLaunchers } from '../app-types.js';
import { startCore } from '../app.js';
import { startApiServer } from '../api/server.js';
import { DEFAULT_API_PORT } from '../contract.js';
import { POLICY_M10_V1, withQueueDepth } from '../planner/policy.js';
import { openNodeSettings } from '../settings.js';
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

export async function runServe(options: ServeOptions, io: CommandIo, helper: RegistryHelper): Promise<number> {
  mkdirSync(options.dataDir, { recursive: true });
  const settings = openNodeSettings(options.dataDir, DEFAULT_API_PORT);
  const signals = stopSignals(() => io.err('gpu-share: stopping… (engines get 10 s to stop)'));
  const policy = options.queueLimit === undefined ? POLICY_M10_V1 : withQueueDepth(POLICY_M10_V1, options.queueLimit);
  const core = await startCore({ dataDir: options.dataDir, settings, simFile: options.simFile, helper, launchers: options.launchers, policy, log: (line) => io.err(line) });
  try {
    const server = await startApiServer({ core, port: options.port ?? settings.get().apiPort, staticDir: rendererDir(), log: (line) => io.err(line) });
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
