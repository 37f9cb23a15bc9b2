/**
 * The built-in engine's ways of taking decode steps (engines/builtin/steps.ts) on a real tiny
 * model in this process: the direct one (node-llama-cpp's native context; each generated token in
 * one call when the binding was built here, `one-call`, or through the binding's worker calls,
 * `worker`) must generate what the binding's own `sequence.evaluate` generates, keep the
 * sequence's bookkeeping as the binding does (so that a prefix is reused between requests), and
 * split a prompt longer than a batch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getLlama, LlamaLogLevel, resolveChatWrapper, type Llama, type LlamaModel, type Token } from 'node-llama-cpp';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { buildPrompt, generate, type Engine, type GenerationResult } from '../../electron/core/engines/builtin/decode.js';
import { newDecodeCounters } from '../../electron/core/engines/builtin/metrics.js';
import type { CompletionRequest } from '../../electron/core/engines/builtin/openai-api.js';
import { chooseStepPath, reachInternals, samplerConfig, type StepPathChoice } from '../../electron/core/engines/builtin/steps.js';

let dir = '';
let llama: Llama;
let model: LlamaModel;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'builtin-steps-'));
  const path = join(dir, 'tiny.gguf');
  writeGguf(path, { ...TINY_GGUF_SPEC, contextLength: 512 });
  llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, usePrebuiltBinaries: true, progressLogs: false, logLevel: LlamaLogLevel.error });
  model = await llama.loadModel({ modelPath: path });
});

afterAll(async () => {
  await model?.dispose();
  await llama?.dispose();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

/** An engine on a fresh context, its steps taken the way `path` says ('direct': as chosen). */
async function engineOn(path: 'direct' | 'worker' | 'evaluate', batchSize?: number): Promise<Engine> {
  const context = await model.createContext({ contextSize: 256, sequences: 1, threads: 1, flashAttention: false, ...(batchSize === undefined ? {} : { batchSize }) });
  const sequence = context.getSequence();
  const choice = chooseStepPath({ llama, model, context, sequence });
  let stepPath: StepPathChoice = choice;
  if (path === 'evaluate') stepPath = { path: 'evaluate', why: 'the test asks for it' };
  else if (path === 'worker' && choice.path === 'direct') stepPath = { path: 'direct', internals: { ...choice.internals, oneCallStep: false } };
  return { llama, model, context, sequence, chatWrapper: resolveChatWrapper(model), stepPath };
}

function completion(prompt: string, extra: Partial<CompletionRequest> = {}): CompletionRequest {
  return { kind: 'completion', prompt, maxTokens: 24, temperature: 0, topP: null, topK: null, seed: null, stop: [], stream: false, includeUsage: false, ...extra };
}

async function run(engine: Engine, request: CompletionRequest): Promise<{ text: string; result: GenerationResult }> {
  let text = '';
  const result = await generate(engine, buildPrompt(engine, request), request, new AbortController().signal, (piece) => (text += piece), { afterStep: null, counters: newDecodeCounters(), arrivedUs: 0 });
  return { text, result };
}

const PROMPT = 'the quick brown fox jumps over the lazy dog and then';

