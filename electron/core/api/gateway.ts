/**
 * The OpenAI-compatible gateway: `model` names a profile (its name) or a capability (resolveModel); the engine for it is found among the
 * running ones or loaded on demand through the planner and the supervisor; requests wait by
 * priority for their engine (GatewayQueue) and are passed through to it unbuffered. What it logs
 * is the request's shape and a hash, never the prompt.
 */
import { createHash } from 'node:crypto';
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import * as v from 'valibot';
import { ApiError, badField, modelIdsOf, parseInput, type AppEvent, type EngineKind, type EngineView, type ModelOwner, type Profile } from '../contract.js';
import type { Core } from '../app-types.js';
import { got, openRecord, TRUE_OR_FALSE } from '../schema.js';
import { explainReason } from '../planner/describe.js';
import type { Priority } from '../planner/policy.js';
import type { PlacementPlan } from '../planner/types.js';
import { servesHttp } from '../engines/supervisor.js';
import { GatewayQueue } from './gateway-queue.js';
import { openAiErrorBody, sendOpenAiError } from './http.js';
import type { ApiMetrics } from './metrics.js';

export const MAX_TOKENS_LIMIT = 131_072;
/** How long a request waits for a load in progress to finish. (How long it waits for a QUEUE
 *  verdict to turn into a load is the policy's queue.maxWaitUs, by priority.) */
const LOAD_WAIT_MS = 10 * 60_000;
const REPLAN_EVERY_MS = 1_000;

export type CompletionPath = '/v1/chat/completions' | '/v1/completions';

export interface CompletionRequest {
  /** What the client asked for, as it asked (echoed in the answer). */
  model: string;
  /** The profiles `model` names (resolveModel), in the order they are tried. */
  profiles: Profile[];
  stream: boolean;
  /** For the log: counts and a hash, never text. */
  shape: string;
  body: Record<string, unknown>;
}

/**
 * What a request's `model` names, in this order of precedence:
 * 1. a profile's name, exactly as written (its model id, as `/v1/models` lists it): that profile;
 * 2. a profile's id (the slug in profiles.json and the API's paths): that profile;
 * 3. a capability: every profile that serves it, in the order they were added.
 * A specific model always reaches its own profile: a capability spelled exactly like a profile's
 * name or id is shadowed by it (and `/v1/models` lists that id once, as the profile). Ids are
 * compared exactly, as OpenAI's are: a profile "Chat" and the capability "chat" are two models.
 * null when it names none.
 */
export function resolveModel(model: string, profiles: readonly Profile[]): { owner: ModelOwner; profiles: Profile[] } | null {
  const byName = profiles.find((p) => p.name === model);
  if (byName !== undefined) return { owner: 'profile', profiles: [byName] };
  const byId = profiles.find((p) => p.id === model);
  if (byId !== undefined) return { owner: 'profile', profiles: [byId] };
  const byCapability = profiles.filter((p) => p.capabilities.includes(model));
  return byCapability.length > 0 ? { owner: 'capability', profiles: byCapability } : null;
}

/** The models clients see, in OpenAI's list shape (modelIdsOf's ids and order). Pure. */
export function modelList(profiles: readonly Profile[], created: number): ModelEntry[] {
  return modelIdsOf(profiles).map((m) => modelEntry(m.id, m.owner, created));
}

/** Engines that take every OpenAI parameter themselves (the request passes through as it is). */
const TAKES_EVERY_PARAMETER: ReadonlySet<EngineKind> = new Set(['llama-server']);

/** Parameters the other engines do not implement: present (and not at their no-op value), the
 *  request is refused naming the parameter rather than answered as if it had been honoured. */
