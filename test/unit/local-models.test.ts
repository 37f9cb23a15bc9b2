import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isModelFileName, modelName, namesModelFile, modelPlaces, ollamaName, quantizationName, scanModels } from '../../electron/core/models/local-models.js';
import type { LocalModelView } from '../../electron/core/contract.js';
import { ESTIMATE_RETRY_LATER_MS, ESTIMATE_RETRY_MS, ESTIMATE_TRIES, ModelCatalog } from '../../electron/core/models/model-catalog.js';
import { EstimateError, ModelFileError } from '../../electron/core/planner/estimate.js';
import { inspectModelFile } from '../../electron/core/planner/model-file.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { makeModelHome, type ModelHome } from '../fixtures/model-folders.js';

let dir: string;
let fixture: ModelHome;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-models-'));
  fixture = makeModelHome(join(dir, 'home'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const placesOf = (home: string, added: string[] = []) => modelPlaces('linux', {}, home, added).filter((p) => !p.dir.startsWith('/usr/'));

describe('models on this machine', () => {
  it('lists what Ollama, LM Studio, the Hugging Face cache, llama.cpp\'s cache and ~/models hold, with their tools\' names', async () => {
    const scan = await scanModels(placesOf(fixture.home));
    expect(scan.models.map(({ name, source, path }) => ({ name, source, path })).sort((a, b) => a.name.localeCompare(b.name))).toEqual([...fixture.expected].sort((a, b) => a.name.localeCompare(b.name)));
    expect(scan.truncated).toBe(false);
    expect(scan.places.filter((p) => p.found).map((p) => p.source)).toEqual(['ollama', 'lm-studio', 'lm-studio', 'hugging-face', 'llama.cpp', 'models']);
  });

  it('reads each header for its quantization and trained context, and marks what does not fit', async () => {
    const llamaBlob = fixture.expected.find((m) => m.name === 'llama3.2:3b')?.path;
    const catalog = new ModelCatalog({
      places: () => placesOf(fixture.home),
      inspect: (path) => inspectModelFile(path),
      peak: async (path) => ({ modelKey: path, peakBytes: path === llamaBlob ? 64 * 2 ** 30 : 2 ** 20, peakSource: 'ESTIMATED', parts: null }),
      fit: (model, peak, contextSize) => ({ verdict: peak.peakBytes > 2 ** 30 ? 'REJECT_CAPACITY' : 'ADMIT', gpuKey: 'cpu-0', contextSize, requirementBytes: peak.peakBytes, reason: model.name }),
      nowMs: () => performance.now(),
      budgetMs: 60_000,
    });
    // Headers in the answer; the estimates run after it, for the next call.
    const first = await catalog.list();
    expect(first.models.every((m) => m.read && m.fit === null)).toBe(true);
    expect(first.pending).toBe(first.models.length);
    await catalog.settled();
    const list = await catalog.list();
    expect(list.pending).toBe(0);
    const llama = list.models.find((m) => m.name === 'llama3.2:3b');
    expect(llama).toMatchObject({ quantization: 'Q8_0', trainContextSize: 2048, architecture: 'llama', read: true, problem: null, fit: { verdict: 'REJECT_CAPACITY', contextSize: 2048 } });
    expect(list.models.find((m) => m.name === 'someone/coder:latest')).toMatchObject({ trainContextSize: 512, fit: { verdict: 'ADMIT' } });
    expect(list.models.every((m) => m.sizeBytes > 0 && m.read)).toBe(true);
  });

  it('tries a failed estimate again on later calls, says why after the last try, and calls a file the estimator refuses unusable', async () => {
    const llamaBlob = fixture.expected.find((m) => m.name === 'llama3.2:3b')?.path;
    const coder = fixture.expected.find((m) => m.name === 'someone/coder:latest')?.path;
    let now = 0;
    let llamaTries = 0;
    const logged: string[] = [];
    const catalog = new ModelCatalog({
      places: () => placesOf(fixture.home),
      inspect: (path) => inspectModelFile(path),
      peak: async (path) => {
        if (path === coder) throw new ModelFileError(path, { code: 'MODEL_MALFORMED' }, 'tensor data past the end');
        if (path === llamaBlob && ++llamaTries <= ESTIMATE_TRIES) throw new EstimateError(path, 'the estimator exited with code 1');
        return { modelKey: path, peakBytes: 2 ** 20, peakSource: 'ESTIMATED', parts: null };
      },
      fit: (_model, peak, contextSize) => ({ verdict: 'ADMIT', gpuKey: 'cpu-0', contextSize, requirementBytes: peak.peakBytes, reason: '' }),
      nowMs: () => now,
      budgetMs: Number.POSITIVE_INFINITY,
      log: (line) => logged.push(line),
    });
    const llamaIn = async (): Promise<{ view: LocalModelView | undefined; pending: number }> => {
      await catalog.settled();
      const list = await catalog.list();
      return { view: list.models.find((m) => m.name === 'llama3.2:3b'), pending: list.pending };
    };
    await llamaIn(); // starts the estimates
    // Failed once: still pending (the dashboard asks again), not tried again within the second.
    let seen = await llamaIn();
    expect(seen.view).toMatchObject({ fit: null, fitProblem: null });
    expect(seen.pending).toBe(1);
    await llamaIn();
    expect(llamaTries).toBe(1);
    for (let tries = 2; tries <= ESTIMATE_TRIES; tries++) {
      now += ESTIMATE_RETRY_MS;
      await llamaIn(); // the call that tries again
      seen = await llamaIn();
      expect(llamaTries).toBe(tries);
    }
    // The last try failed: no longer pending, and the row says why.
    expect(seen.pending).toBe(0);
    expect(seen.view).toMatchObject({ fit: null, fitProblem: 'the estimator exited with code 1' });
    expect(logged).toHaveLength(ESTIMATE_TRIES);
    expect(logged[0]).toBe(`local models: estimating ${llamaBlob} failed (try 1 of ${ESTIMATE_TRIES}): the estimator exited with code 1`);
    // The refused file is unusable at once, never tried again, and not logged as a failure.
    const list = await catalog.list();
    expect(list.models.find((m) => m.name === 'someone/coder:latest')).toMatchObject({ problem: 'not a valid GGUF model (its header breaks the format) (tensor data past the end)', fit: null, fitProblem: null });
    // A minute on, it is tried again and its fit is known.
    now += ESTIMATE_RETRY_LATER_MS;
    await llamaIn();
    seen = await llamaIn();
    expect(seen.view).toMatchObject({ fit: { verdict: 'ADMIT' }, fitProblem: null });
  });

  it('follows a link only to a regular file, never walks a linked folder, never opens a FIFO, and stops at its depth', async () => {
    const home = join(dir, 'hostile');
    const models = join(home, 'models');
    mkdirSync(models, { recursive: true });
    writeGguf(join(dir, 'outside.gguf'), TINY_GGUF_SPEC, { sparse: true });
    symlinkSync(join(dir, 'outside.gguf'), join(models, 'linked.gguf')); // a regular file: listed
    execFileSync('mkfifo', [join(dir, 'fifo.gguf')]);
    symlinkSync(join(dir, 'fifo.gguf'), join(models, 'fifo-link.gguf'));
    execFileSync('mkfifo', [join(models, 'fifo.gguf')]);
    mkdirSync(join(dir, 'elsewhere'));
    writeGguf(join(dir, 'elsewhere', 'hidden.gguf'), TINY_GGUF_SPEC, { sparse: true });
    symlinkSync(join(dir, 'elsewhere'), join(models, 'linked-folder'));
    symlinkSync(models, join(models, 'loop'));
    symlinkSync(join(dir, 'elsewhere'), join(models, 'folder.gguf'));
    symlinkSync(join(dir, 'missing.gguf'), join(models, 'dangling.gguf'));
    let deep = models;
    for (let i = 0; i < 8; i++) deep = join(deep, `d${i}`);
    mkdirSync(deep, { recursive: true });
    writeGguf(join(deep, 'too-deep.gguf'), TINY_GGUF_SPEC, { sparse: true });
    const started = performance.now();
    const scan = await scanModels(placesOf(home));
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(scan.models.map((m) => m.name)).toEqual(['linked']);
  });

  it('stops at its entry limit and says so', async () => {
    const scan = await scanModels(placesOf(fixture.home), { maxEntries: 5, maxFiles: 100 });
    expect(scan.truncated).toBe(true);
  });

  it('names', () => {
    expect(ollamaName('registry.ollama.ai', 'library', 'llama3.2', '3b')).toBe('llama3.2:3b');
    expect(ollamaName('registry.ollama.ai', 'me', 'm', 'latest')).toBe('me/m:latest');
    expect(ollamaName('hf.co', 'org', 'repo', 'Q4_K_M')).toBe('hf.co/org/repo:Q4_K_M');
    expect(modelName(['models--org--repo', 'snapshots', 'abc', 'sub', 'm.Q4_K_M.gguf'])).toBe('org/repo/sub/m.Q4_K_M');
    expect(modelName(['pub', 'repo', 'file.gguf'])).toBe('pub/repo/file');
    expect(isModelFileName('a-00001-of-00003.gguf')).toBe(true);
    expect(isModelFileName('a-00002-of-00003.gguf')).toBe(false);
    expect(isModelFileName('mmproj-f16.gguf')).toBe(false);
    expect(isModelFileName('model.GGUF')).toBe(true);
    expect(isModelFileName('model.bin')).toBe(false);
    expect(namesModelFile(`/home/u/.ollama/models/blobs/sha256-${'a'.repeat(64)}`)).toBe(true);
    expect(namesModelFile('/m/x.GGUF')).toBe(true);
    expect(namesModelFile('/etc/passwd')).toBe(false);
    expect(namesModelFile(`/somewhere/sha256-${'a'.repeat(64)}`)).toBe(false);
    expect([15, 7, 1, 0, 32, 999, null].map((t) => quantizationName(t))).toEqual(['Q4_K_M', 'Q8_0', 'F16', 'F32', 'BF16', null, null]);
  });

  it('finds each tool\'s folder where it keeps it on each OS, and where its variable says', () => {
    const linux = modelPlaces('linux', {}, '/home/u').map((p) => `${p.source} ${p.dir}`);
    expect(linux).toEqual([
      'ollama /home/u/.ollama/models',
      'ollama /usr/share/ollama/.ollama/models',
      'lm-studio /home/u/.lmstudio/models',
      'lm-studio /home/u/.cache/lm-studio/models',
      'hugging-face /home/u/.cache/huggingface/hub',
      'llama.cpp /home/u/.cache/llama.cpp',
      'models /home/u/models',
    ]);
    const env = { OLLAMA_MODELS: '/data/ollama', HF_HOME: '/data/hf', LLAMA_CACHE: '/data/llama', XDG_CACHE_HOME: '/c' };
    expect(modelPlaces('linux', env, '/home/u', ['/extra']).map((p) => p.dir)).toEqual(['/data/ollama', '/home/u/.lmstudio/models', '/home/u/.cache/lm-studio/models', '/data/hf/hub', '/data/llama', '/home/u/models', '/extra']);
    expect(modelPlaces('linux', { HF_HUB_CACHE: '/hub' }, '/home/u').find((p) => p.source === 'hugging-face')?.dir).toBe('/hub');
    expect(modelPlaces('darwin', {}, '/Users/u').find((p) => p.source === 'llama.cpp')?.dir).toBe('/Users/u/Library/Caches/llama.cpp');
    const windows = modelPlaces('win32', { LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' }, 'C:\\Users\\u');
    expect(windows.map((p) => p.dir)).toEqual([
      'C:\\Users\\u\\.ollama\\models',
      'C:\\Users\\u\\.lmstudio\\models',
      'C:\\Users\\u\\.cache\\lm-studio\\models',
      'C:\\Users\\u\\.cache\\huggingface\\hub',
      'C:\\Users\\u\\AppData\\Local\\llama.cpp',
      'C:\\Users\\u\\models',
    ]);
  });

  it('a folder of 1,000 model files: the walk, the first answer within its budget, the whole list, and again (figures printed)', async () => {
    const big = join(dir, 'thousand');
    const models = join(big, 'models');
    mkdirSync(models, { recursive: true });
    const one = join(dir, 'one.gguf');
    writeGguf(one, TINY_GGUF_SPEC, { sparse: true });
    for (let i = 0; i < 1000; i++) copyFileSync(one, join(models, `m${String(i).padStart(4, '0')}.gguf`));
    writeFileSync(join(models, 'README.md'), 'not a model');
    const places = placesOf(big);
    let t = performance.now();
    const scan = await scanModels(places);
    const walkMs = performance.now() - t;
    expect(scan.models).toHaveLength(1000);
    const catalog = (budgetMs: number): ModelCatalog => new ModelCatalog({ places: () => places, inspect: (path) => inspectModelFile(path), nowMs: () => performance.now(), budgetMs });
    const budgeted = catalog(800);
    t = performance.now();
    const first = await budgeted.list();
    const firstMs = performance.now() - t;
    const whole = catalog(Number.POSITIVE_INFINITY);
    t = performance.now();
    const all = await whole.list();
    const wholeMs = performance.now() - t;
    t = performance.now();
    const again = await whole.list();
    const againMs = performance.now() - t;
    expect(all.pending).toBe(0);
    expect(again.models.every((m) => m.read && m.quantization === 'Q8_0')).toBe(true);
    expect(first.models).toHaveLength(1000);
    process.stdout.write(
      `1,000 model files: walk ${walkMs.toFixed(0)} ms; first answer ${firstMs.toFixed(0)} ms with ${1000 - first.pending} headers read (800 ms budget); every header ${wholeMs.toFixed(0)} ms; listed again (remembered) ${againMs.toFixed(0)} ms; load average ${loadavg()[0]?.toFixed(2) ?? '—'}\n`,
    );
  }, 120_000);
});
