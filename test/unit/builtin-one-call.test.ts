/**
 * The direct steps' choice between gpu-share's one-call step (a binding built here) and the
 * binding's worker calls, against a recording fake of node-llama-cpp's native context: which call
 * a step takes, the fall-back for long steps, the event loop's turns, and the bookkeeping when
 * the native call throws. The real binding's tokens are held equal in builtin-steps.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { LlamaContextSequence, Token } from 'node-llama-cpp';
import { ONE_CALL_STEP_MAX_US, ONE_CALL_YIELD_US, openSteps, type Internals, type StepPathChoice } from '../../electron/core/engines/builtin/steps.js';

const busyWaitUs = (us: number): void => {
  const end = performance.now() + us / 1000;
  while (performance.now() < end) {
    // a step's decode
  }
};

interface FakeOptions {
  /** How long each one-call step takes, µs, by call number (0 for the rest). */
  oneCallUs?: (call: number) => number;
  /** Throws in the one-call step: 'decode' before the token reaches the cache, 'sample' after. */
  failAt?: { call: number; where: 'decode' | 'sample' };
}

function fakeEngine(options: FakeOptions = {}): { engine: { sequence: LlamaContextSequence; stepPath: StepPathChoice }; calls: string[]; sequence: { _sequenceId: number; _nextTokenIndex: number; _contextTokens: Token[] } } {
  const calls: string[] = [];
  const sequence = { _sequenceId: 0, _nextTokenIndex: 0, _contextTokens: [] as Token[] };
  let cacheEnd = -1;
  let batch: number[] = [];
  let oneCalls = 0;
  const nextToken = (position: number): Token => (((position * 7) % 50) + 1) as Token;
  const native = {
    initBatch: (size: number) => {
      calls.push(`initBatch ${size}`);
      batch = [];
    },
    addToBatch: (_sequenceId: number, first: number, tokens: Uint32Array) => {
      batch = Array.from(tokens, (_token, i) => first + i);
      return Uint32Array.of(tokens.length - 1);
    },
    decodeBatch: async () => {
      calls.push('decodeBatch');
      cacheEnd = Math.max(cacheEnd, ...batch);
    },
    sampleToken: async () => {
      calls.push('sampleToken');
      return nextToken(cacheEnd);
    },
    getSequenceKvCacheMaxPosition: () => cacheEnd,
    gpuShareDecodeStep: (_sequenceId: number, position: number) => {
      const call = oneCalls++;
      calls.push('oneCall');
      if (options.failAt?.call === call && options.failAt.where === 'decode') throw new Error('Eval has failed');
      busyWaitUs(options.oneCallUs?.(call) ?? 0);
      cacheEnd = position;
      if (options.failAt?.call === call) throw new Error('gpuShareDecodeStep: a sampler error');
      return nextToken(position);
    },
  };
  const internals: Internals = {
    native: native as unknown as Internals['native'],
    sequence,
    newSampler: () => ({ applyConfig: () => undefined, dispose: () => undefined }),
    batchSize: 512,
    contextSize: 4096,
    oneCallStep: true,
  };
  return { engine: { sequence: {} as LlamaContextSequence, stepPath: { path: 'direct', internals } }, calls, sequence };
}

const SETTINGS = { temperature: 0, topP: null, topK: null, seed: 1 };
const tokens = (...ids: number[]): Token[] => ids as Token[];