const UNSUPPORTED_PARAMETERS: readonly { name: string; inert: (value: unknown) => boolean }[] = [
  ...['tools', 'tool_choice', 'functions', 'function_call', 'parallel_tool_calls', 'response_format', 'logit_bias', 'audio', 'modalities', 'prediction', 'web_search_options', 'suffix', 'reasoning_effort'].map((name) => ({ name, inert: (v: unknown) => v === undefined || v === null })),
  { name: 'n', inert: (v) => v === undefined || v === null || v === 1 },
  { name: 'best_of', inert: (v) => v === undefined || v === null || v === 1 },
  { name: 'logprobs', inert: (v) => v === undefined || v === null || v === false },
  { name: 'top_logprobs', inert: (v) => v === undefined || v === null || v === 0 },
  { name: 'echo', inert: (v) => v === undefined || v === null || v === false },
  { name: 'presence_penalty', inert: (v) => v === undefined || v === null || v === 0 },
  { name: 'frequency_penalty', inert: (v) => v === undefined || v === null || v === 0 },
];

const numberFrom = (min: number, max: number, integer: boolean) => {
  const message = got(`must be ${integer ? 'a whole number' : 'a number'} from ${min} to ${max}`);
  const number = v.pipe(v.number(message), v.finite(message), v.minValue(min, message), v.maxValue(max, message));
  return v.nullish(integer ? v.pipe(number, v.integer(message)) : number);
};

/** What both completion bodies share. Fields not named here pass through to the engine as they
 *  are (OpenAI's API has many; an engine that lacks one is refused by UNSUPPORTED_PARAMETERS). */
const COMPLETION_FIELDS = {
  model: v.pipe(v.string(got('must name a model: a profile name, a profile id or a capability')), v.minLength(1, got('must name a model: a profile name, a profile id or a capability'))),
  stream: v.nullish(TRUE_OR_FALSE),
  max_tokens: numberFrom(1, MAX_TOKENS_LIMIT, true),
  max_completion_tokens: numberFrom(1, MAX_TOKENS_LIMIT, true),
  temperature: numberFrom(0, 2, false),
  top_p: numberFrom(0, 1, false),
};

const CHAT_MESSAGE = openRecord(
  {
    role: v.picklist(['system', 'user', 'assistant', 'tool', 'developer'], got('must be system, user, assistant, tool or developer')),
    content: v.union([v.string(), v.array(v.unknown())], got('must be a string or an array of parts')),
  },
  'a message object',
);
const messagesMessage = got('must be a non-empty array of messages');

/** `POST /v1/chat/completions`. */
export const CHAT_COMPLETION_BODY = openRecord({ ...COMPLETION_FIELDS, messages: v.pipe(v.array(CHAT_MESSAGE, messagesMessage), v.minLength(1, messagesMessage), v.maxLength(10_000, messagesMessage)) }, 'an object');
const promptMessage = got('must be a string or a non-empty array of strings');
/** `POST /v1/completions`. */
export const COMPLETION_BODY = openRecord({ ...COMPLETION_FIELDS, prompt: v.union([v.string(), v.pipe(v.array(v.string()), v.minLength(1, promptMessage))], promptMessage) }, 'an object');

/** Checks a completion request against its schema, then what needs the profiles: every problem is
 *  a 400 naming the field (404 for a `model` that names nothing). */
