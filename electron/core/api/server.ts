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
import { allowedHosts, discardBody, hostAllowed, matchToken, readJson, sendError, sendJson, sendOpenAiError } from './http.js';
import { createApiMetrics, type ApiMetrics } from './metrics.js';

/** Time to receive a request's headers, the whole request, and between requests on a connection. */
export const HEADERS_TIMEOUT_MS = 10_000;
export const REQUEST_TIMEOUT_MS = 30_000;
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** A connection with no request in progress that sends nothing for this long is closed. Node's
 *  headers timeout starts at a request's first byte, so a connection that never sends one would
 *  otherwise hold its file descriptor for good. */
export const IDLE_TIMEOUT_MS = 10_000;

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
}

export async function startApiServer(options: ApiServerOptions): Promise<ApiServer> {
  const { core } = options;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const metrics: ApiMetrics = createApiMetrics(() => core.snapshot());
  const gateway = new Gateway(core, metrics, log);
  core.attachGateway(gateway.queue);
  const unsubscribeMetrics = core.subscribe((event) => metrics.onEvent(event));
  const sse = new Set<ServerResponse>();

  /** Tokens are read from the settings at each request: a changed token takes effect at once. */
  const tokens = (): Map<string, { priority: Priority; dashboard: boolean }> => {
    const settings = core.settings.get();
    const map = new Map<string, { priority: Priority; dashboard: boolean }>();
    for (const t of settings.gatewayTokens) map.set(t.token, { priority: t.priority, dashboard: false });
    map.set(settings.apiToken, { priority: 'interactive', dashboard: true });
    return map;
  };

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
    { method: 'GET', pattern: new RegExp(`^${HTTP_EVENTS_PATH}$`), auth: 'dashboard', handle: (ctx) => streamEvents(ctx) },
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

  function streamEvents(ctx: RequestContext): void {
    const { res } = ctx;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' });
    const send = (event: AppEvent): void => void res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    send({ type: 'state', state: core.snapshot() });
    const unsubscribe = core.subscribe(send);
    // A comment now and then keeps proxies and idle timeouts from closing a quiet stream.
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    sse.add(res);
    res.on('close', () => {
      unsubscribe();
      clearInterval(keepAlive);
      sse.delete(res);
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
    if (route.auth !== 'none') {
      const who = matchToken(req.headers.authorization, tokens());
      if (who === null || (route.auth === 'dashboard' && !who.dashboard)) {
        discardBody(req, res);
        return fail(req, res, new ApiError('UNAUTHORIZED', req.headers.authorization === undefined ? 'missing bearer token (Authorization: Bearer TOKEN)' : 'wrong token'), { 'www-authenticate': 'Bearer' });
      }
      priority = who.priority;
    }
    const params = (route.pattern.exec(url.pathname) ?? []).slice(1).map(decodeSegment);
    await route.handle({ req, res, url, priority }, params);
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
      // No Host: our 403, not Node's 400. Timeouts are checked every second (Node's default: 30 s).
      const server = createServer({ requireHostHeader: false, connectionsCheckingInterval: 1_000 }, onRequest);
      // A client that sends its headers or body slowly is cut off (answers may stream for long:
      // the request timeout covers receiving the request only), and so is an idle connection.
      server.headersTimeout = HEADERS_TIMEOUT_MS;
      server.requestTimeout = REQUEST_TIMEOUT_MS;
      server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      // Inactivity on a socket: closed when no answer is in progress on it; an answer (a stream
      // waiting for its engine to load, say) may stay quiet for as long as it needs.
      const answering = new WeakSet<Socket>();
      server.timeout = IDLE_TIMEOUT_MS;
      server.on('request', (req: IncomingMessage, res: ServerResponse) => {
        const socket = req.socket;
        answering.add(socket);
        res.once('close', () => answering.delete(socket));
      });
      server.on('timeout', (socket: Socket) => {
        if (!answering.has(socket)) socket.destroy();
      });
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
      for (const res of sse) res.end();
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
