/**
 * Envelopes: the measured peak memory of a model, per (model file identity, context size, GPU
 * layers, engine kind), persisted across runs. Before any measurement the GGUF estimate stands in,
 * marked ESTIMATED. The file holds shapes and hashes only: the model's identity is a hash of its
 * path, size and modification time, never its contents.
 */
import { createHash } from 'node:crypto';
import { realpathSync, statSync } from 'node:fs';
import { DataFileError, jsonProblem, readDataFile, writeDataFile } from '../data-files.js';

export interface EnvelopeKey {
  modelKey: string;
  contextSize: number;
  gpuLayers: number;
  engineKind: string;
}

export interface Envelope extends EnvelopeKey {
  peakBytes: number;
  source: 'MEASURED' | 'ESTIMATED';
  /** Wall µs of the measurement (MEASURED only). */
  measuredAtUs: number | null;
}

export interface ModelIdentity {
  modelKey: string;
  sizeBytes: number;
}

/** sha256 of the model's real path, size and mtime: stable while the file is unchanged. */
export function modelIdentity(path: string): ModelIdentity {
  const real = realpathSync(path);
  const stat = statSync(real);
  const modelKey = `sha256:${createHash('sha256').update(`${real}\0${stat.size}\0${Math.trunc(stat.mtimeMs)}`).digest('hex').slice(0, 24)}`;
  return { modelKey, sizeBytes: stat.size };
}

const keyOf = (k: EnvelopeKey): string => `${k.modelKey}|${k.contextSize}|${k.gpuLayers}|${k.engineKind}`;

export class EnvelopeFileError extends Error {
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`envelopes file ${file}: ${message}`);
    this.name = 'EnvelopeFileError';
  }
}

function parseEnvelope(value: unknown, where: string, file: string): Envelope {
  if (value === null || typeof value !== 'object') throw new EnvelopeFileError(file, `${where} is not an object`);
  const v = value as Record<string, unknown>;
  const str = (name: string): string => {
    if (typeof v[name] !== 'string' || v[name] === '') throw new EnvelopeFileError(file, `${where}.${name} must be a non-empty string`);
    return v[name];
  };
  const int = (name: string): number => {
    const n = v[name];
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) throw new EnvelopeFileError(file, `${where}.${name} must be a whole number ≥ 0`);
    return n;
  };
  if (v['source'] !== 'MEASURED' && v['source'] !== 'ESTIMATED') throw new EnvelopeFileError(file, `${where}.source must be MEASURED or ESTIMATED`);
  const peakBytes = int('peakBytes');
  if (peakBytes === 0) throw new EnvelopeFileError(file, `${where}.peakBytes must be > 0`);
  const measuredAtUs = v['measuredAtUs'];
  if (measuredAtUs !== null && (typeof measuredAtUs !== 'number' || !Number.isFinite(measuredAtUs))) throw new EnvelopeFileError(file, `${where}.measuredAtUs must be a number or null`);
  return { modelKey: str('modelKey'), contextSize: int('contextSize'), gpuLayers: int('gpuLayers'), engineKind: str('engineKind'), peakBytes, source: v['source'], measuredAtUs: measuredAtUs ?? null };
}

/** The persisted envelopes. A malformed file is an error naming what was wrong; it is left as it
 *  is (never overwritten) until the user fixes or removes it. */
export class EnvelopeStore {
  private readonly envelopes = new Map<string, Envelope>();

  constructor(private readonly file: string) {
    let text: string | null;
    try {
      // No link followed, no FIFO waited on (data-files.ts).
      text = readDataFile(file);
    } catch (error) {
      if (error instanceof DataFileError) throw new EnvelopeFileError(file, error.problem);
      throw error;
    }
    if (text === null) return;
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      // The parser's message quotes the file; ours says where, not what.
      throw new EnvelopeFileError(file, jsonProblem(error));
    }
    const list = (data as { envelopes?: unknown } | null)?.envelopes;
    if (!Array.isArray(list)) throw new EnvelopeFileError(file, 'must be {"envelopes": [...]}');
    list.forEach((item, i) => {
      const envelope = parseEnvelope(item, `envelopes[${i}]`, file);
      this.envelopes.set(keyOf(envelope), envelope);
    });
  }

  get(key: EnvelopeKey): Envelope | undefined {
    return this.envelopes.get(keyOf(key));
  }

  /** A measured peak replaces an estimate; a later measurement keeps the larger peak. */
  recordMeasured(key: EnvelopeKey, peakBytes: number, nowUs: number): Envelope {
    if (!Number.isFinite(peakBytes) || peakBytes <= 0) throw new Error(`measured peak must be > 0 bytes, got ${peakBytes}`);
    const previous = this.get(key);
    const peak = previous?.source === 'MEASURED' ? Math.max(previous.peakBytes, peakBytes) : peakBytes;
    const envelope: Envelope = { ...key, peakBytes: Math.round(peak), source: 'MEASURED', measuredAtUs: nowUs };
    this.envelopes.set(keyOf(key), envelope);
    this.save();
    return envelope;
  }

  list(): Envelope[] {
    return [...this.envelopes.values()];
  }

  /** Written to a temporary file, synced and renamed, so a crash never leaves half a file; a write
   *  that fails (a full disk) leaves the old file and is an EnvelopeFileError saying so. */
  private save(): void {
    try {
      writeDataFile(this.file, `${JSON.stringify({ envelopes: this.list() }, null, 2)}\n`);
    } catch (error) {
      if (error instanceof DataFileError) throw new EnvelopeFileError(this.file, error.problem);
      throw error;
    }
  }
}
