/**
 * The `gpu-share` command. Parsing only: each command's work lives in core/commands. Bad flags
 * get one line naming the flag and exit code 2; runtime failures exit 1.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadRegistryHelper } from '../native/helper.js';
import { systemClock } from './core/clock.js';
import { processIo } from './core/commands/io.js';
import { builtinHostPath, defaultDataDir } from './core/paths.js';
import { shareRegistries } from './core/registry/segment.js';
import { STOP_METHODS, type StopMethod } from './core/pacer/stop-method.js';
import { checkGpuKey, checkIntervalMs, checkName, checkWeight, checkWholeNumber, type Checked } from './core/registry/validate.js';

// Each command's module is imported when it runs: `plan` and `launch` bring node-llama-cpp
// (~150 ms), which `join`, `peers` and every `run` supervisor should not pay for at start.

/** Errors a user can act on, by name: printed as one line, no stack. */
const EXPECTED_ERRORS = new Set(['RegistryError', 'DeviceChoiceError', 'PlanCommandError', 'PlannerInputError', 'TelemetryError', 'NvmlCallError', 'EstimateError', 'EnvelopeFileError', 'ProfileError', 'ProfileNotFoundError', 'SupervisorError', 'SettingsFileError', 'DataFileError', 'DataDirError', 'DataLockError']);
/** Of those, the ones that mean a bad flag value (exit code 2). */
const USAGE_ERRORS = new Set(['PlanCommandError', 'DeviceChoiceError']);

/** Exit codes of the command. */
export const EXIT = { OK: 0, FAILED: 1, USAGE: 2 } as const;

function parser<T>(check: (raw: string) => Checked<T>): (raw: string) => T {
  return (raw) => {
    const result = check(raw);
    if (!result.ok) throw new InvalidArgumentError(result.message);
    return result.value;
  };
}

/** `launch --api-key`: what a client sends as `Authorization: Bearer KEY`, so visible ASCII only. */
export function checkApiKey(raw: string): Checked<string> {
  if (!/^[\x21-\x7e]{1,256}$/.test(raw)) return { ok: false, message: `must be 1 to 256 visible ASCII characters (no spaces): it is sent as "Authorization: Bearer KEY", got ${raw.length} characters${/\s/.test(raw) ? ' with white space' : ''}` };
  return { ok: true, value: raw };
}

const gpuKeyOption = (byDefault = 'the first device found'): Option =>
  new Option('--gpu-key <key>', `registry key of the device: a GPU UUID (GPU-…), metal-0 or cpu-0 (default: ${byDefault})`).argParser(parser(checkGpuKey)).conflicts('gpu');
const gpuIndexOption = (): Option =>
  new Option('--gpu <n>', 'the n-th device found (see gpu-share devices), instead of --gpu-key').argParser(parser((raw) => checkWholeNumber(raw, 0, 1023)));
/** The device key of a command: as given, or found by telemetry (imported only then). */
const deviceKey = async (opts: { gpuKey?: string; gpu?: number }, wallUs: () => number): Promise<string> =>
  (await import('./core/commands/keys.js')).resolveGpuKey({ gpuKey: opts.gpuKey, gpu: opts.gpu }, wallUs);
/** GPU_SHARE_API_PORT, the app's port for one run, when it is a port (else the settings' is asked). */
const apiPortFromEnv = (): number | undefined => {
  const raw = process.env['GPU_SHARE_API_PORT'];
  const port = raw === undefined || !/^\d{1,5}$/.test(raw) ? NaN : Number(raw);
  return port >= 1 && port <= 65_535 ? port : undefined;
};
const sharedRegistryOption = (): Option =>
  new Option('--shared-registry', "accept other users' registry segments and create ours for every local user (mode 0666): trusts every local user").default(false);
const intervalOption = (): Option =>
  new Option('--interval <ms>', 'refresh interval for --watch, in milliseconds').argParser(parser(checkIntervalMs)).default(500);