export function parseCompletionRequest(path: CompletionPath, value: unknown, allProfiles: readonly Profile[]): CompletionRequest {
  const known = (): string => modelList(allProfiles, 0).map((m) => m.id).join(', ').slice(0, 400) || 'none (add a profile)';
  let request: v.InferOutput<typeof CHAT_COMPLETION_BODY> | v.InferOutput<typeof COMPLETION_BODY>;
  let shape: string;
  if (path === '/v1/chat/completions') {
    const chat = parseInput(CHAT_COMPLETION_BODY, value);
    const chars = chat.messages.reduce((sum, m) => sum + (typeof m.content === 'string' ? m.content.length : JSON.stringify(m.content).length), 0);
    [request, shape] = [chat, `messages=${chat.messages.length} chars=${chars}`];
  } else {
    const completion = parseInput(COMPLETION_BODY, value);
    [request, shape] = [completion, typeof completion.prompt === 'string' ? `prompt chars=${completion.prompt.length}` : `prompts=${completion.prompt.length}`];
  }
  const { model } = request;
  const profiles = resolveModel(model, allProfiles)?.profiles ?? null;
  if (profiles === null) throw new ApiError('NOT_FOUND', `The model "${model.slice(0, 64)}" does not exist: it is no profile name, profile id or capability here (models: ${known()})`, { field: 'model' });
  // A request that uses a parameter only some engines implement goes only to those: a capability
  // served by a built-in and a llama-server profile must not hand `tools` to the built-in one.
  const unsupported = UNSUPPORTED_PARAMETERS.find((parameter) => !parameter.inert(request[parameter.name]));
  const takers = unsupported === undefined ? profiles : profiles.filter((p) => TAKES_EVERY_PARAMETER.has(p.engineKind));
  if (unsupported !== undefined && takers.length === 0) throw badField(unsupported.name, `is not supported by the ${profiles[0]?.engineKind ?? ''} engine behind "${model.slice(0, 64)}" (a llama-server profile takes it)`);
  const hash = createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 12);
  // The body goes to the engine as the client sent it.
  return { model, profiles: takers, stream: request.stream === true, shape: `${shape} sha256=${hash}`, body: value as Record<string, unknown> };
}

/** One entry of `/v1/models`, exactly OpenAI's Model object. */
export interface ModelEntry {
  id: string;
  object: 'model';
  created: number;
  owned_by: ModelOwner;
}

const STARTED_S = Math.floor(Date.now() / 1000);
const modelEntry = (id: string, owner: ModelOwner, created: number = STARTED_S): ModelEntry => ({ id, object: 'model', created, owned_by: owner });

type ForwardOutcome = 'ok' | 'not-reached' | 'cut';

export class Gateway {
  readonly queue: GatewayQueue;
  private readonly launching = new Map<string, { promise: Promise<EngineView>; waiters: Set<() => boolean> }>();

  constructor(
    private readonly core: Core,
    private readonly metrics: ApiMetrics,
    private readonly log: (line: string) => void,
  ) {
    // The planner's policy sizes the line: one versioned policy (with `serve --queue-limit` as an
    // override recorded in its revision), not a number of the gateway's own.
    // Each engine's count of requests is its activity as we know it (the supervisor passes it on).
    this.queue = new GatewayQueue(core.policy.queue.maxDepth, (engineId, count) => core.engineRequests(engineId, count));
  }

  /** The models clients see (modelList). */
  async models(): Promise<{ object: 'list'; data: ModelEntry[] }> {
    return { object: 'list', data: modelList(await this.core.listProfiles(), STARTED_S) };
  }

  /** One model by what a request's `model` may say (resolveModel); 404 else. */
  async model(id: string): Promise<ModelEntry> {
    const found = resolveModel(id, await this.core.listProfiles());
    if (found === null) throw new ApiError('NOT_FOUND', `The model "${id.slice(0, 64)}" does not exist`, { field: 'model' });
    return modelEntry(found.owner === 'profile' ? (found.profiles[0]?.name ?? id) : id, found.owner);
  }

