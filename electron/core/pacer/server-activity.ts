/**
 * Which activity signal `gpu-share run` uses for a command: a llama.cpp server's /metrics (its
 * in-flight requests and generated tokens: exact, and it sees a request the moment it starts) or
 * the CPU time of the command's process tree. A llama.cpp server is recognised on the command line
 * (`--port`/`--host`), so that `gpu-share run -- llama-server -m x.gguf --port 8081` gets the same
 * signal as a `llama-server` profile, whose supervisor passes `--activity-url`. Pure.
 */
import { basename } from 'node:path';

/** llama-server listens here unless told `--port`. */
export const LLAMA_SERVER_DEFAULT_PORT = 8080;

/** The key a llama.cpp server was started with, which its /metrics then asks for. */
export interface ServerKey {
  /** `--api-key K`, or LLAMA_API_KEY in its environment; undefined when none. */
  apiKey: string | undefined;
  /** `--api-key-file F`: the key is the file's first line (read by the caller). */
  apiKeyFile: string | undefined;
}

export interface DetectedServer extends ServerKey {
  /** The /metrics URL to poll (loopback). */
  metricsUrl: string;
  /** Arguments to add to the command line: `--metrics` for a llama-server started without it
   *  (it serves /metrics only with it). */
  addArgs: string[];
}

/** The value of `--name V` or `--name=V`; undefined when absent. The last one wins, as in
 *  llama.cpp's own parser. */
export function flagValue(args: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === name) value = args[i + 1];
    else if (arg.startsWith(`${name}=`)) value = arg.slice(name.length + 1);
  }
  return value;
}

export function serverKeyOf(args: readonly string[], env: Readonly<Record<string, string | undefined>>): ServerKey {
  return { apiKey: flagValue(args, '--api-key') ?? env['LLAMA_API_KEY'], apiKeyFile: flagValue(args, '--api-key-file') };
}

const hasFlag = (args: readonly string[], name: string): boolean => args.some((arg) => arg === name || arg.startsWith(`${name}=`));

/** The `--port N` (or `--port=N`) among a server's arguments, the last one winning as in
 *  llama.cpp's parser; null when absent or not a port. */
export function declaredPortOf(args: readonly string[]): number | null {
  const raw = flagValue(args, '--port');
  if (raw === undefined || !/^\d+$/.test(raw)) return null;
  const port = Number(raw);
  return port > 0 && port < 65536 ? port : null;
}

/** The loopback host to reach a server listening on `host`; null when it listens elsewhere (we
 *  probe nothing but loopback) or on a unix socket. */
function loopbackHost(host: string | undefined): string | null {
  if (host === undefined || host === '' || host === '0.0.0.0' || host === 'localhost') return '127.0.0.1';
  if (host === '::' || host === '::1' || host === '[::1]' || host === '[::]') return '[::1]';
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)) return host;
  return null;
}

/** A llama.cpp-style server on the command line: it names `--port` or `--host`. null when it does
 *  not, or listens where we do not probe. */
export function detectLlamaServer(command: string, args: readonly string[], env: Readonly<Record<string, string | undefined>>): DetectedServer | null {
  if (!hasFlag(args, '--port') && !hasFlag(args, '--host')) return null;
  const host = loopbackHost(flagValue(args, '--host'));
  // `--port` with no value or no port in it: not a server we know how to probe.
  const port = hasFlag(args, '--port') ? declaredPortOf(args) : LLAMA_SERVER_DEFAULT_PORT;
  if (host === null || port === null) return null;
  const isLlamaServer = basename(command).replace(/\.exe$/i, '') === 'llama-server';
  return {
    metricsUrl: `http://${host}:${port}/metrics`,
    addArgs: isLlamaServer && !hasFlag(args, '--metrics') ? ['--metrics'] : [],
    ...serverKeyOf(args, env),
  };
}

/** What the boot line says about the activity signal. */
export function describeActivity(metricsUrl: string | undefined, detected: boolean, cpuTimeKnown: boolean): string {
  const cpu = cpuTimeKnown ? 'CPU time of the process tree' : 'unknown on this platform (paced whenever it runs)';
  if (metricsUrl === undefined) return cpu;
  return `llama.cpp metrics at ${metricsUrl}${detected ? ' (detected from --port/--host)' : ''}, ${cpuTimeKnown ? 'CPU time of the process tree' : 'treated as active'} until it answers`;
}