describe('direct steps: one native call a generated token', () => {
  it('takes the prompt through the worker calls and every generated token in one call, recording each', async () => {
    const { engine, calls, sequence } = fakeEngine();
    const steps = openSteps(engine, tokens(1, 2, 3), SETTINGS);
    const generated: (Token | null)[] = [];
    for (let i = 0; i < 4; i++) generated.push(await steps.next());
    await steps.close();
    expect(calls).toEqual(['initBatch 3', 'decodeBatch', 'sampleToken', 'oneCall', 'oneCall', 'oneCall']);
    expect(sequence._nextTokenIndex).toBe(6);
    expect(sequence._contextTokens).toEqual([1, 2, 3, ...generated.slice(0, 3)]);
  });

  it('gives a step longer than the limit back to the worker calls, and takes one call again once a step is short', async () => {
    const { engine, calls } = fakeEngine({ oneCallUs: (call) => (call === 1 ? ONE_CALL_STEP_MAX_US + 5_000 : 0) });
    const steps = openSteps(engine, tokens(1), SETTINGS);
    for (let i = 0; i < 5; i++) await steps.next();
    await steps.close();
    // A one-token prompt is a step like the others: one call, a long one call, then the worker
    // once, then short again: one call.
    expect(calls).toEqual(['initBatch 1', 'oneCall', 'oneCall', 'initBatch 1', 'decodeBatch', 'sampleToken', 'oneCall', 'oneCall']);
  });

  it(`lets the event loop turn at least every ${ONE_CALL_YIELD_US / 1000} ms of steps`, async () => {
    const stepUs = 1_000;
    const { engine } = fakeEngine({ oneCallUs: () => stepUs });
    const steps = openSteps(engine, tokens(1), SETTINGS);
    let turns = 0;
    const timer = setInterval(() => turns++, 0);
    const count = 60;
    try {
      for (let i = 0; i < count; i++) await steps.next();
    } finally {
      clearInterval(timer);
      await steps.close();
    }
    // Each step takes at least 1 ms, so at most five pass between turns (more turns on a slower
    // machine, never fewer). Without them a run of one-call steps starves timers and sockets
    // until the request ends: no turn at all.
    expect(turns).toBeGreaterThanOrEqual(Math.floor(count / (ONE_CALL_YIELD_US / stepUs + 1)) - 2);
  });

  it("lets the last token's write out before the next step holds the thread (Node's HTTP uncorks in a nextTick)", async () => {
    const { engine, calls } = fakeEngine();
    const steps = openSteps(engine, tokens(1), SETTINGS);
    try {
      for (let i = 0; i < 4; i++) {
        await steps.next();
        // What res.write leaves behind: the socket's uncork, in a nextTick.
        process.nextTick(() => calls.push('uncork'));
      }
    } finally {
      await steps.close();
    }
    // (The last one runs once this test's own microtasks are done.)
    expect(calls.filter((call) => call !== 'initBatch 1').slice(0, 7)).toEqual(['oneCall', 'uncork', 'oneCall', 'uncork', 'oneCall', 'uncork', 'oneCall']);
  });

  it("takes no turn of its own at a window's first step: the gate's wait before it was one", async () => {
    const { engine } = fakeEngine({ oneCallUs: () => 1_000 });
    const steps = openSteps(engine, tokens(1), SETTINGS);
    try {
      for (let window = 0; window < 3; window++) {
        // Between windows: the gate sleeps (a timer), longer than ONE_CALL_YIELD_US.
        await new Promise((resolve) => setTimeout(resolve, ONE_CALL_YIELD_US / 1000 + 2));
        let turned = false;
        setImmediate(() => (turned = true));
        await steps.next();
        expect(turned, `window ${window}`).toBe(false);
      }
    } finally {
      await steps.close();
    }
  });

  it('records a token the cache took before the sampler failed, and not one whose decode failed', async () => {
    for (const where of ['sample', 'decode'] as const) {
      const { engine, sequence } = fakeEngine({ failAt: { call: 2, where } });
      const steps = openSteps(engine, tokens(1), SETTINGS);
      await steps.next();
      await steps.next();
      const before = sequence._nextTokenIndex;
      await expect(steps.next()).rejects.toThrow(where === 'sample' ? /a sampler error/ : /Eval has failed/);
      await steps.close();
      expect(sequence._nextTokenIndex - before, where).toBe(where === 'sample' ? 1 : 0);
      expect(sequence._contextTokens).toHaveLength(sequence._nextTokenIndex);
    }
  });

  it('keeps to the worker calls when the binding has no one-call step', async () => {
    const { engine, calls } = fakeEngine();
    if (engine.stepPath.path === 'direct') engine.stepPath.internals.oneCallStep = false;
    const steps = openSteps(engine, tokens(1), SETTINGS);
    for (let i = 0; i < 3; i++) await steps.next();
    await steps.close();
    expect(calls.filter((call) => call === 'oneCall')).toHaveLength(0);
    expect(calls.filter((call) => call === 'decodeBatch')).toHaveLength(3);
  });
});
