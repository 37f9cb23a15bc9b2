/**
 * The estimator's own process: node-llama-cpp's GGUF parser and insights, one model file per
 * request. It runs in a child with a heap limit, and its parent kills it past a deadline
 * (estimate.ts, `childEstimator`), so a file that makes the parser allocate without bound or throw
 * a fatal error ends this process, never `serve` or the app. Each file has already passed our
 * bounded header reader (gguf-header.ts) by then.
 *
 *   node dist/electron/core/planner/estimate-host.js --serve
 *     stdin:  {"id":1,"file":"/m.gguf","options":{"contextSize":N,"gpuLayers":N,"kvCacheType":"f16"}}
 *     stdout: {"id":1,"ok":true,"estimate":{…}}  or  {"id":1,"ok":false,"error":"…","fromFile":true}
 *
 * It leaves when its stdin closes (the parent is gone) or after a minute without a request.
 */
import { createInterface } from 'node:readline';
import { KV_CACHE_GGML_TYPE, type KvCacheType } from '../contract.js';
import { onParentGone, stdinIsPipe } from '../parent-watch.js';
import { EstimateError, estimateFromGguf, releaseEstimator, type EstimateOptions } from './estimate.js';
import { isEntryPoint } from '../entry-point.js';

const IDLE_EXIT_MS = 60_000;
/** A request line longer than this is not ours. */
const REQUEST_MAX = 64 * 1024;

function parseRequest(text: string): { id: number; file: string; options: EstimateOptions } | null {
  if (text.length > REQUEST_MAX) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { id, file, options } = value as Record<string, unknown>;
  if (typeof id !== 'number' || typeof file !== 'string' || typeof options !== 'object' || options === null) return null;
  const { contextSize, gpuLayers, kvCacheType } = options as Record<string, unknown>;
  if (typeof contextSize !== 'number' || !Number.isSafeInteger(contextSize) || contextSize <= 0) return null;
  if (typeof gpuLayers !== 'number' || !Number.isSafeInteger(gpuLayers) || gpuLayers < 0) return null;
  if (kvCacheType !== undefined && (typeof kvCacheType !== 'string' || !(kvCacheType in KV_CACHE_GGML_TYPE))) return null;
  return { id, file, options: { contextSize, gpuLayers, ...(kvCacheType === undefined ? {} : { kvCacheType: kvCacheType as KvCacheType }) } };
}

function serve(): void {
  let idle = setTimeout(() => process.exit(0), IDLE_EXIT_MS);
  let line = Promise.resolve();
  const take = (text: unknown): void => {
    if (typeof text !== 'string') return;
    line = line.then(async () => {
      clearTimeout(idle);
      const request = parseRequest(text);
      let answer: Record<string, unknown>;
      if (request === null) answer = { id: null, ok: false, error: 'not an estimate request', fromFile: false };
      else {
        try {
          answer = { id: request.id, ok: true, estimate: await estimateFromGguf(request.file, request.options) };
        } catch (error) {
          answer = { id: request.id, ok: false, error: error instanceof Error ? error.message : String(error), fromFile: error instanceof EstimateError && error.fromFile };
        }
      }
      process.stdout.write(`${JSON.stringify(answer)}\n`);
      idle = setTimeout(() => void releaseEstimator().finally(() => process.exit(0)), IDLE_EXIT_MS);
    });
  };
  // Requests come on stdin (a child process) or as messages on parentPort (an Electron utility
  // process, whose stdin is not a pipe: the app's spawn sends there).
  const parentPort = (process as NodeJS.Process & { parentPort?: { on(event: 'message', listener: (message: { data: unknown }) => void): void } }).parentPort;
  parentPort?.on('message', (message) => take(message.data));
  if (stdinIsPipe()) createInterface({ input: process.stdin, crlfDelay: Infinity }).on('line', take);
  // The parent is gone (its stdin pipe ended, or we were re-parented): nobody to answer.
  onParentGone(() => process.exit(0));
}


if (isEntryPoint(import.meta.url) && process.argv[2] === '--serve') serve();
