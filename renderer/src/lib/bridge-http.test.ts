/**
 * The HTTP bridge against a real node:http server: what goes on the wire (method, path, token,
 * body), how errors come back, and the event stream across chunk splits, breaks and reconnects.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError, HTTP_ROUTES, type AppEvent } from '../../../electron/core/contract.js';
import { errorFromResponse, HttpBridge, routePath } from './bridge-http.js';
import type { ConnectionStatus } from './connection.js';
import { appState, engineView, placementPlan } from '../test/fixtures.js';

const TOKEN = 'tok_0123456789abcdefghijklmnopqrstuv';

interface Seen {
  method: string;
  url: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: unknown;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: unknown) => void;

let server: Server;
let baseUrl: string;
let seen: Seen[];
let handler: Handler;
let bridges: HttpBridge[];

const json = (res: ServerResponse, status: number, value: unknown): void => {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(value));
};

beforeEach(async () => {
  seen = [];
  bridges = [];
  handler = (_req, res) => json(res, 200, {});
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const body: unknown = text === '' ? undefined : JSON.parse(text);
      seen.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, contentType: req.headers['content-type'], body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  for (const bridge of bridges) bridge.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const bridge = (): HttpBridge => {
  const b = new HttpBridge({ baseUrl: `${baseUrl}/`, token: TOKEN, backoff: { initialMs: 20, maxMs: 80 } });
  bridges.push(b);
  return b;
};

const waitFor = async (check: () => boolean, what: string, timeoutMs = 5000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

describe('routePath', () => {
  it('fills :id percent-encoded and refuses a missing id', () => {
    expect(routePath(HTTP_ROUTES.stopEngine, 'llama-1')).toBe('/api/engines/llama-1/stop');
    expect(routePath(HTTP_ROUTES.updateProfile, 'a/b c')).toBe('/api/profiles/a%2Fb%20c');
    expect(routePath(HTTP_ROUTES.getState)).toBe('/api/state');
    expect(() => routePath(HTTP_ROUTES.killEngine)).toThrow(ApiError);
  });
});

describe('HttpBridge requests', () => {
  it('sends every method to its route with the token and a JSON body', async () => {
    handler = (req, res) => {
      if (req.method === 'DELETE') {
        res.writeHead(204);
        res.end();
      } else json(res, 200, { ok: req.url });
    };
    const api = bridge();
    await api.getState();
    await api.plan({ profileId: 'qwen' });
    await api.launch({ profileId: 'qwen' });
    await api.stopEngine('e-1');
    await api.killEngine('e-1');
    await api.setWeight('e-1', 2.5);
    await api.listProfiles();
    await api.createProfile({ name: 'n', capabilities: ['chat'], engineKind: 'builtin', contextSize: 4096, priority: 'lab' });
    await api.updateProfile('p-1', { contextSize: 2048 });
    await expect(api.deleteProfile('p-1')).resolves.toBeUndefined();
    await api.estimateModel('/models/a.gguf');
    await api.setPolicy({ labPaused: true });
    await api.listPlans();

    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET /api/state',
      'POST /api/plan',
      'POST /api/engines',
      'POST /api/engines/e-1/stop',
      'POST /api/engines/e-1/kill',
      'PUT /api/engines/e-1/weight',
      'GET /api/profiles',
      'POST /api/profiles',
      'PUT /api/profiles/p-1',
      'DELETE /api/profiles/p-1',
      'POST /api/estimate',
      'PUT /api/policy',
      'GET /api/plans',
    ]);
    expect(new Set(seen.map((s) => s.authorization))).toEqual(new Set([`Bearer ${TOKEN}`]));
    expect(seen.map((s) => s.body)).toEqual([
      undefined,
      { profileId: 'qwen' },
      { profileId: 'qwen' },
      undefined,
      undefined,
      { weight: 2.5 },
      undefined,
      { name: 'n', capabilities: ['chat'], engineKind: 'builtin', contextSize: 4096, priority: 'lab' },
      { contextSize: 2048 },
      undefined,
      { modelPath: '/models/a.gguf' },
      { labPaused: true },
      undefined,
    ]);
    expect(seen.filter((s) => s.body !== undefined).every((s) => s.contentType === 'application/json')).toBe(true);
  });

  it('returns the parsed response', async () => {
    const state = appState();
    handler = (_req, res) => json(res, 200, state);
    await expect(bridge().getState()).resolves.toEqual(state);
  });

  it('throws the server error as an ApiError with its code, message and details', async () => {
    handler = (_req, res) => json(res, 400, { error: { code: 'BAD_REQUEST', message: 'weight: must be a number from 0.01 to 100, got 500', field: 'weight' } });
    const error = await bridge()
      .setWeight('e-1', 500)
      .then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 'BAD_REQUEST', message: 'weight: must be a number from 0.01 to 100, got 500', details: { field: 'weight' } });

    handler = (_req, res) => json(res, 409, { error: { code: 'NOT_ADMITTED', message: 'does not fit', verdict: 'REJECT_CAPACITY', reasons: ['INSUFFICIENT_CAPACITY: needs 6 GiB'] } });
    await expect(bridge().launch({ profileId: 'big' })).rejects.toMatchObject({ code: 'NOT_ADMITTED', details: { verdict: 'REJECT_CAPACITY', reasons: ['INSUFFICIENT_CAPACITY: needs 6 GiB'] } });
  });

  it('falls back to a code from the status when the body is not the contract shape', async () => {
    handler = (_req, res) => {
      res.writeHead(401, { 'Content-Type': 'text/plain' });
      res.end('no token');
    };
    await expect(bridge().getState()).rejects.toMatchObject({ name: 'ApiError', code: 'UNAUTHORIZED', message: 'HTTP 401: no token' });
    expect(errorFromResponse(500, '').code).toBe('INTERNAL');
    expect(errorFromResponse(404, '{"error":{"code":"NOPE","message":"x"}}').code).toBe('NOT_FOUND');
    expect(errorFromResponse(502, '{"error":{"code":"ENGINE_GONE","message":"stopped mid-answer"}}').code).toBe('ENGINE_GONE');
  });

  it('says where it could not connect', async () => {
    const api = new HttpBridge({ baseUrl: 'http://127.0.0.1:9', token: TOKEN });
    await expect(api.getState()).rejects.toThrow(/cannot reach GPU Share at http:\/\/127\.0\.0\.1:9/);
  });
});

describe('HttpBridge events', () => {
  const frame = (event: AppEvent): string => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;

  it('streams events split anywhere, with the token, and reconnects after the server drops it', async () => {
    const engine = engineView({ id: 'e-9' });
    const plan = placementPlan();
    let connections = 0;
    const closed: boolean[] = [];
    handler = (req, res) => {
      if (req.url !== '/api/events') return json(res, 404, { error: { code: 'NOT_FOUND', message: 'no route' } });
      connections++;
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store' });
      const index = closed.push(false) - 1;
      res.on('close', () => (closed[index] = true));
      if (connections === 1) {
        const text = `: hello\n\n${frame({ type: 'engine', engine })}${frame({ type: 'progress', engineId: 'e-9', pct: 42 })}`;
        // Split inside the field name, inside the JSON and between the two newlines.
        const cuts = [3, 17, 40, text.indexOf('\n\n', 20) + 1];
        let at = 0;
        for (const cut of cuts) {
          res.write(text.slice(at, cut));
          at = cut;
        }
        res.write(text.slice(at));
        setTimeout(() => res.destroy(), 30);
      } else {
        res.write(frame({ type: 'plan', plan }));
      }
    };

    const api = bridge();
    const events: AppEvent[] = [];
    const states: ConnectionStatus['state'][] = [];
    api.onConnection((status) => states.push(status.state));
    const unsubscribe = api.subscribe((event) => events.push(event));

    await waitFor(() => events.length === 3, 'three events over two connections');
    expect(events).toEqual([{ type: 'engine', engine }, { type: 'progress', engineId: 'e-9', pct: 42 }, { type: 'plan', plan }]);
    expect(connections).toBe(2);
    expect(seen.filter((s) => s.url === '/api/events').every((s) => s.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(states).toEqual(['connecting', 'live', 'lost', 'live']);
    expect(api.connection().state).toBe('live');

    expect(closed).toEqual([true, false]);
    unsubscribe();
    await waitFor(() => closed[1] === true, 'the stream to close after the last unsubscribe');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(connections).toBe(2);
  });

  it('stops at a refused token (401) and says so: no retry can bring it back', async () => {
    let attempts = 0;
    handler = (_req, res) => {
      attempts++;
      json(res, 401, { error: { code: 'UNAUTHORIZED', message: 'missing or wrong token' } });
    };
    const api = bridge();
    const states: ConnectionStatus['state'][] = [];
    api.onConnection((status) => states.push(status.state));
    api.subscribe(() => undefined);
    await waitFor(() => api.connection().state === 'refused', 'the refused state');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(attempts).toBe(1);
    expect(states).toEqual(['connecting', 'refused']);
    expect(api.connection().detail).toBe('UNAUTHORIZED: missing or wrong token');
  });

  it('keeps retrying with backoff while the server cannot answer, and goes live when it accepts', async () => {
    let attempts = 0;
    const times: number[] = [];
    handler = (_req, res) => {
      attempts++;
      times.push(Date.now());
      if (attempts < 4) return json(res, 503, { error: { code: 'QUEUE_FULL', message: 'busy' } });
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(': ok\n\n');
    };
    const api = bridge();
    const details: (string | null)[] = [];
    api.onConnection((status) => details.push(status.detail));
    api.subscribe(() => undefined);
    await waitFor(() => api.connection().state === 'live', 'live after three refusals');
    expect(attempts).toBe(4);
    expect(details).toContain('QUEUE_FULL: busy');
    const gaps = times.slice(1).map((t, i) => t - (times[i] ?? t));
    // 20, 40, 80 ms (capped at 80): each at least the backoff, allowing for timer slack.
    expect(gaps[0]).toBeGreaterThanOrEqual(15);
    expect(gaps[1]).toBeGreaterThanOrEqual(35);
    expect(gaps[2]).toBeGreaterThanOrEqual(70);
  });

  it('delivers to every subscriber and isolates a throwing one', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(frame({ type: 'progress', engineId: 'x', pct: 1 }));
    };
    const api = bridge();
    const got: number[] = [];
    const originalError = console.error;
    console.error = () => undefined;
    try {
      api.subscribe(() => {
        throw new Error('broken view');
      });
      api.subscribe(() => got.push(1));
      await waitFor(() => got.length === 1, 'the healthy subscriber');
    } finally {
      console.error = originalError;
    }
  });
});
