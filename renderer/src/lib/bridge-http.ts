/**
 * GpuShareApi over the loopback HTTP API that `gpu-share serve` exposes: one route per method
 * (contract HTTP_ROUTES), JSON bodies, `Authorization: Bearer <token>`, errors as
 * `{error:{code,message,…}}` turned back into ApiError. Events come from GET /api/events as
 * server-sent events read with fetch (EventSource cannot send the header), reconnected with
 * backoff while anyone is subscribed.
 */
import {
  ApiError,
  apiErrorFrom,
  HTTP_EVENTS_PATH,
  HTTP_ROUTES,
  type ApiErrorCode,
  type ApiMethod,
  type AppEvent,
  type AppState,
  type EngineView,
  type GpuShareApi,
  type HttpRoute,
  type LaunchOutcome,
  type LaunchRequest,
  type EstimateOptions,
  type ExecutableView,
  type LocalModelList,
  type ModelEstimateView,
  type PlacementPlan,
  type PolicyPatch,
  type PolicyView,
  type Profile,
  type ProfileInput,
  type ProfilePatch,
} from '../../../electron/core/contract.js';
import { backoffDelayMs, DEFAULT_BACKOFF, type Backoff, type ConnectionStatus } from './connection.js';
import { decodeAppEvent, SseParser } from './sse.js';

/** A route's path with its `:id` filled (percent-encoded). */
export function routePath(route: HttpRoute, id?: string): string {
  if (!route.path.includes(':id')) return route.path;
  if (id === undefined || id === '') throw new ApiError('BAD_REQUEST', `${route.method} ${route.path} needs an id`, { field: 'id' });
  return route.path.replace(':id', encodeURIComponent(id));
}

function codeForStatus(status: number): ApiErrorCode {
  switch (status) {
    case 400:
      return 'BAD_REQUEST';
    case 401:
      return 'UNAUTHORIZED';
    case 403:
      return 'FORBIDDEN';
    case 404:
      return 'NOT_FOUND';
    case 409:
      return 'CONFLICT';
    case 413:
      return 'TOO_LARGE';
    case 429:
    case 503:
      return 'QUEUE_FULL';
    default:
      return 'INTERNAL';
  }
}

/** An error response as the ApiError the server meant (the contract's `{error:{…}}` body); a
 *  body of another shape still gives a code from the status. */
export function errorFromResponse(status: number, bodyText: string): ApiError {
  let body: unknown = null;
  try {
    body = bodyText === '' ? null : JSON.parse(bodyText);
  } catch {
    body = null;
  }
  const parsed = apiErrorFrom(body);
  if (parsed !== null) return parsed;
  const excerpt = bodyText.trim().slice(0, 200);
  return new ApiError(codeForStatus(status), `HTTP ${status}${excerpt === '' ? '' : `: ${excerpt}`}`);
}

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface HttpBridgeOptions {
  /** The server's origin, e.g. `http://127.0.0.1:7787` (the page's own origin in the browser). */
  baseUrl: string;
  token: string;
  fetch?: FetchLike;
  backoff?: Backoff;
}

type ConnectionListener = (status: ConnectionStatus) => void;

export class HttpBridge implements GpuShareApi {
  private readonly baseUrl: string;
  private readonly token: string;
  private readonly fetchImpl: FetchLike;
  private readonly backoff: Backoff;
  private readonly listeners = new Set<(event: AppEvent) => void>();
  private readonly connectionListeners = new Set<ConnectionListener>();
  private status: ConnectionStatus = { state: 'connecting', detail: null, retryAtMs: null };
  private stream: AbortController | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private wakeRetry: (() => void) | null = null;

  constructor(options: HttpBridgeOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    this.fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.backoff = options.backoff ?? DEFAULT_BACKOFF;
  }

  // --- requests ------------------------------------------------------------------------------

