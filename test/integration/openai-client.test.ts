/**
 * The gateway through the official `openai` npm client against a real `gpu-share serve` with a
 * built-in engine: models listed and retrieved, chat and completions streamed and not, `model` as
 * a profile's name (its model id), its id or a capability (echoed back as asked), and errors as the client
 * expects them (404 for an unknown model, 400 naming an unsupported parameter, 401).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { removeSegment } from '../fixtures/segments.js';
import { call, startServe, type Served } from '../fixtures/serve.js';

const KEY = `GPU-openai-${process.pid}`;
let dir = '';
let served: Served;
let client: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-openai-'));
  const tiny = join(dir, 'tiny.gguf');
  writeGguf(tiny, TINY_GGUF_SPEC);
  const sim = join(dir, 'sim.json');
  writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' }] }));
  served = await startServe({ dataDir: join(dir, 'data'), sim });
  const created = await call(served, 'POST', '/api/profiles', { id: 'tiny-chat', name: 'Tiny Chat', capabilities: ['chat'], engineKind: 'builtin', modelPath: tiny, contextSize: 256, threads: 1, priority: 'interactive' });
  expect(created.status).toBe(201);
  client = new OpenAI({ baseURL: `${served.base}/v1`, apiKey: served.token, maxRetries: 0, timeout: 60_000 });
}, 30_000);

afterAll(async () => {
  await served?.stop();
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
});

describe('the official openai client', () => {
  it('lists and retrieves models by capability, profile id and profile name', async () => {
    const listed = [];
    for await (const model of client.models.list()) listed.push(model.id);
    // The profile by its name (its own model id), then the capability it serves.
    expect(listed).toEqual(['Tiny Chat', 'chat']);
    for (const [id, canonical, owner] of [['chat', 'chat', 'capability'], ['tiny-chat', 'Tiny Chat', 'profile'], ['Tiny Chat', 'Tiny Chat', 'profile']] as const) {
      const model = await client.models.retrieve(id);
      expect(model.id).toBe(canonical);
      expect(model.object).toBe('model');
      expect(model.owned_by).toBe(owner);
    }
    await expect(client.models.retrieve('no-such-model')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('chats, not streamed and streamed, echoing the model as asked', async () => {
    const answer = await client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'Say hi.' }], max_tokens: 8, seed: 1 });
    expect(answer.model).toBe('chat');
    expect(answer.object).toBe('chat.completion');
    expect(answer.choices[0]?.message.role).toBe('assistant');
    expect(answer.usage?.completion_tokens).toBeGreaterThan(0);
    const stream = await client.chat.completions.create({ model: 'Tiny Chat', messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 8, seed: 1, stream: true });
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      expect(chunk.model).toBe('Tiny Chat');
      chunks++;
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(chunks).toBeGreaterThan(1);
    expect(typeof text).toBe('string');
  }, 60_000);

  it('completes, not streamed and streamed, by profile id', async () => {
    const answer = await client.completions.create({ model: 'tiny-chat', prompt: 'Once upon a time', max_tokens: 6, seed: 1 });
    expect(answer.model).toBe('tiny-chat');
    expect(answer.object).toBe('text_completion');
    expect(answer.choices[0]?.text).toBeTypeOf('string');
    const stream = await client.completions.create({ model: 'tiny-chat', prompt: 'Once upon a time', max_tokens: 6, seed: 1, stream: true });
    let chunks = 0;
    for await (const chunk of stream) {
      expect(chunk.model).toBe('tiny-chat');
      chunks++;
    }
    expect(chunks).toBeGreaterThan(0);
  }, 60_000);

  it('an unknown model is a NotFoundError with OpenAI’s error shape', async () => {
    const error = await client.chat.completions.create({ model: 'gpt-17', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    const apiError = error as InstanceType<typeof OpenAI.NotFoundError>;
    expect(apiError.status).toBe(404);
    expect(apiError.code).toBe('model_not_found');
    expect(apiError.param).toBe('model');
    expect(apiError.type).toBe('invalid_request_error');
  });

  it('an unsupported parameter is a 400 naming it, not silently ignored', async () => {
    const tools = await client.chat.completions
      .create({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }] })
      .catch((e: unknown) => e);
    expect(tools).toBeInstanceOf(OpenAI.BadRequestError);
    expect((tools as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tools');
    const format = await client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_object' } }).catch((e: unknown) => e);
    expect((format as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('response_format');
    const many = await client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'hi' }], n: 2 }).catch((e: unknown) => e);
    expect((many as InstanceType<typeof OpenAI.BadRequestError>).status).toBe(400);
    expect((many as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('n');
  });

  it('a wrong key is an AuthenticationError', async () => {
    const stranger = new OpenAI({ baseURL: `${served.base}/v1`, apiKey: 'not-the-token-0123456789', maxRetries: 0 });
    const error = await stranger.models.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((error as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');
  });
});
