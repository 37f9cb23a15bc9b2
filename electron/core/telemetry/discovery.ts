/**
 * Which telemetry provider this machine gets, and why:
 *
 * 1. a simulated file: `simFile` (--sim), else $GPU_SHARE_SIM. It must be valid: an explicit
 *    request that cannot be honoured throws TelemetryError('BAD_INPUT') rather than falling back.
 * 2. NVML, when the library loads, initialises and reports at least one GPU;
 * 3. metal-0 on macOS (the Apple GPU; unified memory, so RAM is its memory);
 * 4. cpu-0, the host CPU.
 *
 * The reason is one line for logs and the UI, e.g. "NVML unavailable: libnvidia-ml.so.1 not found;
 * using the host CPU (cpu-0)".
 */
import { createCpuProvider, createMetalProvider } from './cpu-provider.js';
import { openNvmlProvider } from './nvml-provider.js';
import { SimProvider } from './sim-provider.js';
import { TelemetryError, type TelemetryProvider } from './types.js';

export interface DiscoverOptions {
  /** A simulated-telemetry file (the --sim flag); wins over $GPU_SHARE_SIM. */
  simFile?: string | undefined;
  env?: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  /** Wall-clock µs for sampledAtUs. */
  wallUs: () => number;
}

export interface Discovery {
  provider: TelemetryProvider;
  reason: string;
}

export function discoverTelemetry(options: DiscoverOptions): Discovery {
  const env = options.env ?? process.env;
  const platform = options.platform ?? process.platform;
  const { wallUs } = options;

  const fromEnv = env['GPU_SHARE_SIM'];
  const simFile = options.simFile !== undefined && options.simFile !== '' ? options.simFile : fromEnv !== undefined && fromEnv !== '' ? fromEnv : null;
  if (simFile !== null) {
    const via = options.simFile !== undefined && options.simFile !== '' ? '--sim' : 'GPU_SHARE_SIM';
    return { provider: new SimProvider({ file: simFile, wallUs }), reason: `simulated telemetry from ${simFile} (${via})` };
  }

  let nvmlProblem: string;
  try {
    const nvml = openNvmlProvider({ env, platform, wallUs });
    let count: number;
    try {
      count = nvml.deviceCount();
    } catch (error) {
      nvml.close();
      throw error;
    }
    if (count > 0) {
      return { provider: nvml, reason: `NVML: ${count} GPU${count === 1 ? '' : 's'} (${nvml.libraryPath})` };
    }
    nvml.close();
    nvmlProblem = `NVML reports no GPU (${nvml.libraryPath})`;
  } catch (error) {
    if (!(error instanceof TelemetryError)) throw error;
    nvmlProblem = `NVML unavailable: ${error.message}`;
  }

  if (platform === 'darwin') {
    return { provider: createMetalProvider({ wallUs, platform }), reason: `${nvmlProblem}; using the Apple GPU with unified memory (metal-0)` };
  }
  return { provider: createCpuProvider({ wallUs, platform }), reason: `${nvmlProblem}; using the host CPU (cpu-0)` };
}