  private async call<T>(method: ApiMethod, options: { id?: string; body?: unknown } = {}): Promise<T> {
    const route = HTTP_ROUTES[method];
    const url = `${this.baseUrl}${routePath(route, options.id)}`;
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}`, Accept: 'application/json' };
    const init: RequestInit = { method: route.method, headers, cache: 'no-store' };
    if (options.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(options.body);
    }
    let response: Response;
    try {
      response = await this.fetchImpl(url, init);
    } catch (cause) {
      throw new Error(`cannot reach GPU Share at ${this.baseUrl} (${cause instanceof Error ? cause.message : String(cause)}): is \`gpu-share serve\` still running?`, { cause });
    }
    const text = await response.text();
    if (!response.ok) throw errorFromResponse(response.status, text);
    if (text === '') return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new ApiError('INTERNAL', `${route.method} ${route.path} answered ${response.status} with a body that is not JSON`);
    }
  }

  getState(): Promise<AppState> {
    return this.call('getState');
  }
  plan(request: LaunchRequest): Promise<PlacementPlan> {
    return this.call('plan', { body: request });
  }
  launch(request: LaunchRequest): Promise<LaunchOutcome> {
    return this.call('launch', { body: request });
  }
  stopEngine(engineId: string): Promise<EngineView> {
    return this.call('stopEngine', { id: engineId });
  }
  killEngine(engineId: string): Promise<EngineView> {
    return this.call('killEngine', { id: engineId });
  }
  setWeight(engineId: string, weight: number): Promise<EngineView> {
    return this.call('setWeight', { id: engineId, body: { weight } });
  }
  listProfiles(): Promise<Profile[]> {
    return this.call('listProfiles');
  }
  createProfile(input: ProfileInput): Promise<Profile> {
    return this.call('createProfile', { body: input });
  }
  updateProfile(id: string, patch: ProfilePatch): Promise<Profile> {
    return this.call('updateProfile', { id, body: patch });
  }
  async deleteProfile(id: string): Promise<void> {
    await this.call<unknown>('deleteProfile', { id });
  }
  estimateModel(modelPath: string, options: EstimateOptions = {}): Promise<ModelEstimateView> {
    return this.call('estimateModel', { body: { modelPath, ...options } });
  }
  setPolicy(patch: PolicyPatch): Promise<PolicyView> {
    return this.call('setPolicy', { body: patch });
  }
  listPlans(): Promise<PlacementPlan[]> {
    return this.call('listPlans');
  }
  listExecutables(): Promise<ExecutableView[]> {
    return this.call('listExecutables');
  }
  listLocalModels(): Promise<LocalModelList> {
    return this.call('listLocalModels');
  }

  // --- events --------------------------------------------------------------------------------

  subscribe(listener: (event: AppEvent) => void): () => void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) void this.runStream();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stopStream();
    };
  }

  connection(): ConnectionStatus {
    return this.status;
  }

  /** Connection changes; the listener gets the current status at once. */
  onConnection(listener: ConnectionListener): () => void {
    this.connectionListeners.add(listener);
    listener(this.status);
    return () => this.connectionListeners.delete(listener);
  }

  /** Stop the stream and forget every listener. */
  close(): void {
    this.listeners.clear();
    this.stopStream();
    this.connectionListeners.clear();
  }

  private setStatus(status: ConnectionStatus): void {
    const same = status.state === this.status.state && status.detail === this.status.detail && status.retryAtMs === this.status.retryAtMs;
    if (same) return;
    this.status = status;
    for (const listener of [...this.connectionListeners]) listener(status);
  }

  private stopStream(): void {
    this.stream?.abort();
    this.stream = null;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.wakeRetry?.();
    this.wakeRetry = null;
  }

  private emit(event: AppEvent): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch (error) {
        // One broken view must not stop the stream for the others.
        console.error('gpu-share: event listener failed', error);
      }
    }
  }

  /** Reads the stream while anyone listens; every break is followed by a retry after a
   *  doubling delay (reset once a stream is live, at least the server's `retry:`). */
  private async runStream(): Promise<void> {
    if (this.stream !== null) return;
    let attempt = 0;
    let serverRetryMs: number | null = null;
    this.setStatus({ state: 'connecting', detail: null, retryAtMs: null });
    for (;;) {
      const controller = new AbortController();
      this.stream = controller;
      let detail: string;
      try {
        const response = await this.fetchImpl(`${this.baseUrl}${HTTP_EVENTS_PATH}`, {
          method: 'GET',
          headers: { Authorization: `Bearer ${this.token}`, Accept: 'text/event-stream' },
          cache: 'no-store',
          signal: controller.signal,
        });
        if (!response.ok || response.body === null) {
          const error = errorFromResponse(response.status, await response.text().catch(() => ''));
          detail = `${error.code}: ${error.message}`;
          if (response.status === 401) {
            // The token is wrong or was changed: no retry brings it back; the page asks for the
            // address with the current token.
            this.stream = null;
            this.setStatus({ state: 'refused', detail, retryAtMs: null });
            return;
          }
        } else {
          attempt = 0;
          this.setStatus({ state: 'live', detail: null, retryAtMs: null });
          const parser = new SseParser();
          try {
            detail = await this.readStream(response.body, parser);
          } finally {
            serverRetryMs = parser.retryMs ?? serverRetryMs;
          }
        }
      } catch (error) {
        detail = error instanceof Error ? error.message : String(error);
      }
      // stopStream() aborted this stream (and maybe a new subscriber started another loop).
      if (controller.signal.aborted || this.stream !== controller) return;
      const delay = Math.max(backoffDelayMs(attempt, this.backoff), serverRetryMs ?? 0);
      attempt++;
      this.setStatus({ state: 'lost', detail, retryAtMs: Date.now() + delay });
      await new Promise<void>((resolve) => {
        this.wakeRetry = resolve;
        this.retryTimer = setTimeout(resolve, delay);
      });
      if (this.stream !== controller) return;
      this.retryTimer = null;
      this.wakeRetry = null;
    }
  }

  /** Reads one response to its end; returns why it ended. */
  private async readStream(body: ReadableStream<Uint8Array>, parser: SseParser): Promise<string> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return 'the server closed the event stream';
        for (const message of parser.push(decoder.decode(value, { stream: true }))) {
          const event = decodeAppEvent(message);
          if (event !== null) this.emit(event);
        }
      }
    } finally {
      reader.releaseLock();
    }
  }
}
