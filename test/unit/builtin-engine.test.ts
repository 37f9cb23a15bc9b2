/** The built-in engine's pure parts, without starting an engine: request parsing, response and
 *  chunk shapes, errors, the Prometheus text, the port's door, stop strings, incremental text and
 *  the FIFO of waiting requests; llama-server's /completion and /props shapes. */
import { describe, expect, it } from 'vitest';
import { FifoLock, generate, StopMatcher, TokenTextStream, type Engine, type GenerationResult } from '../../electron/core/engines/builtin/decode.js';
import { newDecodeCounters } from '../../electron/core/engines/builtin/metrics.js';
import type { Token } from 'node-llama-cpp';
import { doorCheck, type HostDoor } from '../../electron/core/engines/builtin/http.js';
import { completionFinal, completionPiece, generationSettings, parseLlamaCompletionRequest, propsBody, stopTypeOf, timingsOf } from '../../electron/core/engines/builtin/llama-api.js';
import { formatMetrics, METRICS_CONTENT_TYPE } from '../../electron/core/engines/builtin/metrics.js';
import { engineFigures, parseEngineCounters } from '../../electron/core/engines/engine-figures.js';
import {
  completionBody,
  DEFAULT_MAX_TOKENS,
  DEFAULT_TEMPERATURE,
  errorBody,
  parseChatRequest,
  parseCompletionRequest,
  streamChunk,
  usageChunk,
  usageOf,
  type ResponseMeta,
} from '../../electron/core/engines/builtin/openai-api.js';
import { HUGE_PAGE_TUNABLE, bindingKeepsThreads, builtinHostEnv, defaultFlashAttention, defaultThreads, hostTunables, decodesWithCpuTeam } from '../../electron/core/engines/builtin/defaults.js';
import { parseHostArgs } from '../../electron/core/engines/builtin/engine-host.js';
import { allowedHosts } from '../../electron/core/api/http.js';
import { buildPropsBlock, type GpuPeersView } from '../../electron/core/registry/view.js';

describe('builtin engine: requests', () => {
  it('parses a chat body with defaults, roles mapped and text parts joined', () => {
    const parsed = parseChatRequest({
      messages: [
        { role: 'developer', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'hel' }, { type: 'text', text: 'lo' }] },
        { role: 'assistant', content: null },
      ],
    });
    expect(parsed).toEqual({
      ok: true,
      value: {
        kind: 'chat',
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hello' },
          { role: 'assistant', content: '' },
        ],
        maxTokens: DEFAULT_MAX_TOKENS,
        temperature: DEFAULT_TEMPERATURE,
        topP: null,
        topK: null,
        seed: null,
        stop: [],
        stream: false,
        includeUsage: false,
      },
    });
  });

  it('takes max_completion_tokens and n_predict for chat, drops empty stops, reads stream_options', () => {
    const parsed = parseChatRequest({ messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 7, stop: ['', 'END'], stream: true, stream_options: { include_usage: true }, temperature: 0, top_p: 0.5, top_k: 3, seed: 9 });
    expect(parsed.ok && parsed.value).toMatchObject({ maxTokens: 7, stop: ['END'], stream: true, includeUsage: true, temperature: 0, topP: 0.5, topK: 3, seed: 9 });
    const viaLlama = parseChatRequest({ messages: [{ role: 'user', content: 'x' }], n_predict: 5 });
    expect(viaLlama.ok && viaLlama.value.maxTokens).toBe(5);
  });

  it('parses a completion body (a string or an array of one string)', () => {
    expect(parseCompletionRequest({ prompt: 'abc', max_tokens: 4, stop: 'Z' })).toMatchObject({ ok: true, value: { kind: 'completion', prompt: 'abc', maxTokens: 4, stop: ['Z'] } });
    expect(parseCompletionRequest({ prompt: ['abc'] })).toMatchObject({ ok: true, value: { prompt: 'abc' } });
  });

  it('refuses bad bodies with a message naming the field', () => {
    const cases: Array<[unknown, string]> = [
      [null, 'body'],
      [[], 'body'],
      [{ messages: 'hi' }, 'messages'],
      [{ messages: [] }, 'messages'],
      [{ messages: [7] }, 'messages[0]'],
      [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].role'],
      [{ messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
      [{ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }, 'messages[0].content'],
      [{ messages: [{ role: 'user', content: 'x' }], max_tokens: 0 }, 'max_tokens'],
      [{ messages: [{ role: 'user', content: 'x' }], max_tokens: 'many' }, 'max_tokens'],
      [{ messages: [{ role: 'user', content: 'x' }], temperature: -1 }, 'temperature'],
      [{ messages: [{ role: 'user', content: 'x' }], top_p: 2 }, 'top_p'],
      [{ messages: [{ role: 'user', content: 'x' }], top_k: 1.5 }, 'top_k'],
      [{ messages: [{ role: 'user', content: 'x' }], seed: 'x' }, 'seed'],
      [{ messages: [{ role: 'user', content: 'x' }], n: 2 }, 'n'],
      [{ messages: [{ role: 'user', content: 'x' }], stop: [1] }, 'stop'],
      [{ messages: [{ role: 'user', content: 'x' }], stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }, 'stop'],
      [{ messages: [{ role: 'user', content: 'x' }], stream: 'yes' }, 'stream'],
      [{ messages: [{ role: 'user', content: 'x' }], stream_options: 1 }, 'stream_options'],
      [{ messages: [{ role: 'user', content: 'x' }], stream_options: { include_usage: 1 } }, 'stream_options.include_usage'],
    ];
    for (const [body, field] of cases) {
      const parsed = parseChatRequest(body);
      expect(parsed.ok, JSON.stringify(body)).toBe(false);
      if (!parsed.ok) expect(parsed.message.startsWith(field === 'body' ? 'the body' : field), `${JSON.stringify(body)}: ${parsed.message}`).toBe(true);
    }
    for (const body of [{ prompt: 42 }, { prompt: ['a', 'b'] }, {}]) {
      const parsed = parseCompletionRequest(body);
      expect(parsed.ok === false && parsed.message.startsWith('prompt'), JSON.stringify(body)).toBe(true);
    }
  });
});

