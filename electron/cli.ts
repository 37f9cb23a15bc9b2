/**
 * The `gpu-share` command. Parsing only: each command's work lives in core/commands. Bad flags
 * get one line naming the flag and exit code 2; runtime failures exit 1.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { RegistryError, loadRegistryHelper } from '../native/helper.js';
import { runJoin } from './core/commands/join.js';
import { runPeers } from './core/commands/peers.js';
import { runPaced } from './core/commands/run.js';
import { loadProcessControl } from '../native/process-control.js';
import { processIo } from './core/commands/io.js';
import { checkGpuKey, checkIntervalMs, checkName, checkWeight, type Checked } from './core/registry/validate.js';

/** Exit codes of the command. */
export const EXIT = { OK: 0, FAILED: 1, USAGE: 2 } as const;

function parser<T>(check: (raw: string) => Checked<T>): (raw: string) => T {
  return (raw) => {
    const result = check(raw);
    if (!result.ok) throw new InvalidArgumentError(result.message);
    return result.value;
  };
}

const gpuKeyOption = (): Option =>
  new Option('--gpu-key <key>', 'registry key of the device: a GPU UUID (GPU-…), metal-0 or cpu-0').argParser(parser(checkGpuKey)).makeOptionMandatory();
const intervalOption = (): Option =>
  new Option('--interval <ms>', 'refresh interval for --watch, in milliseconds').argParser(parser(checkIntervalMs)).default(500);

export function buildProgram(run: (work: () => Promise<number>) => void): Command {
  const program = new Command('gpu-share')
    .description('Share one GPU between local LLM engines: registry, pacer and VRAM planner.')
    .showHelpAfterError(false)
    .enablePositionalOptions()
    .exitOverride();

  program
    .command('join')
    .description('hold a registry slot for this process, heartbeat it, and free it on SIGINT/SIGTERM')
    .addOption(gpuKeyOption())
    .addOption(new Option('--weight <w>', 'weight of this peer (its share is weight / sum of active weights)').argParser(parser(checkWeight)).default(1))
    .addOption(new Option('--name <name>', 'display name (at most 47 bytes of UTF-8)').argParser(parser(checkName)))
    .option('--active', 'mark this peer active (it wants the GPU now)', false)
    .option('--watch', "print this peer's /gpu/peers view as a JSON line every interval", false)
    .addOption(intervalOption())
    .exitOverride()
    .action((opts: { gpuKey: string; weight: number; name?: string; active: boolean; watch: boolean; interval: number }) =>
      run(() =>
        runJoin(
          { gpuKey: opts.gpuKey, weight: opts.weight, name: opts.name ?? `peer-${process.pid}`, active: opts.active, watch: opts.watch, intervalMs: opts.interval },
          processIo,
          loadRegistryHelper(),
        ),
      ),
    );

  program
    .command('peers')
    .description("print a GPU's registry as the /gpu/peers view (a table, or JSON with --json)")
    .addOption(gpuKeyOption())
    .option('--json', 'print the exact /gpu/peers JSON', false)
    .option('--watch', 'refresh every interval (JSON: one line per refresh)', false)
    .addOption(intervalOption())
    .exitOverride()
    .action((opts: { gpuKey: string; json: boolean; watch: boolean; interval: number }) =>
      run(() =>
        runPeers(
          { gpuKey: opts.gpuKey, json: opts.json, watch: opts.watch, intervalMs: opts.interval, clearScreen: process.stdout.isTTY === true },
          processIo,
          loadRegistryHelper(),
        ),
      ),
    );

  program
    .command('run')
    .description('start a command as a paced peer: suspended outside its TDM window while others are busy')
    .usage('--gpu-key <key> [--weight <w>] [--name <name>] -- <command> [args...]')
    .addOption(gpuKeyOption())
    .addOption(new Option('--weight <w>', 'weight of the command').argParser(parser(checkWeight)).default(1))
    .addOption(new Option('--name <name>', 'display name (default: the command name)').argParser(parser(checkName)))
    .argument('<command>', 'the command to run (after --)')
    .argument('[args...]', 'its arguments')
    .passThroughOptions()
    .exitOverride()
    .action((command: string, args: string[], opts: { gpuKey: string; weight: number; name?: string }) =>
      run(async () => runPaced({ gpuKey: opts.gpuKey, weight: opts.weight, name: opts.name, command, args }, processIo, loadRegistryHelper(), await loadProcessControl())),
    );

  return program;
}

export function main(argv: readonly string[]): void {
  const run = (work: () => Promise<number>): void => {
    work().then(
      (code) => {
        process.exitCode = code;
      },
      (error: unknown) => {
        const message = error instanceof RegistryError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error);
        process.stderr.write(`gpu-share: ${message}\n`);
        process.exitCode = EXIT.FAILED;
      },
    );
  };
  try {
    buildProgram(run).parse([...argv], { from: 'node' });
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
