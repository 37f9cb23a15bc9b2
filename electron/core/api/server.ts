/**
 * The loopback API: one HTTP server on 127.0.0.1 and ::1.
 *
 *   no token        GET /gpu/peers[?gpu_key=K]  GET /props  GET /metrics  GET / (the dashboard)
 *   dashboard token /api/* (the contract's HTTP_ROUTES, GET /api/events as server-sent events)
 *   any token       /v1/models  /v1/chat/completions  /v1/completions (the gateway)
 *
 * Before any handler: the Host header must be exactly 127.0.0.1:PORT, localhost:PORT or
 * [::1]:PORT (a page on another name that resolves here — DNS rebinding — is refused), and no
 * CORS header is ever sent, so a browser page from elsewhere can neither read an answer nor get a
 * preflight through. Every failure is the contract's `{error:{code,message}}`.
 */
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { extname, join, normalize, resolve, sep } from 'node:path';
import type { Core } from '../app-types.js';
import { toApiError } from '../app.js';
import {
  API_METHODS,
  ApiError,
  DASHBOARD_CSP,
  GPU_KEY,
  HTTP_EVENTS_PATH,
  HTTP_ROUTES,
  type ApiMethod,
  ENGINE_ID,
  ESTIMATE_REQUEST,
  LAUNCH_REQUEST,
  OBJECT_BODY,
  parseInput,
  PLAN_INPUTS_PATH,
  POLICY_PATCH,
  PROFILE_ID,
  WEIGHT_REQUEST,
  type AppEvent,
  type ProfileInput,
  type ProfilePatch,
} from '../contract.js';
import type { Priority } from '../planner/policy.js';
import { buildPropsBlock } from '../registry/view.js';
import { checkGpuKey } from '../registry/validate.js';
import { Gateway, type CompletionPath } from './gateway.js';
import { allowedHosts, applyRequestTimeouts, discardBody, SERVER_OPTIONS, hostAllowed, matchToken, readJson, sendError, sendJson, sendOpenAiError } from './http.js';
import { createApiMetrics, type ApiMetrics } from './metrics.js';

export { HEADERS_TIMEOUT_MS, IDLE_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from './http.js';

/** Event streams open at once, at most: past it, a 429 (each dashboard tab holds one). */
export const MAX_EVENT_STREAMS = 16;
/** What an event stream may have waiting in memory for a client that does not read: past it the
 *  client is dropped. With MAX_EVENT_STREAMS, serve holds at most 16 × 1 MiB for streams. */
export const STREAM_BUFFER_LIMIT_BYTES = 1024 * 1024;
/** How often the tokens that connections were opened with are checked again (a rotated or removed
 *  token ends its streams and connections within this, well under 1 s). */
export const TOKEN_CHECK_INTERVAL_MS = 250;
const KEEP_ALIVE_COMMENT_MS = 15_000;

export interface ApiServerOptions {
  core: Core;
  /** 0 picks a free port. */
  port: number;
  /** The built dashboard (dist/renderer); null serves none. */
  staticDir: string | null;
  log?: (line: string) => void;
}

export interface ApiServer {
  readonly port: number;
  /** The dashboard's address with the token in the fragment (never in a query string). */
  readonly dashboardUrl: string;
  close(): Promise<void>;
}

/** A path segment, decoded; a malformed %-escape is the client's error, not ours. */
function decodeSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new ApiError('BAD_REQUEST', `path: malformed %-escape in ${JSON.stringify(raw.slice(0, 80))}`, { field: 'path' });
  }
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

type Auth = 'none' | 'dashboard' | 'gateway';
interface Route {
  method: string;
  pattern: RegExp;
  auth: Auth;
  handle(ctx: RequestContext, params: string[]): Promise<void> | void;
}
interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  priority: Priority;
  /** The token the request was let in with (none on open routes). */
  tokenUse?: { token: string; dashboard: boolean };
}