describe('built-in engine decode steps', () => {
  it('takes the direct path on the pinned node-llama-cpp with a plain model, one call a token with the binding built here', async () => {
    const engine = await engineOn('direct');
    try {
      expect(engine.stepPath.path, engine.stepPath.path === 'evaluate' ? engine.stepPath.why : '').toBe('direct');
      // `npm run llama-binding:build` (CI runs it) patches the binding; its prebuilt binaries lack the call.
      if (engine.stepPath.path === 'direct') expect(engine.stepPath.internals.oneCallStep).toBe(llama.buildType === 'localBuild');
    } finally {
      await engine.context.dispose();
    }
  });

  it('keeps a decode team (more than one thread) on the worker calls', async () => {
    const context = await model.createContext({ contextSize: 256, sequences: 1, threads: 2, flashAttention: false });
    try {
      const choice = chooseStepPath({ llama, model, context, sequence: context.getSequence() });
      expect(choice.path).toBe('direct');
      if (choice.path === 'direct') expect(choice.internals.oneCallStep).toBe(false);
    } finally {
      await context.dispose();
    }
  });

  it('generates what sequence.evaluate generates, greedy and seeded, one call a token or through the worker, and leaves the same context tokens', async () => {
    const [direct, worker, evaluate] = [await engineOn('direct'), await engineOn('worker'), await engineOn('evaluate')];
    try {
      const seeded = [1, 2, 3, 4, 5, 6].map((seed) => completion(PROMPT, { temperature: 0.9, seed, maxTokens: 40 }));
      let seededTokens = 0;
      for (const request of [completion(PROMPT), completion('a', { maxTokens: 5 }), ...seeded]) {
        for (const engine of [direct, worker, evaluate]) await engine.sequence.clearHistory();
        const b = await run(evaluate, request);
        for (const [name, engine] of [['direct', direct], ['worker', worker]] as const) {
          const a = await run(engine, request);
          if (request.seed === null) expect(a.result.completionTokens, name).toBeGreaterThan(0);
          else if (name === 'direct') seededTokens += a.result.completionTokens;
          expect(a.text, name).toBe(b.text);
          expect({ ...a.result, promptUs: 0, predictUs: 0 }, name).toEqual({ ...b.result, promptUs: 0, predictUs: 0 });
          expect(engine.sequence.contextTokens, name).toEqual(evaluate.sequence.contextTokens);
          expect(engine.sequence.nextTokenIndex, name).toBe(evaluate.sequence.nextTokenIndex);
          // The prompt and every generated token were decoded, but for the last one sampled at the limit
          // (an end-of-generation token is sampled, never counted and never decoded).
          expect(engine.sequence.nextTokenIndex, name).toBe(a.result.promptTokens + a.result.completionTokens - (a.result.finishReason === 'length' ? 1 : 0));
        }
      }
      expect(seededTokens).toBeGreaterThan(0);
    } finally {
      for (const engine of [direct, worker, evaluate]) await engine.context.dispose();
    }
  });

  it("gpu-share's one-call step in the binding built here: a missing batch and a disposed context are errors, not crashes", async () => {
    const engine = await engineOn('direct');
    if (engine.stepPath.path !== 'direct' || !engine.stepPath.internals.oneCallStep) {
      await engine.context.dispose();
      return;
    }
    const { native, sequence } = engine.stepPath.internals;
    const step = native.gpuShareDecodeStep?.bind(native);
    const sampler = engine.stepPath.internals.newSampler();
    sampler.applyConfig(samplerConfig({ temperature: 0, topP: null, topK: null, seed: 1 }));
    const token = 1 as Token;
    try {
      expect(() => step?.(sequence._sequenceId, 0, token, sampler)).toThrow(/No batch is initialized/);
      expect(() => (step as unknown as (...args: unknown[]) => unknown)('x', 0, token, sampler)).toThrow(/gpuShareDecodeStep\(sequenceId, position, token, sampler\)/);
      native.initBatch(1);
      expect(step?.(sequence._sequenceId, 0, token, sampler)).toBeGreaterThanOrEqual(0);
    } finally {
      sampler.dispose();
      await engine.context.dispose();
    }
    expect(() => step?.(sequence._sequenceId, 1, token, sampler)).toThrow(/Context is disposed/);
  });

  it('reuses a cached prefix in the next request and answers as a fresh context does', async () => {
    const [warm, fresh] = [await engineOn('direct'), await engineOn('direct')];
    try {
      await run(warm, completion(PROMPT));
      const follow = completion(`${PROMPT} a cat sat on the mat`);
      const reused = await run(warm, follow);
      const cold = await run(fresh, follow);
      expect(reused.result.cachedTokens).toBeGreaterThan(5);
      expect(cold.result.cachedTokens).toBe(0);
      expect(reused.text).toBe(cold.text);
      expect(warm.sequence.contextTokens).toEqual(fresh.sequence.contextTokens);
    } finally {
      await warm.context.dispose();
      await fresh.context.dispose();
    }
  });

  it('splits a prompt longer than the batch into batches', async () => {
    const [small, whole] = [await engineOn('direct', 8), await engineOn('evaluate')];
    try {
      const long = completion(`${PROMPT} ${PROMPT} ${PROMPT}`);
      const a = await run(small, long);
      const b = await run(whole, long);
      expect(a.result.promptTokens).toBeGreaterThan(3 * 8);
      expect(a.text).toBe(b.text);
      expect(small.sequence.contextTokens).toEqual(whole.sequence.contextTokens);
    } finally {
      await small.context.dispose();
      await whole.context.dispose();
    }
  });

  it('ends at the context: the limit stops it before the binding would shift', async () => {
    const engine = await engineOn('direct');
    try {
      const { result } = await run(engine, completion(PROMPT, { maxTokens: 10_000, temperature: 0.9, seed: 3 }));
      // The tiny model rarely says EOG; either way nothing was decoded past the context's last slot.
      expect(engine.sequence.nextTokenIndex).toBeLessThanOrEqual(engine.context.contextSize - 1);
      if (result.finishReason === 'length') expect(result.contextFull).toBe(true);
    } finally {
      await engine.context.dispose();
    }
  });

  it('names what is missing when the binding is not the one it knows, and falls back to evaluate', async () => {
    const engine = await engineOn('direct');
    try {
      const withoutNative = { llama, model, sequence: engine.sequence, context: Object.create(engine.context, { _ctx: { value: undefined } }) as typeof engine.context };
      expect(reachInternals(withoutNative)).toMatch(/_ctx/);
      const choice = chooseStepPath(withoutNative);
      expect(choice.path).toBe('evaluate');
      expect(choice.path === 'evaluate' ? choice.why : '').toMatch(/node-llama-cpp lacks the context's native _ctx/);
      const withoutBookkeeping = { llama, model, context: engine.context, sequence: Object.create(engine.sequence, { _nextTokenIndex: { value: 'x' } }) as typeof engine.sequence };
      expect(reachInternals(withoutBookkeeping)).toMatch(/_nextTokenIndex/);
    } finally {
      await engine.context.dispose();
    }
  });
});

describe('samplerConfig', () => {
  it("is the binding's defaults, with a request's seed kept and a random one otherwise", () => {
    expect(samplerConfig({ temperature: 0.7, topP: null, topK: null, seed: 12.9 })).toEqual({ temperature: 0.7, minP: 0, topK: 40, topP: 0.95, seed: 12 });
    expect(samplerConfig({ temperature: -1, topP: 0.5, topK: 3, seed: null }, () => 99)).toEqual({ temperature: 0, minP: 0, topK: 3, topP: 0.5, seed: 99 });
  });
});
