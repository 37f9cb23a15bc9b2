import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { EnvelopeFileError, EnvelopeStore, modelIdentity } from '../../electron/core/planner/envelopes.js';

const dirs: string[] = [];
const tmp = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'gpushare-env-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

const key = { modelKey: 'sha256:abc', contextSize: 4096, gpuLayers: 99, engineKind: 'builtin' };

describe('EnvelopeStore', () => {
  it('persists measured peaks and keeps the larger of two measurements', () => {
    const file = join(tmp(), 'envelopes.json');
    const store = new EnvelopeStore(file);
    expect(store.get(key)).toBeUndefined();
    store.recordMeasured(key, 5_000_000_000, 1);
    store.recordMeasured(key, 4_000_000_000, 2);
    const again = new EnvelopeStore(file);
    expect(again.get(key)).toEqual({ ...key, peakBytes: 5_000_000_000, source: 'MEASURED', measuredAtUs: 2 });
    expect(again.get({ ...key, contextSize: 8192 })).toBeUndefined();
  });

  it('names what is wrong with a bad file and leaves it untouched', () => {
    const dir = tmp();
    for (const [content, message] of [
      ['{not json', 'is not valid JSON'],
      ['[]', 'must be {"envelopes": [...]}'],
      ['{"envelopes":[{"modelKey":"m","contextSize":-1,"gpuLayers":0,"engineKind":"x","peakBytes":1,"source":"MEASURED","measuredAtUs":null}]}', 'envelopes[0].contextSize'],
      ['{"envelopes":[{"modelKey":"m","contextSize":1,"gpuLayers":0,"engineKind":"x","peakBytes":1,"source":"GUESS","measuredAtUs":null}]}', 'envelopes[0].source'],
    ] as const) {
      const file = join(dir, 'envelopes.json');
      writeFileSync(file, content);
      expect(() => new EnvelopeStore(file)).toThrowError(EnvelopeFileError);
      expect(() => new EnvelopeStore(file)).toThrowError(message);
      expect(readFileSync(file, 'utf8')).toBe(content);
    }
  });

  it('identifies a model by a hash of path, size and mtime, not its contents', () => {
    const file = join(tmp(), 'm.gguf');
    writeFileSync(file, 'GGUF....');
    const id = modelIdentity(file);
    expect(id.sizeBytes).toBe(8);
    expect(id.modelKey).toMatch(/^sha256:[0-9a-f]{24}$/);
    expect(modelIdentity(file)).toEqual(id);
  });
});