const wholeNumber = (min: number, max: number) => (raw: string): Checked<number> => checkWholeNumber(raw, min, max);
/** Activity is read from the engine on this machine only. */
const checkLoopbackUrl = (raw: string): Checked<string> => {
  try {
    const url = new URL(raw);
    if (url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) return { ok: true, value: url.href };
  } catch {
    // fall through
  }
  return { ok: false, message: `must be an http:// URL on 127.0.0.1, localhost or [::1] (got ${JSON.stringify(raw)})` };
};
const oneOf = <T extends string>(values: readonly T[]) => (raw: string): Checked<T> =>
  (values as readonly string[]).includes(raw) ? { ok: true, value: raw as T } : { ok: false, message: `must be one of ${values.join(', ')} (got ${JSON.stringify(raw)})` };

/** The package's version, from package.json two folders above this file (dist/electron/). */
export function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

export function buildProgram(run: (work: () => Promise<number>) => void): Command {
  const program = new Command('gpu-share')
    .description('Share one GPU between local LLM engines: registry, pacer and VRAM planner.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .showHelpAfterError(false)
    .enablePositionalOptions()
    .exitOverride();
  // --shared-registry holds for this process and every engine or supervisor it starts.
  program.hook('preAction', (_program, command) => {
    if (command.opts()['sharedRegistry'] === true) shareRegistries();
  });

  program
    .command('join')
    .description('hold a registry slot for this process, heartbeat it, and free it on SIGINT/SIGTERM')
    .addOption(gpuKeyOption())
    .addOption(gpuIndexOption())
    .addOption(new Option('--weight <w>', 'weight of this peer (its share is weight / sum of active weights)').argParser(parser(checkWeight)).default(1))
    .addOption(new Option('--name <name>', 'display name (at most 47 bytes of UTF-8)').argParser(parser(checkName)))
    .option('--active', 'mark this peer active (it wants the GPU now)', false)
    .option('--watch', "print this peer's /gpu/peers view as a JSON line every interval", false)
    .addOption(intervalOption())
    .addOption(sharedRegistryOption())
    .exitOverride()
    .action((opts: { gpuKey?: string; gpu?: number; weight: number; name?: string; active: boolean; watch: boolean; interval: number }) =>
      run(async () => {
        const helper = loadRegistryHelper();
        return (await import('./core/commands/join.js')).runJoin(
          { gpuKey: await deviceKey(opts, () => helper.wallUs()), weight: opts.weight, name: opts.name ?? `peer-${process.pid}`, active: opts.active, watch: opts.watch, intervalMs: opts.interval },
          processIo,
          helper,
        );
      }),
    );

  program
    .command('peers')
    .description("print a GPU's registry as the /gpu/peers view (a table, or JSON with --json); without a key, every device that has one")
    .addOption(gpuKeyOption())
    .addOption(gpuIndexOption())
    .option('--json', 'print the exact /gpu/peers JSON', false)
    .option('--watch', 'refresh every interval (JSON: one line per refresh)', false)
    .addOption(intervalOption())
    .addOption(sharedRegistryOption())
    .exitOverride()
    .action((opts: { gpuKey?: string; gpu?: number; json: boolean; watch: boolean; interval: number }) =>
      run(async () => {
        const helper = loadRegistryHelper();
        const gpuKey = opts.gpuKey === undefined && opts.gpu === undefined ? undefined : await deviceKey(opts, () => helper.wallUs());
        return (await import('./core/commands/peers.js')).runPeers(
          { gpuKey, json: opts.json, watch: opts.watch, intervalMs: opts.interval, clearScreen: process.stdout.isTTY === true },
          processIo,
          helper,
        );
      }),
    );

  program
    .command('devices')
    .description('list the devices found (index, key, name, memory, telemetry source) and the registries of this user with their live peers')
    .option('--json', 'print JSON', false)
    .addOption(new Option('--remove <key>', 'delete the registry segment of this key (only when no peer in it is alive)').argParser(parser(checkGpuKey)))
    .addOption(sharedRegistryOption())
    .exitOverride()
    .action((opts: { json: boolean; remove?: string }) =>
      run(async () => (await import('./core/commands/devices.js')).runDevices({ json: opts.json, remove: opts.remove }, processIo, loadRegistryHelper())),
    );

  program
    .command('run')
    .description('start a command as a paced peer: suspended outside its TDM window while others are busy')
    .usage('[--gpu-key <key> | --gpu <n>] [--weight <w>] [--name <name>] -- <command> [args...]')
    .addOption(gpuKeyOption())
    .addOption(gpuIndexOption())
    .addOption(new Option('--weight <w>', 'weight of the command').argParser(parser(checkWeight)).default(1))
    .addOption(new Option('--name <name>', 'display name (default: the command name)').argParser(parser(checkName)))
    .option('--exit-with-parent', 'stop the command when the process that started gpu-share run dies (for supervisors)', false)
    .addOption(new Option('--activity-url <url>', "judge activity by a llama.cpp server's /metrics (CPU time otherwise)").argParser(parser(checkLoopbackUrl)))
    .addOption(new Option('--stop-method <m>', 'how the command is stopped outside its window: sigstop, or cuda-lock (cuCheckpointProcessLock: waits for its queued GPU work; NVIDIA driver 550+, SIGSTOP where it fails)').argParser(parser(oneOf(STOP_METHODS))).default('sigstop'))
    .argument('<command>', 'the command to run (after --)')
    .argument('[args...]', 'its arguments')
    .passThroughOptions()
    .addOption(sharedRegistryOption())
    .exitOverride()
    .action((command: string, args: string[], opts: { gpuKey?: string; gpu?: number; weight: number; name?: string; exitWithParent: boolean; activityUrl?: string; stopMethod: StopMethod }) =>
      run(async () => {
        const { runPaced } = await import('./core/commands/run.js');
        const { loadProcessControl } = await import('../native/process-control.js');
        const helper = loadRegistryHelper();
        const gpuKey = await deviceKey(opts, () => helper.wallUs());
        return runPaced({ gpuKey, weight: opts.weight, name: opts.name, command, args, exitWithParent: opts.exitWithParent, activityUrl: opts.activityUrl, stopMethod: opts.stopMethod }, processIo, helper, await loadProcessControl());
      }),
    );

  program
    .command('plan')
    .description('dry-run the VRAM planner for a model: verdict, reasons and the VRAM breakdown (exit 0 admit, 3 queue, 4 reject)')
    .requiredOption('--model <file.gguf>', 'the GGUF model file')
    .addOption(new Option('--ctx <n>', "context size in tokens (default: the model's trained context, at most 8192)").argParser(parser(wholeNumber(1, 10_000_000))))
    .addOption(new Option('--gpu-layers <n>', 'layers to offload (99 = all)').argParser(parser(wholeNumber(0, 100_000))).default(99))
    .addOption(new Option('--priority <p>', 'interactive, background or lab').argParser(parser(oneOf(['interactive', 'background', 'lab'] as const))).default('interactive'))
    .option('--capability <name>', 'the capability the model would serve', 'chat')
    .addOption(new Option('--engine <kind>', 'engine kind').argParser(parser(oneOf(['builtin', 'llama-server', 'llamafile', 'opencoti-llamafile', 'command'] as const))).default('builtin'))
    .addOption(new Option('--weight <w>', "weight the engine would join with (default: its priority's)").argParser(parser(checkWeight)))
    .option('--sim <file>', 'simulated telemetry from a JSON file (also $GPU_SHARE_SIM), when no serve runs for the data folder')
    .addOption(gpuKeyOption())
    .addOption(gpuIndexOption())
    .addOption(new Option('--device <key>', 'an alias of --gpu-key (kept for older scripts)').argParser(parser(checkGpuKey)).conflicts(['gpu', 'gpuKey']))
    .option('--data-dir <dir>', "the data folder: its running serve or app is asked for the planner's inputs, else its files are read", defaultDataDir())
    .option('--json', 'print the PlacementPlan as JSON', false)
    .exitOverride()
    .action(
      (opts: { model: string; ctx?: number; gpuLayers: number; priority: 'interactive' | 'background' | 'lab'; capability: string; engine: string; weight?: number; sim?: string; gpuKey?: string; gpu?: number; device?: string; dataDir: string; json: boolean }) =>
        run(async () => {
          const { runPlan } = await import('./core/commands/plan.js');
          const { DEFAULT_WEIGHT_BY_PRIORITY } = await import('./core/engines/profiles.js');
          const helper = loadRegistryHelper();
          return runPlan(
            {
              model: opts.model,
              contextSize: opts.ctx,
              gpuLayers: opts.gpuLayers,
              priority: opts.priority,
              capability: opts.capability,
              engineKind: opts.engine,
              weight: opts.weight ?? DEFAULT_WEIGHT_BY_PRIORITY[opts.priority],
              simFile: opts.sim,
              gpuKey: opts.gpuKey ?? opts.device,
              gpu: opts.gpu,
              dataDir: opts.dataDir,
              json: opts.json,
              apiPort: apiPortFromEnv(),
            },
            processIo,
            systemClock(() => helper.wallUs()),
          );
        }),
    );

  // This file runs as dist/electron/cli.js: the engine host sits beside it, the CLI entry above.
  const here = dirname(fileURLToPath(import.meta.url));
  const launchers = { nodePath: process.execPath, cliPath: join(here, '..', '..', 'bin', 'gpu-share.js'), builtinHostPath: builtinHostPath() };

  program
    .command('launch')
    .description('plan, launch and supervise an engine in the foreground (a profile id, or --model FILE.gguf); Ctrl-C stops it')
    .argument('[profile]', 'the id of a profile in the data folder')
    .option('--model <file.gguf>', 'launch the built-in engine on this model (instead of a profile)')
    .addOption(new Option('--ctx <n>', "context size in tokens (with --model, default: the model's trained context, at most 8192)").argParser(parser(wholeNumber(16, 10_000_000))))
    .addOption(new Option('--weight <w>', 'weight (default: the profile\'s, or its priority\'s)').argParser(parser(checkWeight)))
    .addOption(new Option('--priority <p>', 'interactive, background or lab').argParser(parser(oneOf(['interactive', 'background', 'lab'] as const))))
    .addOption(new Option('--threads <n>', 'CPU threads for the built-in engine (default: the physical cores, one less with the prebuilt binding; 1 with every layer on a GPU)').argParser(parser(wholeNumber(1, 1024))))
    .addOption(new Option('--port <port>', "the engine's own HTTP port (built-in and llama-server engines; default: any free one)").argParser(parser(wholeNumber(1, 65_535))))
    .addOption(new Option('--api-key <key>', "requests that run the model must send Authorization: Bearer KEY (as llama-server's flag); default: none, the port takes any request on loopback").argParser(parser(checkApiKey)))
    .addOption(gpuKeyOption("the profile's preferred device while present, else the one with the most free memory"))
    .addOption(gpuIndexOption())
    .option('--sim <file>', 'simulated telemetry from a JSON file (also $GPU_SHARE_SIM)')
    .option('--data-dir <dir>', 'profiles, envelopes and engine state', defaultDataDir())
    .addOption(sharedRegistryOption())
    .exitOverride()
    .action(
      (profile: string | undefined, opts: { model?: string; ctx?: number; weight?: number; priority?: 'interactive' | 'background' | 'lab'; threads?: number; port?: number; apiKey?: string; gpuKey?: string; gpu?: number; sim?: string; dataDir: string }) =>
        run(async () => {
          const { PlanCommandError } = await import('./core/commands/plan.js');
          if ((profile === undefined) === (opts.model === undefined)) throw new PlanCommandError('give either a profile id or --model FILE.gguf');
          const { runLaunch } = await import('./core/commands/launch.js');
          const helper = loadRegistryHelper();
          return runLaunch(
            { profile, model: opts.model, contextSize: opts.ctx, weight: opts.weight, priority: opts.priority, simFile: opts.sim, dataDir: opts.dataDir, threads: opts.threads, port: opts.port, apiKey: opts.apiKey, gpuKey: opts.gpuKey, gpu: opts.gpu, launchers, tty: process.stderr.isTTY === true },
            processIo,
            systemClock(() => helper.wallUs()),
          );
        }),
    );

  program
    .command('serve')
    .description('run the core headless with the loopback API and the dashboard; prints the dashboard URL')
    .addOption(new Option('--port <port>', 'API port (default: the settings\' port, 7787; 0 picks a free one)').argParser(parser(wholeNumber(0, 65_535))))
    .option('--sim <file>', 'simulated telemetry from a JSON file (also $GPU_SHARE_SIM)')
    .option('--data-dir <dir>', 'settings, profiles, envelopes and the API token', defaultDataDir())
    .addOption(new Option('--queue-limit <n>', "gateway requests that may wait at once, more get 429 (default: the policy's, 32; an override is recorded in the policy's revision)").argParser(parser(wholeNumber(1, 100_000))))
    .addOption(sharedRegistryOption())
    .exitOverride()
    .action((opts: { port?: number; sim?: string; dataDir: string; queueLimit?: number }) =>
      run(async () => (await import('./core/commands/serve.js')).runServe({ port: opts.port ?? null, simFile: opts.sim, dataDir: opts.dataDir, launchers, queueLimit: opts.queueLimit }, processIo, loadRegistryHelper())),
    );

  program
    .command('engines')
    .description('list the engines running for a data folder: those of gpu-share launch, serve and the app')
    .option('--data-dir <dir>', 'profiles, envelopes and engine state', defaultDataDir())
    .option('--json', 'print JSON', false)
    .exitOverride()
    .action((opts: { dataDir: string; json: boolean }) => run(async () => (await import('./core/commands/launch.js')).runEngines(opts, processIo)));

  program
    .command('executables')
    .description('list the engine executables on this machine (llama-server, llamafile, ollama: on PATH, in the usual places, or added) with their versions')
    .option('--add <path>', 'add an executable (the dashboard may then offer it to a profile)')
    .option('--remove <path>', 'remove an added executable')
    .option('--data-dir <dir>', 'where the added executables are kept', defaultDataDir())
    .option('--json', 'print JSON', false)
    .exitOverride()
    .action((opts: { dataDir: string; json: boolean; add?: string; remove?: string }) => run(async () => (await import('./core/commands/local.js')).runExecutables(opts, processIo)));

  program
    .command('models')
    .description("list the GGUF models other tools keep on this machine (Ollama, LM Studio, the Hugging Face cache, llama.cpp's cache, ~/models, added folders)")
    .option('--add-folder <dir>', 'also look in this folder')
    .option('--remove-folder <dir>', 'stop looking in an added folder')
    .option('--data-dir <dir>', 'where the added folders are kept', defaultDataDir())
    .option('--json', 'print JSON', false)
    .exitOverride()
    .action((opts: { dataDir: string; json: boolean; addFolder?: string; removeFolder?: string }) => run(async () => (await import('./core/commands/local.js')).runModels(opts, processIo)));

  return program;
}

export function main(argv: readonly string[]): void {
  const run = (work: () => Promise<number>): void => {
    // Through a promise, so that a synchronous throw in `work` is reported like any other failure.
    Promise.resolve().then(work).then(
      (code) => {
        process.exitCode = code;
      },
      (error: unknown) => {
        // Expected failures are one clear line; anything else is a bug and shows its stack.
        const name = error instanceof Error ? error.name : '';
        const message = error instanceof Error ? (EXPECTED_ERRORS.has(name) ? error.message : (error.stack ?? error.message)) : String(error);
        process.stderr.write(`gpu-share: ${message}\n`);
        process.exitCode = USAGE_ERRORS.has(name) ? EXIT.USAGE : EXIT.FAILED;
      },
    );
  };
  const program = buildProgram(run);
  // Bare `gpu-share`: the help, on stdout, and success (it was asked for, not a mistake).
  if (argv.length <= 2) {
    process.stdout.write(program.helpInformation());
    return;
  }
  try {
    program.parse([...argv], { from: 'node' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has already printed the message (or the help).
      const shownHelp = error.code === 'commander.helpDisplayed' || error.code === 'commander.help' || error.code === 'commander.version';
      process.exitCode = shownHelp ? EXIT.OK : EXIT.USAGE;
      return;
    }
    throw error;
  }
}

main(process.argv);