  async handle(req: IncomingMessage, res: ServerResponse, path: CompletionPath, body: unknown, priority: Priority): Promise<void> {
    let request: CompletionRequest;
    try {
      request = parseCompletionRequest(path, body, await this.core.listProfiles());
    } catch (error) {
      this.metrics.countRequest('bad_request');
      throw error;
    }
    if (this.queue.full) {
      this.metrics.countRequest('queue_full');
      sendOpenAiError(res, new ApiError('QUEUE_FULL', `the gateway queue is full (${this.queue.limit} waiting); retry later`), { 'retry-after': '2' });
      return;
    }
    let gone = false;
    // 'close' also follows a response we finished: only an unfinished one means the client left.
    const onGone = (): void => {
      if (!res.writableFinished) gone = true;
    };
    res.on('close', onGone);
    const started = Date.now();
    // An engine stopped between our choosing it and our request reaching it: choose (or load)
    // again, once; nothing has been sent to the client yet.
    for (let attempt = 1; ; attempt++) {
      let engine: EngineView;
      try {
        engine = await this.engineFor(request.model, request.profiles, priority, () => gone);
      } catch (error) {
        if (gone) {
          this.metrics.countRequest('client_gone');
          return;
        }
        this.metrics.countRequest(error instanceof ApiError && error.code === 'NOT_ADMITTED' ? 'rejected' : 'upstream_error');
        throw error;
      }
      if (gone) {
        this.metrics.countRequest('client_gone');
        return;
      }
      // Wait for our turn on this engine.
      let granted: () => void = () => undefined;
      const turn = new Promise<void>((resolve) => (granted = resolve));
      // Whether the engine was given to us (then we must release it), or we stopped waiting.
      let ours = false;
      const place = this.queue.enter(engine.id, priority, () => {
        ours = true;
        granted();
      });
      const leaveIfGone = (): void => {
        if (ours) return;
        place.leave();
        granted();
      };
      res.on('close', leaveIfGone);
      await turn;
      res.off('close', leaveIfGone);
      if (gone) {
        if (ours) this.queue.release(engine.id);
        this.metrics.countRequest('client_gone');
        return;
      }
      this.log(`gateway: ${path} ${request.model} ${request.shape} priority=${priority} → ${engine.id} (queue position ${place.position}, waited ${Date.now() - started} ms)`);
      let outcome: ForwardOutcome;
      try {
        outcome = await this.forward(req, res, engine, path, request, place.position);
      } finally {
        this.queue.release(engine.id);
      }
      if (outcome === 'not-reached' && attempt < 2 && !gone) continue;
      if (outcome === 'not-reached') {
        this.metrics.countRequest('upstream_error');
        throw new ApiError('ENGINE_GONE', `engine ${engine.id} stopped before it could answer; send the request again`);
      }
      this.metrics.countRequest(gone ? 'client_gone' : outcome === 'ok' ? 'ok' : 'upstream_error');
      return;
    }
  }

  /**
   * A running engine for the capability: one that runs, one that loads, or one loaded now. Only
   * profiles whose engine serves HTTP are considered, and a profile whose last load failed is
   * skipped until it is edited or launched again from the dashboard. Every way this can fail is a
   * structured 503 (or the client's own departure), never an internal error.
   */
  private async engineFor(capability: string, candidates: readonly Profile[], priority: Priority, gone: () => boolean): Promise<EngineView> {
    // The profiles as they are now (one may have been edited or removed since the request came).
    const current = this.core.profileList();
    const all = candidates.map((c) => current.find((p) => p.id === c.id)).filter((p): p is Profile => p !== undefined);
    if (all.length === 0) throw new ApiError('NOT_FOUND', `The model "${capability}" does not exist`, { field: 'model' });
    const profiles = all.filter((p) => servesHttp({ kind: p.engineKind, args: p.args }));
    if (profiles.length === 0) {
      throw new ApiError('NOT_ADMITTED', `no profile for "${capability}" serves HTTP (${all.map((p) => p.name).join(', ')}: a command profile must declare its --port)`, { reasons: ['NO_HTTP_ENGINE'] });
    }
    const ids = new Set(profiles.map((p) => p.id));
    const engines = this.core.engines();
    const running = engines.find((e) => ids.has(e.profileId) && e.state === 'running' && e.port !== null);
    if (running !== undefined) return running;
    const loading = engines.find((e) => ids.has(e.profileId) && e.state === 'loading');
    if (loading !== undefined) {
      // A load we started for other requests: wait with them (it is cancelled only when all of
      // us have gone). One started from the dashboard is never cancelled by a client.
      const ours = profiles.find((p) => p.id === loading.profileId && this.launching.has(p.id));
      return ours === undefined ? this.untilRunning(loading.id, gone) : this.shareLoad(ours, priority, gone);
    }
    let failure: ApiError | null = null;
    for (const profile of profiles) {
      const failed = this.core.profileFailure(profile.id);
      if (failed !== null) {
        failure ??= new ApiError('NOT_ADMITTED', `${profile.name}: its last load failed (${failed.reason}); edit the profile or launch it from the dashboard to try again`, { reasons: ['PROFILE_FAILED'] });
        continue;
      }
      try {
        return await this.shareLoad(profile, priority, gone);
      } catch (error) {
        const apiError = asGatewayError(profile, error);
        // Another profile may serve the capability, unless the client left or it was only busy.
        if (gone() || this.core.profileFailure(profile.id) === null) throw apiError;
        failure = apiError;
      }
    }
    throw failure ?? new ApiError('NOT_ADMITTED', `no profile for "${capability}" can be loaded`);
  }

