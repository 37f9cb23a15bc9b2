/**
 * The dashboard's live state: the event-folded model (app-model.ts), the connection, the chosen
 * device, and the one way views run actions (errors become notices with their code and next
 * step). Views read it; only this class writes it.
 */
import type { AppEvent, DeviceView, EstimateOptions, GpuShareApi, ModelEstimateView, ShellExtras } from '../../../electron/core/contract.js';
import { applyEvent, dismissNotice, initialModel, tick, withNotice, type AppModel, type Notice } from './app-model.js';
import type { Connection } from './bridge.js';
import type { ConnectionStatus } from './connection.js';
import { describeError } from './errors.js';

const TICK_MS = 250;
const SELECTED_DEVICE_KEY = 'gpu-share.device';

export type LiveConnection = Exclude<Connection, { kind: 'no-token' }>;

export class DashboardStore {
  model: AppModel = $state.raw(initialModel());
  connection: ConnectionStatus = $state.raw({ state: 'connecting', detail: null, retryAtMs: null });
  selectedKey: string | null = $state(null);
  /** Why the first state could not be read (shown instead of the views). */
  loadError: string | null = $state(null);
  /** estimateKey(file, options) → the planner's estimate (the cards' file size and needs). */
  estimates: Record<string, ModelEstimateView | { error: string }> = $state.raw({});
  /** The renderer's wall clock, ms, ticking every TICK_MS: for "0.4 s ago" and countdowns. */
  nowMs: number = $state(Date.now());
  /** What was just copied to the clipboard (a button's key), for 2 s. */
  copied: string | null = $state(null);
  /** When the last state arrived (wall ms); null before the first. */
  lastStateAtMs: number | null = $state(null);

  readonly api: GpuShareApi;
  readonly shell: ShellExtras | null;
  readonly token: string | null;
  readonly transport: 'ipc' | 'http';
  private readonly connectionSource: LiveConnection;
  private noticeCounter = 0;
  private readonly estimating = new Set<string>();

  constructor(connection: LiveConnection) {
    this.connectionSource = connection;
    this.api = connection.api;
    this.shell = connection.shell;
    this.token = connection.token;
    this.transport = connection.kind;
    try {
      this.selectedKey = sessionStorage.getItem(SELECTED_DEVICE_KEY);
    } catch {
      this.selectedKey = null;
    }
  }

  /** Subscribe and load; returns the teardown. */
  start(): () => void {
    const unsubscribe = this.api.subscribe((event) => this.apply(event));
    void this.refresh();
    let previous: ConnectionStatus['state'] = 'connecting';
    const stopConnection = this.connectionSource.onConnection((status) => {
      this.connection = status;
      // Events may have been missed while the stream was down: take a fresh state.
      if (status.state === 'live' && previous === 'lost') void this.refresh();
      previous = status.state;
    });
    const timer = setInterval(() => {
      this.nowMs = Date.now();
      const next = tick(this.model, this.nowMs);
      if (next !== this.model) this.model = next;
    }, TICK_MS);
    return () => {
      clearInterval(timer);
      stopConnection();
      unsubscribe();
    };
  }

  async refresh(): Promise<void> {
    try {
      const state = await this.api.getState();
      this.apply({ type: 'state', state });
      this.loadError = null;
    } catch (error) {
      const words = describeError('Reading the state', error);
      if (this.model.state === null) this.loadError = words.text;
      else this.notify(words.text, 'bad');
    }
  }

  apply(event: AppEvent): void {
    const wallMs = Date.now();
    this.model = applyEvent(this.model, event, { wallMs, perfMs: performance.now() });
    if (event.type === 'state') this.lastStateAtMs = wallMs;
  }

  /** The server or app core is gone: every control is off and the data is stale. */
  get offline(): boolean {
    return this.connection.state === 'lost' || this.connection.state === 'refused';
  }

  get devices(): DeviceView[] {
    return this.model.state?.devices ?? [];
  }

  /** The chosen device, else the first. */
  get device(): DeviceView | null {
    const devices = this.devices;
    return devices.find((d) => d.key === this.selectedKey) ?? devices[0] ?? null;
  }

  selectDevice(key: string): void {
    this.selectedKey = key;
    try {
      sessionStorage.setItem(SELECTED_DEVICE_KEY, key);
    } catch {
      // Not kept across reloads then; the choice still holds for this page.
    }
  }

  /** Engine id → its name (for plans, which carry ids only). */
  nameOfEngine = (engineId: string): string =>
    this.model.state?.engines.find((e) => e.id === engineId)?.name ?? this.devices.flatMap((d) => d.peers).find((p) => p.engineId === engineId)?.name ?? engineId;

  notify(text: string, tone: Notice['tone'] = 'info'): void {
    this.noticeCounter++;
    this.model = withNotice(this.model, { id: `local:${this.noticeCounter}`, text, tone, atMs: Date.now() });
  }

  dismiss(id: string): void {
    this.model = dismissNotice(this.model, id);
  }

  /** Put text on the clipboard; `copied` names what was copied for 2 s (the button says so). A
   *  failure becomes a notice. */
  async copyText(what: string, text: string): Promise<void> {
    try {
      await navigator.clipboard.writeText(text);
    } catch (error) {
      this.notify(`Copying failed — ${error instanceof Error ? error.message : String(error)} (select the text and copy it by hand)`, 'bad');
      return;
    }
    this.copied = what;
    setTimeout(() => {
      if (this.copied === what) this.copied = null;
    }, 2000);
  }

  /** Run an action; a failure becomes a notice (and null). */
  async act<T>(what: string, action: () => Promise<T>): Promise<T | null> {
    try {
      return await action();
    } catch (error) {
      this.notify(describeError(what, error).text, 'bad');
      return null;
    }
  }

  /** The planner's figures for a model file at a context (the model's default when none is
   *  given), fetched once per file and options; read them with estimateKey. */
  estimate(modelPath: string, options: EstimateOptions = {}): void {
    const key = estimateKey(modelPath, options);
    if (modelPath === '' || this.estimating.has(key) || this.estimates[key] !== undefined) return;
    this.estimating.add(key);
    this.api.estimateModel(modelPath, options).then(
      (estimate) => {
        this.estimates = { ...this.estimates, [key]: estimate };
      },
      (error: unknown) => {
        this.estimates = { ...this.estimates, [key]: { error: describeError('Estimating the model', error).text } };
      },
    );
  }
}

/** Where store.estimates keeps the figures of a file at some options. */
export function estimateKey(modelPath: string, options: EstimateOptions = {}): string {
  return `${modelPath}\u0000${options.contextSize ?? ''}\u0000${options.kvCacheType ?? ''}`;
}