describe('builtin engine: responses', () => {
  const chat: ResponseMeta = { kind: 'chat', id: 'chatcmpl-1', created: 1_700_000_000, model: 'tiny' };
  const text: ResponseMeta = { kind: 'completion', id: 'cmpl-1', created: 1_700_000_000, model: 'tiny' };
  const usage = usageOf(5, 3);

  it('counts usage', () => {
    expect(usage).toEqual({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
  });

  it('shapes whole responses as OpenAI does', () => {
    expect(completionBody(chat, 'hi', 'stop', usage)).toEqual({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1_700_000_000,
      model: 'tiny',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
      usage,
    });
    expect(completionBody(text, 'hi', 'length', usage)).toEqual({
      id: 'cmpl-1',
      object: 'text_completion',
      created: 1_700_000_000,
      model: 'tiny',
      choices: [{ index: 0, text: 'hi', logprobs: null, finish_reason: 'length' }],
      usage,
    });
  });

  it('shapes stream chunks and the usage chunk', () => {
    expect(streamChunk(chat, { content: 'a' }, null)).toEqual({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'tiny', choices: [{ index: 0, delta: { content: 'a' }, finish_reason: null }] });
    expect(streamChunk(chat, {}, 'stop')).toMatchObject({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    expect(streamChunk(text, 'a', null)).toEqual({ id: 'cmpl-1', object: 'text_completion', created: 1_700_000_000, model: 'tiny', choices: [{ index: 0, text: 'a', logprobs: null, finish_reason: null }] });
    expect(usageChunk(chat, usage)).toEqual({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'tiny', choices: [], usage });
  });

  it('shapes errors with the type their status implies', () => {
    expect(errorBody(400, 'invalid_request', 'bad')).toEqual({ error: { message: 'bad', type: 'invalid_request_error', param: null, code: 'invalid_request' } });
    expect(errorBody(503, 'loading', 'wait')).toEqual({ error: { message: 'wait', type: 'server_error', param: null, code: 'loading' } });
  });
});

describe('builtin engine: metrics', () => {
  it("writes llama-server's metric names, help and types, and 0 for a value that is not finite", () => {
    const text = formatMetrics({ promptTokensTotal: 12, promptSecondsTotal: 0.5, tokensPredictedTotal: 30, tokensPredictedSecondsTotal: Number.NaN, decodeTotal: 31, firstTokenSecondsTotal: 0.75, firstTokensTotal: 3, requestsProcessing: 1, requestsDeferred: 2 });
    expect(text).toBe(
      [
        '# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.',
        '# TYPE llamacpp:prompt_tokens_total counter',
        'llamacpp:prompt_tokens_total 12',
        '# HELP llamacpp:prompt_seconds_total Prompt process time',
        '# TYPE llamacpp:prompt_seconds_total counter',
        'llamacpp:prompt_seconds_total 0.5',
        '# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.',
        '# TYPE llamacpp:tokens_predicted_total counter',
        'llamacpp:tokens_predicted_total 30',
        '# HELP llamacpp:tokens_predicted_seconds_total Predict process time',
        '# TYPE llamacpp:tokens_predicted_seconds_total counter',
        'llamacpp:tokens_predicted_seconds_total 0',
        '# HELP llamacpp:n_decode_total Total number of llama_decode() calls',
        '# TYPE llamacpp:n_decode_total counter',
        'llamacpp:n_decode_total 31',
        '# HELP llamacpp:requests_processing Number of requests processing.',
        '# TYPE llamacpp:requests_processing gauge',
        'llamacpp:requests_processing 1',
        '# HELP llamacpp:requests_deferred Number of requests deferred.',
        '# TYPE llamacpp:requests_deferred gauge',
        'llamacpp:requests_deferred 2',
        "# HELP gpushare_time_to_first_token_seconds Time from a request's arrival to its first token.",
        '# TYPE gpushare_time_to_first_token_seconds summary',
        'gpushare_time_to_first_token_seconds_sum 0.75',
        'gpushare_time_to_first_token_seconds_count 3',
        '',
      ].join('\n'),
    );
    // What the dashboard reads back from it: 0.75 s over 3 requests.
    const read = parseEngineCounters(text);
    expect(read).toEqual({ tokensPredicted: 30, ttftSecondsSum: 0.75, ttftCount: 3 });
    expect(engineFigures(null, { counters: read, atMs: 0 }, null).timeToFirstTokenMs).toBe(250);
    expect(METRICS_CONTENT_TYPE).toMatch(/^text\/plain; version=0\.0\.4/);
  });
});

describe("builtin engine: the port's door", () => {
  const door: HostDoor = { allowedHosts: allowedHosts(8123), secret: 's3cret' };
  const req = (method: string, headers: Record<string, string>): { method: string; headers: Record<string, string> } => ({ method, headers });
  const good = { host: '127.0.0.1:8123', 'content-type': 'application/json; charset=utf-8', authorization: 'Bearer s3cret' };

  it('lets a loopback JSON request with the secret through, and reads without a secret', () => {
    expect(doorCheck(req('POST', good), door)).toBeNull();
    expect(doorCheck(req('POST', { ...good, authorization: 'bearer s3cret' }), door)).toBeNull();
    expect(doorCheck(req('GET', { host: 'localhost:8123' }), door)).toBeNull();
    expect(doorCheck(req('POST', { host: '[::1]:8123', 'content-type': 'application/json' }), { ...door, secret: null })).toBeNull();
  });

  it('refuses another Host, another content type and a missing or wrong secret', () => {
    expect(doorCheck(req('GET', { host: 'attacker.example:8123' }), door)).toMatchObject({ status: 403, code: 'forbidden' });
    expect(doorCheck(req('GET', { host: '127.0.0.1:9999' }), door)).toMatchObject({ status: 403 });
    expect(doorCheck(req('GET', {}), door)).toMatchObject({ status: 403 });
    expect(doorCheck(req('POST', { ...good, 'content-type': 'text/plain' }), door)).toMatchObject({ status: 415, code: 'unsupported_media_type' });
    const { authorization: _, ...noSecret } = good;
    expect(doorCheck(req('POST', noSecret), door)).toMatchObject({ status: 401, code: 'invalid_api_key' });
    expect(doorCheck(req('POST', { ...good, authorization: 'Bearer nope' }), door)).toMatchObject({ status: 401 });
  });
});

describe('builtin engine: text', () => {
  it('holds back what may start a stop string and cuts at the first stop', () => {
    const stops = new StopMatcher(['</s>', 'STOP']);
    expect(stops.push('hello <')).toEqual({ text: 'hello ', stopped: false });
    expect(stops.push('b> ST')).toEqual({ text: '<b> ', stopped: false });
    expect(stops.push('OP and more')).toEqual({ text: '', stopped: true });
    const tail = new StopMatcher(['END']);
    expect(tail.push('almost EN')).toEqual({ text: 'almost ', stopped: false });
    expect(tail.flush()).toBe('EN');
  });

  it('holds a token that ends mid-character until the character completes, for at most 4 tokens', () => {
    const bytes = new Map<number, number[]>([
      [1, [0x68]],
      [2, [0xc3]],
      [3, [0xa9]],
      [4, [0xf0]],
    ]);
    const decode = (tokens: readonly number[]): string => Buffer.from(tokens.flatMap((t) => bytes.get(t) ?? [])).toString('utf8');
    const stream = new TokenTextStream<number>((pending) => decode(pending));
    expect(stream.push(1)).toBe('h');
    expect(stream.push(2)).toBe('');
    expect(stream.push(3)).toBe('é');
    expect(stream.push(4)).toBe('');
    expect(stream.flush()).toBe('\uFFFD');
    expect(stream.flush()).toBe('');
  });
});

describe('builtin engine: the FIFO of waiting requests', () => {
  it('serves in order, skips one that gave up while queued, and turns the rest away at shutdown', async () => {
    const lock = new FifoLock();
    const order: string[] = [];
    const first = await lock.acquire(new AbortController().signal);
    expect(lock.busy).toBe(true);
    const gaveUp = new AbortController();
    const b = lock.acquire(new AbortController().signal).then((release) => {
      order.push('b');
      return release;
    });
    const c = lock.acquire(gaveUp.signal).then(
      () => order.push('c'),
      () => order.push('c aborted'),
    );
    const d = lock.acquire(new AbortController().signal);
    expect(lock.waiting).toBe(3);
    gaveUp.abort();
    await c;
    expect(lock.waiting).toBe(2);
    first();
    const releaseB = await b;
    expect(order).toEqual(['c aborted', 'b']);
    lock.rejectWaiting(new Error('shutting down'));
    await expect(d).rejects.toThrow('shutting down');
    releaseB();
    expect(lock.busy).toBe(false);
  });
});

describe("builtin engine: llama-server's shapes", () => {
  const result: GenerationResult = { promptTokens: 9, cachedTokens: 4, completionTokens: 6, finishReason: 'length', stopWord: null, contextFull: false, promptUs: 40_000, predictUs: 60_000, aborted: false };

  it('parses a /completion body: n_predict -1 or absent runs to the context end, 0 is allowed, seed -1 is random', () => {
    const parsed = parseLlamaCompletionRequest({ prompt: 'abc', stream: true, stop: ['\n'], seed: -1 });
    expect(parsed).toEqual({ ok: true, value: { kind: 'completion', prompt: 'abc', maxTokens: Number.POSITIVE_INFINITY, temperature: DEFAULT_TEMPERATURE, topP: null, topK: null, seed: null, stop: ['\n'], stream: true, includeUsage: false } });
    expect(parseLlamaCompletionRequest({ prompt: ['abc'], n_predict: -1 })).toMatchObject({ ok: true, value: { maxTokens: Number.POSITIVE_INFINITY } });
    expect(parseLlamaCompletionRequest({ prompt: 'abc', n_predict: 0, seed: 7 })).toMatchObject({ ok: true, value: { maxTokens: 0, seed: 7 } });
    expect(parseLlamaCompletionRequest({ prompt: 'abc', max_tokens: 3 })).toMatchObject({ ok: true, value: { maxTokens: 3 } });
    expect(parseLlamaCompletionRequest({ prompt: 'abc', grammar: '', n_probs: 0, logit_bias: [], lora: [], n_cmpl: 1, ignore_eos: false }).ok).toBe(true);
  });

  it('refuses a bad /completion body naming the field, and what it would silently get wrong', () => {
    const cases: Array<[unknown, string | null]> = [
      ['x', null],
      [{}, 'prompt'],
      [{ prompt: [1, 2, 3] }, 'prompt'],
      [{ prompt: ['a', 'b'] }, 'prompt'],
      [{ prompt: 'x', n_predict: -2 }, 'n_predict'],
      [{ prompt: 'x', n_predict: 1.5 }, 'n_predict'],
      [{ prompt: 'x', top_k: -1 }, 'top_k'],
      [{ prompt: 'x', grammar: 'root ::= "a"' }, 'grammar'],
      [{ prompt: 'x', json_schema: {} }, 'json_schema'],
      [{ prompt: 'x', n_probs: 3 }, 'n_probs'],
      [{ prompt: 'x', n_cmpl: 2 }, 'n_cmpl'],
      [{ prompt: 'x', logit_bias: [[15043, 1]] }, 'logit_bias'],
      [{ prompt: 'x', lora: [{ id: 0, scale: 1 }] }, 'lora'],
      [{ prompt: 'x', image_data: [] }, 'image_data'],
      [{ prompt: 'x', ignore_eos: true }, 'ignore_eos'],
    ];
    for (const [body, param] of cases) {
      const parsed = parseLlamaCompletionRequest(body);
      expect(parsed.ok, JSON.stringify(body)).toBe(false);
      if (!parsed.ok) {
        expect(parsed.param, JSON.stringify(body)).toBe(param);
        if (param !== null) expect(parsed.message.startsWith(param)).toBe(true);
      }
    }
  });

  it('says why a generation stopped as llama-server does', () => {
    expect(stopTypeOf({ finishReason: 'length', stopWord: null })).toBe('limit');
    expect(stopTypeOf({ finishReason: 'stop', stopWord: '\n' })).toBe('word');
    expect(stopTypeOf({ finishReason: 'stop', stopWord: null })).toBe('eos');
  });

  it('shapes timings, leaving out a rate it cannot compute', () => {
    expect(timingsOf(result)).toEqual({ prompt_n: 5, prompt_ms: 40, prompt_per_token_ms: 8, prompt_per_second: 125, predicted_n: 6, predicted_ms: 60, predicted_per_token_ms: 10, predicted_per_second: 100 });
    expect(timingsOf({ ...result, completionTokens: 0, predictUs: 0 })).toMatchObject({ predicted_n: 0, predicted_ms: 0 });
    expect(timingsOf({ ...result, completionTokens: 0, predictUs: 0 })).not.toHaveProperty('predicted_per_second');
  });

  it('shapes the /completion answer, its stream pieces and settings without inventing sampler values', () => {
    const parsed = parseLlamaCompletionRequest({ prompt: 'abc', n_predict: 6, stop: ['END'] });
    if (!parsed.ok) throw new Error(parsed.message);
    expect(completionPiece('hi', { evaluated: 5, predicted: 3 })).toEqual({ index: 0, content: 'hi', stop: false, id_slot: 0, tokens_predicted: 3, tokens_evaluated: 5 });
    expect(completionFinal('text', parsed.value, { ...result, finishReason: 'stop', stopWord: 'END' }, 256, 'tiny')).toEqual({
      index: 0,
      content: 'text',
      id_slot: 0,
      stop: true,
      model: 'tiny',
      tokens_predicted: 6,
      tokens_evaluated: 9,
      tokens_cached: 4,
      generation_settings: { n_ctx: 256, n_predict: 6, model: 'tiny', temperature: DEFAULT_TEMPERATURE, stop: ['END'], stream: false },
      truncated: false,
      stop_type: 'word',
      stopping_word: 'END',
      timings: timingsOf(result),
    });
    const unlimited = parseLlamaCompletionRequest({ prompt: 'abc', top_k: 5, seed: 3 });
    if (!unlimited.ok) throw new Error(unlimited.message);
    expect(generationSettings(unlimited.value, 256, 'tiny')).toMatchObject({ n_predict: -1, top_k: 5, seed: 3 });
    expect(generationSettings(unlimited.value, 256, 'tiny')).not.toHaveProperty('top_p');
  });

  it("shapes /props: what it knows, n_ctx only once loaded, and serve's gpu_share block, enabled or not", () => {
    const unpaced = { gpuKey: null, unpacedBecause: 'started without a GPU registry (no --gpu-key)' };
    const facts = { alias: 'tiny', modelPath: '/m/tiny.gguf', nCtx: null, isProcessing: false, chatTemplate: null, peers: unpaced };
    const loading = propsBody(facts);
    expect(loading).toEqual({
      default_generation_settings: { id: 0, is_processing: false, params: { n_predict: -1, temperature: DEFAULT_TEMPERATURE, stop: [] } },
      total_slots: 1,
      model_path: '/m/tiny.gguf',
      model_alias: 'tiny',
      modalities: { vision: false, audio: false },
      // Always there: unpaced says so, with the reason, instead of leaving the block out.
      opencoti: { gpu_share: { enabled: false, gpu_key: '', self: null, peers: [], reason: 'started without a GPU registry (no --gpu-key)' } },
    });
    const refused = propsBody({ ...facts, peers: { gpuKey: 'cpu-0', unpacedBecause: 'registry full (16 slots)' } });
    expect(refused.opencoti.gpu_share).toEqual({ enabled: false, gpu_key: 'cpu-0', self: null, peers: [], reason: 'registry full (16 slots)' });
    const view: GpuPeersView = { gpu_key: 'k', self: { pid: 1, name: 'tiny', weight: 2, share_pct: 100, busy_pct: 50, active: true }, peers: [] };
    const ready = propsBody({ ...facts, nCtx: 256, isProcessing: true, chatTemplate: '{{ x }}', peers: view });
    expect(ready).toMatchObject({ default_generation_settings: { n_ctx: 256, is_processing: true }, chat_template: '{{ x }}' });
    expect(ready.opencoti).toEqual(buildPropsBlock(view, true).opencoti);
  });
});

describe('builtin engine: default threads', () => {
  it('leaves one physical core free on the CPU with a binding that starts its threads for every token, at least one thread', () => {
    // node-llama-cpp's own default was every math core (2 on the 2-core CI machine, 3–141 tok/s).
    const prebuilt = { keepsThreads: false, offloadedLayers: 0, totalLayers: 5 };
    expect(defaultThreads({ ...prebuilt, mathCores: 2 })).toBe(1);
    expect(defaultThreads({ ...prebuilt, mathCores: 16 })).toBe(15);
    expect(defaultThreads({ ...prebuilt, mathCores: 1 })).toBe(1);
  });

  it('decodes on every physical core with a binding that keeps its thread team (OpenMP), as llama-server does', () => {
    const built = { keepsThreads: true, offloadedLayers: 0, totalLayers: 5 };
    expect(defaultThreads({ ...built, mathCores: 2 })).toBe(2);
    expect(defaultThreads({ ...built, mathCores: 16 })).toBe(16);
    expect(defaultThreads({ ...built, mathCores: 0 })).toBe(1);
    expect(defaultThreads({ ...built, mathCores: 16, offloadedLayers: 5 })).toBe(1);
  });

  it('keeps one thread when every layer is on a GPU, and the CPU default when only some are', () => {
    expect(defaultThreads({ mathCores: 16, keepsThreads: false, offloadedLayers: 5, totalLayers: 5 })).toBe(1);
    expect(defaultThreads({ mathCores: 16, keepsThreads: false, offloadedLayers: 3, totalLayers: 5 })).toBe(15);
    // A model whose layer count is unknown (0) is not taken as offloaded.
    expect(defaultThreads({ mathCores: 8, keepsThreads: false, offloadedLayers: 0, totalLayers: 0 })).toBe(7);
  });

  it('decodes with a team of CPU threads with more than one thread and layers on the CPU', () => {
    expect(decodesWithCpuTeam({ threads: 2, offloadedLayers: 0, totalLayers: 5 })).toBe(true);
    expect(decodesWithCpuTeam({ threads: 16, offloadedLayers: 3, totalLayers: 5 })).toBe(true);
    expect(decodesWithCpuTeam({ threads: 1, offloadedLayers: 0, totalLayers: 5 })).toBe(false);
    // Every layer on a GPU: the CPU threads only feed it.
    expect(decodesWithCpuTeam({ threads: 4, offloadedLayers: 5, totalLayers: 5 })).toBe(false);
  });

  it('reads whether the binding keeps its threads from llama.cpp\'s system info', () => {
    // As node-llama-cpp's prebuilt binary and a build made on this machine print it.
    expect(bindingKeepsThreads('CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | LLAMAFILE = 1 | REPACK = 1 | ')).toBe(false);
    expect(bindingKeepsThreads('CPU : SSE3 = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ')).toBe(true);
    expect(bindingKeepsThreads('CPU : OPENMP = 0 | REPACK = 1 | ')).toBe(false);
    expect(bindingKeepsThreads('')).toBe(false);
  });

  it('runs the host with one libuv pool thread (every decode from one thread), OpenMP threads that sleep soon after a window and, on Linux at the default threads, each on its own core', () => {
    const everywhere = { UV_THREADPOOL_SIZE: '1', GOMP_SPINCOUNT: '10000' };
    const pages = { GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' };
    expect(builtinHostEnv(null, 'win32', {})).toEqual(everywhere);
    expect(builtinHostEnv(4, 'darwin', {})).toEqual(everywhere);
    expect(builtinHostEnv(null, 'linux', {})).toEqual({ ...everywhere, OMP_PROC_BIND: 'close', OMP_PLACES: 'cores', ...pages });
    // Threads a profile set stay unbound: every such engine would be bound to the same first cores.
    expect(builtinHostEnv(2, 'linux', {})).toEqual({ ...everywhere, ...pages });
    // One thread has no team to keep together: libuv's pool as it is, nothing bound; huge pages all the same.
    expect(builtinHostEnv(1, 'linux', {})).toEqual(pages);
    expect(builtinHostEnv(1, 'win32', {})).toEqual({});
  });

  it("asks glibc's malloc for huge pages on Linux, after whatever tunables the host would inherit, and leaves an inherited huge-page choice alone", () => {
    expect(hostTunables(undefined)).toBe(HUGE_PAGE_TUNABLE);
    expect(hostTunables('')).toBe(HUGE_PAGE_TUNABLE);
    expect(hostTunables('glibc.malloc.arena_max=2')).toBe('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1');
    expect(hostTunables('glibc.malloc.hugetlb=0')).toBe('glibc.malloc.hugetlb=0');
    expect(hostTunables('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2')).toBe('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2');
    expect(builtinHostEnv(null, 'linux', { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })['GLIBC_TUNABLES']).toBe('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1');
    expect(builtinHostEnv(null, 'darwin', { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })['GLIBC_TUNABLES']).toBeUndefined();
  });
});

describe('builtin engine: default flash attention', () => {
  it('is off while any layer runs on the CPU (the prebuilt CPU kernel is slow), llama.cpp\'s choice with every layer on a GPU', () => {
    expect(defaultFlashAttention({ offloadedLayers: 0, totalLayers: 5 })).toBe(false);
    expect(defaultFlashAttention({ offloadedLayers: 3, totalLayers: 5 })).toBe(false);
    expect(defaultFlashAttention({ offloadedLayers: 0, totalLayers: 0 })).toBe(false);
    expect(defaultFlashAttention({ offloadedLayers: 5, totalLayers: 5 })).toBeUndefined();
  });

  it('--flash-attn on|off|auto says otherwise; anything else is refused by name', () => {
    const base = ['--model', '/m/x.gguf', '--ctx', '256'];
    const flash = (extra: string[]): unknown => {
      const parsed = parseHostArgs([...base, ...extra]);
      return parsed.ok ? parsed.options.flashAttention : parsed.message;
    };
    expect(flash([])).toBeNull();
    expect(flash(['--flash-attn', 'on'])).toBe(true);
    expect(flash(['--flash-attn', 'off'])).toBe(false);
    expect(flash(['--flash-attn', 'auto'])).toBeNull();
    expect(flash(['--flash-attn', 'yes'])).toBe('--flash-attn must be "on", "off" or "auto" (got "yes")');
  });
});

describe('builtin engine: where the gate sits between decode steps', () => {
  /** An engine whose sequence yields the given tokens, one per step, and whose text for a token
   *  is `t<id> `; nothing else of node-llama-cpp is used by generate(). */
  function fakeEngine(tokens: number[]): Engine {
    const sequence = {
      contextSize: 1024,
      nextTokenIndex: 0,
      compareContextTokens: () => ({ firstDifferentIndex: 0 }),
      eraseContextTokenRanges: async () => undefined,
      evaluate: async function* () {
        for (const token of tokens) yield token;
      },
    };
    const model = { detokenize: (pending: readonly number[]) => pending.map((t) => `t${t} `).join(''), isEogToken: () => false };
    return { sequence, model, stepPath: { path: 'evaluate', why: 'a fake sequence' } } as unknown as Engine;
  }
  const request = { maxTokens: 3, temperature: 1, topP: null, topK: null, seed: null, stop: [], stream: true, includeUsage: false };

  it("sends each token before the gate may hold the next step, and answers a request's end without a wait", async () => {
    const events: string[] = [];
    const result = await generate(
      fakeEngine([10, 11, 12, 13]),
      { tokens: [1, 2] as unknown as Token[], stops: [], stopTokens: new Set() },
      request,
      new AbortController().signal,
      (text) => events.push(`text ${text.trim()}`),
      { afterStep: async () => void events.push('gate'), counters: newDecodeCounters(), arrivedUs: 0 },
    );
    expect(result.completionTokens).toBe(3);
    // Before: the gate ran after each step and before its token went out, and after the last one too.
    // The first gate is the prompt's (its evaluation starts inside our window).
    expect(events).toEqual(['gate', 'text t10', 'gate', 'text t11', 'gate', 'text t12']);
  });
});