  /** One load per profile, shared by the requests that wait for it: it is cancelled only when
   *  every one of them has gone. */
  private async shareLoad(profile: Profile, priority: Priority, gone: () => boolean): Promise<EngineView> {
    let pending = this.launching.get(profile.id);
    if (pending === undefined) {
      const waiters = new Set<() => boolean>();
      const everyoneGone = (): boolean => [...waiters].every((g) => g());
      pending = { waiters, promise: this.load(profile, priority, everyoneGone).finally(() => this.launching.delete(profile.id)) };
      this.launching.set(profile.id, pending);
    }
    pending.waiters.add(gone);
    try {
      return await pending.promise;
    } finally {
      pending.waiters.delete(gone);
    }
  }

  private async load(profile: Profile, priority: Priority, gone: () => boolean): Promise<EngineView> {
    const deadline = Date.now() + this.core.policy.queue.maxWaitUs[priority] / 1000;
    for (;;) {
      const outcome = await this.core.launchOnDemand(profile.id);
      if (outcome.engine !== null) {
        const engineId = outcome.engine.id;
        return this.untilRunning(engineId, gone).catch((error: unknown) => {
          // Nobody waits for it any more: the load we started for them is cancelled.
          if (gone()) void this.core.stopEngine(engineId).catch(() => undefined);
          throw error;
        });
      }
      if (outcome.plan.verdict !== 'QUEUE' || Date.now() > deadline) throw notAdmitted(profile, outcome.plan);
      // QUEUE: busy engines or pending loads stand in the way; plan again shortly.
      await new Promise((resolve) => setTimeout(resolve, REPLAN_EVERY_MS));
      if (gone()) throw new ApiError('CONFLICT', 'client went away');
    }
  }

  private untilRunning(engineId: string, gone: () => boolean): Promise<EngineView> {
    return new Promise<EngineView>((resolve, reject) => {
      const check = (engine: EngineView | undefined): boolean => {
        if (engine === undefined) return false;
        if (engine.state === 'running' && engine.port === null) {
          finish();
          reject(new ApiError('NOT_ADMITTED', `engine ${engine.id} runs but serves no HTTP port`, { reasons: ['NO_HTTP_ENGINE'] }));
          return true;
        }
        if (engine.state === 'running') {
          finish();
          resolve(engine);
          return true;
        }
        if (engine.state === 'crashed' || engine.state === 'exited' || engine.state === 'stopped' || engine.state === 'stopping') {
          finish();
          reject(new ApiError('NOT_ADMITTED', `engine ${engine.id} ${engine.state} while loading${engine.exitCode === null ? '' : ` (exit code ${engine.exitCode})`}: ${engine.logTail.slice(-1)[0] ?? ''}`, { reasons: ['ENGINE_EXITED'] }));
          return true;
        }
        return false;
      };
      const onEvent = (event: AppEvent): void => {
        if (event.type === 'engine' && event.engine.id === engineId) check(event.engine);
      };
      const poll = setInterval(() => {
        if (gone()) {
          finish();
          reject(new ApiError('CONFLICT', 'client went away'));
        }
      }, 250);
      const timeout = setTimeout(() => {
        finish();
        reject(new ApiError('NOT_ADMITTED', `engine ${engineId} did not finish loading in ${LOAD_WAIT_MS / 60_000} minutes`));
      }, LOAD_WAIT_MS);
      const unsubscribe = this.core.subscribe(onEvent);
      function finish(): void {
        unsubscribe();
        clearInterval(poll);
        clearTimeout(timeout);
      }
      check(this.core.engines().find((e) => e.id === engineId));
    });
  }

