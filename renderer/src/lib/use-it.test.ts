import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { baseUrlFor, MASK, modelIds, useItLines } from './use-it.js';

describe('use it', () => {
  it('gives the gateway\'s base URL and a curl line a shell reads back as the request', () => {
    expect(baseUrlFor(7787)).toBe('http://127.0.0.1:7787/v1');
    const lines = useItLines(7787, "it's", 'tok-en');
    // The shell splits the line into exactly the arguments curl needs (quotes inside survive).
    const argv = spawnSync('sh', ['-c', `printf '%s\\n' ${lines.curl.replace(/^curl /, '')}`], { encoding: 'utf8' }).stdout.trim().split('\n');
    expect(argv).toEqual(['-sS', 'http://127.0.0.1:7787/v1/chat/completions', '-H', 'Authorization: Bearer tok-en', '-H', 'Content-Type: application/json', '-d', expect.any(String)]);
    expect(JSON.parse(argv[7] ?? '')).toMatchObject({ model: "it's", messages: [{ role: 'user' }] });
  });

  it('shows the token masked and copies it in clear, in every line', () => {
    const shown = useItLines(7787, 'chat', MASK);
    const copied = useItLines(7787, 'chat', 'secret-token');
    for (const key of ['curl', 'python', 'javascript'] as const) {
      expect(shown[key]).not.toContain('secret-token');
      expect(shown[key]).toContain(MASK);
      expect(copied[key]).toContain('secret-token');
    }
    expect(copied.python).toContain('OpenAI(base_url="http://127.0.0.1:7787/v1", api_key="secret-token")');
    expect(copied.javascript).toContain('new OpenAI({ baseURL: "http://127.0.0.1:7787/v1", apiKey: "secret-token" })');
  });

  it("lists each profile's name as its own model id, then every capability once that no name or id shadows", () => {
    const profiles = [
      { id: 'chat-a', name: 'chat-a', capabilities: ['chat', 'code'] },
      { id: 'chat-b', name: 'chat-b', capabilities: ['chat'] },
      { id: 'embed', name: 'Embedder', capabilities: ['embed', 'embedder'] },
    ];
    // "embed" is a profile's id and leads there; "embedder" is not "Embedder": ids are exact.
    expect(modelIds(profiles)).toEqual(['chat-a', 'chat-b', 'Embedder', 'chat', 'code', 'embedder']);
    expect(modelIds([])).toEqual([]);
  });
});