export async function startApiServer(options: ApiServerOptions): Promise<ApiServer> {
  const { core } = options;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const metrics: ApiMetrics = createApiMetrics(() => core.snapshot());
  const gateway = new Gateway(core, metrics, log);
  core.attachGateway(gateway.queue);
  const unsubscribeMetrics = core.subscribe((event) => metrics.onEvent(event));
  /** Tokens are read from the settings at each request: a changed token takes effect at once. */
  type TokenMap = Map<string, { token: string; priority: Priority; dashboard: boolean }>;
  const tokens = (): TokenMap => {
    const settings = core.settings.get();
    const map: TokenMap = new Map();
    for (const t of settings.gatewayTokens) map.set(t.token, { token: t.token, priority: t.priority, dashboard: false });
    map.set(settings.apiToken, { token: settings.apiToken, priority: 'interactive', dashboard: true });
    return map;
  };
  const stillValid = (current: TokenMap, use: TokenUse): boolean => {
    const found = current.get(use.token);
    return found !== undefined && (!use.dashboard || found.dashboard);
  };

  /** Each connection's last token (and whether its route needed the dashboard's), with the answer
   *  given under it: checked every TOKEN_CHECK_INTERVAL_MS, so that a token rotated or removed
   *  ends every stream and answer still going out under it (an event stream would otherwise carry
   *  the new token to the old one's holder). A connection idle between requests is only
   *  forgotten: its next request is checked afresh, and closing it could cut that request as the
   *  client sends it (a client reusing the connection under another token got ECONNRESET). */
  interface TokenUse {
    token: string;
    dashboard: boolean;
  }
  const authed = new Map<Socket, { use: TokenUse; res: ServerResponse }>();
  const tokenCheck = setInterval(() => {
    if (authed.size === 0) return;
    const current = tokens();
    for (const [socket, { use, res }] of authed) {
      if (stillValid(current, use) || res.writableEnded) continue;
      authed.delete(socket);
      socket.destroy();
    }
  }, TOKEN_CHECK_INTERVAL_MS);
  tokenCheck.unref();
  const remember = (socket: Socket, use: TokenUse, res: ServerResponse): void => {
    if (!authed.has(socket)) socket.once('close', () => authed.delete(socket));
    authed.set(socket, { use, res });
  };

  /** The open event streams, fed by one subscription while there is any. */
  interface EventStream {
    res: ServerResponse;
    use: TokenUse;
  }
  const streams = new Set<EventStream>();
  let unsubscribeStreams: (() => void) | null = null;
  let keepAlive: NodeJS.Timeout | null = null;
  /** One event to every stream: serialised once; a stream whose token is no longer valid ends
   *  before it gets it; one whose client has not read its last STREAM_BUFFER_LIMIT_BYTES is dropped. */
  const broadcast = (text: string, carriesToken: boolean): void => {
    if (streams.size === 0) return;
    // Only a state event carries the token: it is checked before one goes out (a rotation between
    // two checks must not deliver the new token to the old one's holder); other events rely on
    // the check every TOKEN_CHECK_INTERVAL_MS.
    const current = carriesToken ? tokens() : null;
    for (const stream of streams) {
      if (current !== null && !stillValid(current, stream.use)) {
        streams.delete(stream);
        stream.res.destroy();
      } else if (stream.res.writableLength > STREAM_BUFFER_LIMIT_BYTES) {
        streams.delete(stream);
        log(`api: dropped an event stream whose client did not read (${stream.res.writableLength} bytes waiting)`);
        stream.res.destroy();
      } else stream.res.write(text);
    }
  };
  const eventText = (event: AppEvent): string => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;

  const body = async (ctx: RequestContext): Promise<unknown> => readJson(ctx.req);
  const json = (ctx: RequestContext, value: unknown, status = 200): void => sendJson(ctx.res, status, value);

  const routes: Route[] = [
    {
      method: 'GET',
      pattern: /^\/gpu\/peers$/,
      auth: 'none',
      handle(ctx) {
        const raw = ctx.url.searchParams.get('gpu_key');
        if (raw === null) return json(ctx, core.peersView());
        const key = checkGpuKey(raw);
        if (!key.ok) throw new ApiError('BAD_REQUEST', `gpu_key: ${key.message}`, { field: 'gpu_key' });
        json(ctx, core.peersView(key.value));
      },
    },
    { method: 'GET', pattern: /^\/props$/, auth: 'none', handle: (ctx) => json(ctx, buildPropsBlock(core.peersView(), true)) },
    {
      method: 'GET',
      pattern: /^\/metrics$/,
      auth: 'none',
      async handle(ctx) {
        const text = await metrics.render();
        ctx.res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
        ctx.res.end(text);
      },
    },
    { method: 'GET', pattern: new RegExp(`^${HTTP_EVENTS_PATH}$`), auth: 'dashboard', handle: (ctx) => streamEvents(ctx, ctx.tokenUse ?? { token: '', dashboard: true }) },
    {
      // What `gpu-share plan` plans with when a serve or the app runs for its data folder.
      method: 'GET',
      pattern: new RegExp(`^${PLAN_INPUTS_PATH}$`),
      auth: 'dashboard',
      handle(ctx) {
        const raw = ctx.url.searchParams.get('gpuKey');
        json(ctx, core.planInputs(raw === null ? undefined : parseInput(GPU_KEY, raw, 'gpuKey')));
      },
    },
    ...controlRoutes(),
    { method: 'GET', pattern: /^\/v1\/models$/, auth: 'gateway', handle: async (ctx) => json(ctx, await gateway.models()) },
    { method: 'GET', pattern: /^\/v1\/models\/([^/]+)$/, auth: 'gateway', handle: async (ctx, [id]) => json(ctx, await gateway.model(id ?? '')) },
    { method: 'POST', pattern: /^\/v1\/chat\/completions$/, auth: 'gateway', handle: async (ctx) => gateway.handle(ctx.req, ctx.res, '/v1/chat/completions', await body(ctx), ctx.priority) },
    { method: 'POST', pattern: /^\/v1\/completions$/, auth: 'gateway', handle: async (ctx) => gateway.handle(ctx.req, ctx.res, '/v1/completions' satisfies CompletionPath, await body(ctx), ctx.priority) },
  ];

  /** The control API, one route per contract method at the contract's path. */
  function controlRoutes(): Route[] {
    const handlers: Record<ApiMethod, (ctx: RequestContext, id: string) => Promise<void>> = {
      getState: async (ctx) => json(ctx, await core.getState()),
      plan: async (ctx) => json(ctx, await core.plan(parseInput(LAUNCH_REQUEST, await body(ctx)))),
      listPlans: async (ctx) => json(ctx, await core.listPlans()),
      launch: async (ctx) => {
        const outcome = await core.launch(parseInput(LAUNCH_REQUEST, await body(ctx)));
        json(ctx, outcome, outcome.engine === null ? 200 : 202);
      },
      stopEngine: async (ctx, id) => json(ctx, await core.stopEngine(parseInput(ENGINE_ID, id, 'id'))),
      killEngine: async (ctx, id) => json(ctx, await core.killEngine(parseInput(ENGINE_ID, id, 'id'))),
      setWeight: async (ctx, id) => {
        const engineId = parseInput(ENGINE_ID, id, 'id');
        json(ctx, await core.setWeight(engineId, parseInput(WEIGHT_REQUEST, await body(ctx)).weight));
      },
      listProfiles: async (ctx) => json(ctx, await core.listProfiles()),
      // Over HTTP a profile may not choose what runs: only the local user may (IPC, profiles.json).
      createProfile: async (ctx) => json(ctx, await core.createProfile(parseInput(OBJECT_BODY, await body(ctx)) as ProfileInput, 'remote'), 201),
      updateProfile: async (ctx, id) => json(ctx, await core.updateProfile(parseInput(PROFILE_ID, id, 'id'), parseInput(OBJECT_BODY, await body(ctx)) as ProfilePatch, 'remote')),
      deleteProfile: async (ctx, id) => {
        await core.deleteProfile(parseInput(PROFILE_ID, id, 'id'));
        ctx.res.writeHead(204).end();
      },
      estimateModel: async (ctx) => {
        const { modelPath, ...options } = parseInput(ESTIMATE_REQUEST, await body(ctx));
        json(ctx, await core.estimateModel(modelPath, options));
      },
      setPolicy: async (ctx) => json(ctx, await core.setPolicy(parseInput(POLICY_PATCH, await body(ctx)))),
      listExecutables: async (ctx) => json(ctx, await core.listExecutables()),
      listLocalModels: async (ctx) => json(ctx, await core.listLocalModels()),
    };
    return API_METHODS.map((method) => {
      const route = HTTP_ROUTES[method];
      const handler = handlers[method];
      return { method: route.method, pattern: new RegExp(`^${route.path.replace(':id', '([^/]+)')}$`), auth: 'dashboard', handle: (ctx, [id]) => handler(ctx, id ?? '') };
    });
  }

  function streamEvents(ctx: RequestContext, use: TokenUse): void {
    const { res } = ctx;
    if (streams.size >= MAX_EVENT_STREAMS) {
      throw new ApiError('QUEUE_FULL', `event streams: ${streams.size} are open, the limit; close one (each dashboard tab holds one) and try again`);
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' });
    res.write(eventText({ type: 'state', state: core.snapshot() }));
    const stream: EventStream = { res, use };
    streams.add(stream);
    if (unsubscribeStreams === null) unsubscribeStreams = core.subscribe((event) => broadcast(eventText(event), event.type === 'state'));
    // A comment now and then keeps proxies and idle timeouts from closing a quiet stream.
    keepAlive ??= setInterval(() => broadcast(': keep-alive\n\n', false), KEEP_ALIVE_COMMENT_MS);
    res.on('close', () => {
      streams.delete(stream);
      if (streams.size > 0) return;
      unsubscribeStreams?.();
      unsubscribeStreams = null;
      if (keepAlive !== null) clearInterval(keepAlive);
      keepAlive = null;
    });
  }

  function serveStatic(ctx: RequestContext): boolean {
    if (options.staticDir === null || (ctx.req.method !== 'GET' && ctx.req.method !== 'HEAD')) return false;
    const root = resolve(options.staticDir);
    const relative = ctx.url.pathname === '/' ? 'index.html' : decodeSegment(ctx.url.pathname).slice(1);
    const file = normalize(join(root, relative));
    if (!file.startsWith(root + sep) || !existsSync(file) || !statSync(file).isFile()) return false;
    const type = CONTENT_TYPES[extname(file)] ?? 'application/octet-stream';
    const headers: Record<string, string> = { 'content-type': type, 'x-content-type-options': 'nosniff', 'cache-control': 'no-cache' };
    if (type.startsWith('text/html')) Object.assign(headers, { 'content-security-policy': DASHBOARD_CSP, 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY' });
    ctx.res.writeHead(200, headers);
    if (ctx.req.method === 'HEAD') ctx.res.end();
    else createReadStream(file).pipe(ctx.res);
    return true;
  }

  /** `/v1/*` answers errors as OpenAI's API does; everything else in the contract's shape. */
  function fail(req: IncomingMessage, res: ServerResponse, error: ApiError, headers: Record<string, string> = {}): void {
    if ((req.url ?? '').startsWith('/v1/')) sendOpenAiError(res, error, headers);
    else sendError(res, error, headers);
  }

  let allowed: ReadonlySet<string> = new Set();
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!hostAllowed(req.headers.host, allowed)) {
      discardBody(req, res);
      return sendError(res, new ApiError('FORBIDDEN', `Host ${JSON.stringify(req.headers.host ?? '')} is not this server's loopback address`));
    }
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`);
    if (req.method === 'OPTIONS') {
      // No preflight answer: cross-origin requests with custom headers never get through.
      discardBody(req, res);
      return sendError(res, new ApiError('FORBIDDEN', 'cross-origin requests are not served'));
    }
    const matching = routes.filter((r) => r.pattern.test(url.pathname));
    const route = matching.find((r) => r.method === req.method);
    if (route === undefined) {
      discardBody(req, res);
      if (matching.length > 0) return fail(req, res, new ApiError('NOT_FOUND', `${req.method ?? ''} is not served on ${url.pathname} (use ${matching.map((r) => r.method).join(', ')})`));
      if (serveStatic({ req, res, url, priority: 'interactive' })) return;
      return fail(req, res, new ApiError('NOT_FOUND', `no such path: ${url.pathname}`));
    }
    let priority: Priority = 'interactive';
    let tokenUse: TokenUse | undefined;
    if (route.auth !== 'none') {
      const who = matchToken(req.headers.authorization, tokens());
      if (who === null || (route.auth === 'dashboard' && !who.dashboard)) {
        discardBody(req, res);
        return fail(req, res, new ApiError('UNAUTHORIZED', req.headers.authorization === undefined ? 'missing bearer token (Authorization: Bearer TOKEN)' : 'wrong token'), { 'www-authenticate': 'Bearer' });
      }
      priority = who.priority;
      tokenUse = { token: who.token, dashboard: route.auth === 'dashboard' };
      remember(req.socket, tokenUse, res);
    }
    const params = (route.pattern.exec(url.pathname) ?? []).slice(1).map(decodeSegment);
    await route.handle({ req, res, url, priority, ...(tokenUse === undefined ? {} : { tokenUse }) }, params);
  }

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch((error: unknown) => {
      const apiError = toApiError(error);
      if (apiError.code === 'INTERNAL') log(`api: ${req.method ?? ''} ${req.url ?? ''}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      if (apiError.code === 'TOO_LARGE') discardBody(req, res, 0);
      if (!res.headersSent) fail(req, res, apiError);
      else res.destroy();
    });
  };

  const servers: Server[] = [];
  const listen = (host: string, port: number): Promise<Server | null> =>
    new Promise((resolveListen, reject) => {
      const server = createServer(SERVER_OPTIONS, onRequest);
      applyRequestTimeouts(server);
      server.once('error', (error: NodeJS.ErrnoException) => {
        // No IPv6 loopback on this machine: serve on 127.0.0.1 alone.
        if (host === '::1' && (error.code === 'EADDRNOTAVAIL' || error.code === 'EAFNOSUPPORT')) resolveListen(null);
        else reject(error);
      });
      server.listen({ host, port, ipv6Only: host === '::1' }, () => resolveListen(server));
    });
  const first = await listen('127.0.0.1', options.port);
  if (first === null) throw new Error('could not listen on 127.0.0.1');
  servers.push(first);
  const port = (first.address() as AddressInfo).port;
  try {
    const second = await listen('::1', port);
    if (second !== null) servers.push(second);
  } catch (error) {
    log(`api: not listening on [::1]:${port}: ${error instanceof Error ? error.message : String(error)}`);
  }
  allowed = allowedHosts(port);
  core.setApiPort(port);

  return {
    port,
    dashboardUrl: `http://127.0.0.1:${port}/#token=${core.settings.get().apiToken}`,
    async close() {
      unsubscribeMetrics();
      clearInterval(tokenCheck);
      for (const stream of streams) stream.res.end();
      await Promise.all(
        servers.map(
          (server) =>
            new Promise<void>((resolveClose) => {
              server.close(() => resolveClose());
              server.closeAllConnections();
            }),
        ),
      );
      core.setApiPort(null);
    },
  };
}