  /** What the engine's port asks of a request: JSON, and its secret. */
  private upstreamHeaders(engine: EngineView, payload: string, accept: string | undefined): Record<string, string | number> {
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), accept: accept ?? '*/*' };
    const secret = this.core.engineSecret(engine.id);
    if (secret !== null) headers['authorization'] = `Bearer ${secret}`;
    return headers;
  }

  /**
   * Pass the request to the engine and its answer back, chunk by chunk as it comes. 'not-reached':
   * the engine could not be reached and nothing was sent (the caller may try another); 'cut': the
   * engine went away mid-answer (a stream gets a final error event naming ENGINE_GONE).
   */
  private forward(req: IncomingMessage, res: ServerResponse, engine: EngineView, path: CompletionPath, request: CompletionRequest, position: number): Promise<ForwardOutcome> {
    // The model as the client named it: the engines answer with it (llama-server and ours echo it).
    const payload = JSON.stringify({ ...request.body, model: request.model });
    return new Promise<ForwardOutcome>((resolve) => {
      let streaming = false;
      const cut = (): void => {
        if (!res.writableEnded && streaming) {
          const error = new ApiError('ENGINE_GONE', `engine ${engine.id} stopped while answering; send the request again`);
          res.end(`data: ${JSON.stringify(openAiErrorBody(error))}\n\n`);
        } else {
          res.destroy();
        }
        resolve('cut');
      };
      const upstream = httpRequest(
        { host: '127.0.0.1', port: engine.port ?? 0, path, method: 'POST', headers: this.upstreamHeaders(engine, payload, req.headers.accept) },
        (answer) => {
          const headers: Record<string, string> = { 'x-gpushare-queue-position': String(position), 'x-gpushare-engine': engine.id, 'cache-control': 'no-store' };
          const type = answer.headers['content-type'];
          if (type !== undefined) headers['content-type'] = type;
          streaming = type?.startsWith('text/event-stream') === true;
          res.writeHead(answer.statusCode ?? 502, headers);
          res.flushHeaders();
          answer.on('data', (chunk: Buffer) => res.write(chunk));
          answer.on('end', () => {
            // An engine killed mid-answer ends its side without finishing the response.
            if (!answer.complete) return cut();
            res.end();
            resolve('ok');
          });
          answer.on('error', cut);
          answer.on('aborted', cut);
        },
      );
      // A client that goes away frees the engine: the upstream request is aborted.
      res.on('close', () => {
        upstream.destroy();
        resolve('ok');
      });
      upstream.on('error', () => {
        if (!res.headersSent) resolve('not-reached');
        else cut();
      });
      upstream.end(payload);
    });
  }
}

/** Whatever stopped a load, as the gateway answers it: the planner's verdict and the engine's
 *  exit stay as they are; anything else (a file that could not be read, a spawn that failed) is a
 *  503 naming the profile, never an internal error. */
function asGatewayError(profile: Profile, error: unknown): ApiError {
  if (error instanceof ApiError && (error.code === 'NOT_ADMITTED' || error.code === 'CONFLICT' || error.code === 'ENGINE_GONE')) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new ApiError('NOT_ADMITTED', `${profile.name}: could not be loaded: ${message}`, { reasons: ['LOAD_FAILED'] });
}

function notAdmitted(profile: Profile, plan: PlacementPlan): ApiError {
  const reasons = plan.reasons.map((r) => r.code);
  return new ApiError('NOT_ADMITTED', `${profile.name}: ${plan.verdict}: ${plan.reasons.map(explainReason).join('; ')}`, { verdict: plan.verdict, reasons });
}
