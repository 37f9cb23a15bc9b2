/**
 * The tray menu as a pure function of the app's state: plain data (labels, checks, what a click
 * does), which tray.ts turns into an Electron Menu. Layout (UX.md):
 *
 *   GPU Share — RTX 4090 · pacing 3 peers · period 120 ms
 *   ───
 *   ● qwen-chat  50%  ▸  Weight ▸ 0.25 · 0.5 · 1 · 2 · 4 │ Stop │ Kill
 *   ○ embed (idle)  0%  ▸
 *   ◌ llamafile (peer)  25%  (foreign: read-only)
 *   ───
 *   Launch ▸ profiles (with the last plan's verdict when it was not ADMIT)
 *   Pause lab work ✓
 *   ───
 *   Open dashboard…
 *   Quit GPU Share
 */
import type { AppState, DeviceView, EngineView, PeerRow, PlacementPlan, Verdict } from '../core/contract.js';
import { WEIGHT_PRESETS } from '../core/contract.js';
import { explainReason } from '../core/planner/describe.js';

/** What a click does; tray.ts maps each kind to one core call. */
export type TrayAction =
  | { kind: 'setWeight'; engineId: string; weight: number }
  | { kind: 'stop'; engineId: string }
  | { kind: 'kill'; engineId: string }
  | { kind: 'launch'; profileId: string }
  | { kind: 'labPause'; paused: boolean }
  | { kind: 'openDashboard' }
  | { kind: 'quit' };

export interface TrayMenuItem {
  label: string;
  type: 'normal' | 'separator' | 'submenu' | 'checkbox' | 'radio';
  checked: boolean;
  enabled: boolean;
  submenu: TrayMenuItem[] | null;
  action: TrayAction | null;
}

/** The tray offers the presets marked on the dashboard's slider (which sets anything from
 *  WEIGHT_MIN to WEIGHT_MAX, as the CLI and the API do). */
export { WEIGHT_PRESETS };

const item = (label: string, action: TrayAction | null, enabled = true): TrayMenuItem => ({ label, type: 'normal', checked: false, enabled, submenu: null, action });
const info = (label: string): TrayMenuItem => item(label, null, false);
const separator = (): TrayMenuItem => ({ label: '', type: 'separator', checked: false, enabled: true, submenu: null, action: null });
const submenu = (label: string, items: TrayMenuItem[], enabled = true): TrayMenuItem => ({ label, type: 'submenu', checked: false, enabled, submenu: items, action: null });

/** Registry weights are f32: 0.5 comes back exact, a slider's 0.3 does not. */
const sameWeight = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-4 * Math.max(1, Math.abs(b));

export function formatWeight(weight: number): string {
  if (!Number.isFinite(weight)) return '—';
  return String(Number(weight.toPrecision(3)));
}

export function formatSharePct(pct: number): string {
  return Number.isFinite(pct) ? `${Math.round(pct)}%` : '—';
}

/** The header's words for a device's pacing. */
export function pacingWords(device: Pick<DeviceView, 'peers' | 'schedule'>): string {
  const active = device.peers.filter((peer) => peer.active).length;
  if (active === 0) return 'idle';
  if (active === 1 || device.schedule === null) return 'alone: full speed';
  return `pacing ${active} peers · period ${Math.round(device.schedule.periodUs / 1000)} ms`;
}

export function headerLine(device: DeviceView): string {
  const pressure = device.pressure === 'NORMAL' ? '' : ` · pressure ${device.pressure}`;
  return `GPU Share — ${device.name} · ${pacingWords(device)}${pressure}`;
}

function weightMenu(engineId: string, current: number): TrayMenuItem[] {
  const weights = WEIGHT_PRESETS.some((w) => sameWeight(current, w)) || !Number.isFinite(current) ? [...WEIGHT_PRESETS] : [...WEIGHT_PRESETS, current].sort((a, b) => a - b);
  return weights.map((weight) => {
    const preset = WEIGHT_PRESETS.includes(weight);
    return {
      label: preset ? formatWeight(weight) : `${formatWeight(weight)} (current)`,
      type: 'radio',
      checked: sameWeight(current, weight),
      // A weight set from the dashboard is shown, not offered: picking a preset replaces it.
      enabled: preset,
      submenu: null,
      action: preset ? { kind: 'setWeight', engineId, weight } : null,
    };
  });
}

function engineActions(engineId: string, weight: number, engine: EngineView | undefined): TrayMenuItem[] {
  const state = engine?.state;
  const gone = state === 'stopped' || state === 'exited' || state === 'crashed';
  return [
    submenu('Weight', weightMenu(engineId, weight), !gone && state !== 'stopping'),
    item('Stop', { kind: 'stop', engineId }, !gone && state !== 'stopping'),
    item('Kill', { kind: 'kill', engineId }, !gone),
  ];
}

function peerRow(peer: PeerRow, engines: ReadonlyMap<string, EngineView>): TrayMenuItem {
  const share = formatSharePct(peer.active ? peer.sharePct : 0);
  if (peer.engineId === null) {
    return info(`◌ ${peer.name} (peer)${peer.active ? '' : ' (idle)'}  ${share}  (foreign: read-only)`);
  }
  const engine = engines.get(peer.engineId);
  const label = `${peer.active ? '●' : '○'} ${peer.name}${peer.active ? '' : ' (idle)'}  ${share}`;
  return submenu(label, engineActions(peer.engineId, engine?.weight ?? peer.weight, engine));
}

/** An engine of ours that holds no slot yet (loading) or any more (stopping). */
function slotlessEngineRow(engine: EngineView): TrayMenuItem {
  const what = engine.state === 'loading' ? `loading ${Math.round(engine.progressPct)}%` : 'stopping';
  return submenu(`◌ ${engine.name} (${what})`, engineActions(engine.id, engine.weight, engine));
}

function launchMenu(state: AppState, verdicts: ReadonlyMap<string, Verdict>): TrayMenuItem {
  if (state.profiles.length === 0) return submenu('Launch', [info('No profiles yet: add a model in the dashboard')]);
  const live = new Set(state.engines.filter((e) => e.state === 'loading' || e.state === 'running').map((e) => e.profileId));
  const items = state.profiles.map((profile) => {
    if (live.has(profile.id)) return info(`${profile.name} (running)`);
    const verdict = verdicts.get(profile.id);
    const suffix = verdict === undefined || verdict === 'ADMIT' ? '' : ` (last plan: ${verdict})`;
    return item(`${profile.name}${suffix}`, { kind: 'launch', profileId: profile.id });
  });
  return submenu('Launch', items);
}

/**
 * The menu for a state. `verdicts`: the last plan's verdict per profile id, as the shell saw it
 * (plans carry no profile id, so the shell remembers them as it launches and plans).
 */
export function buildTrayMenu(state: AppState, verdicts: ReadonlyMap<string, Verdict> = new Map()): TrayMenuItem[] {
  const engines = new Map(state.engines.map((engine) => [engine.id, engine]));
  const menu: TrayMenuItem[] = [];
  if (state.devices.length === 0) menu.push(info('GPU Share — no device found'));
  for (const [index, device] of state.devices.entries()) {
    if (index > 0) menu.push(separator());
    menu.push(info(headerLine(device)), separator());
    const peers = [...device.peers].sort((a, b) => a.slot - b.slot);
    const seated = new Set(peers.map((peer) => peer.engineId).filter((id) => id !== null));
    const slotless = state.engines.filter((e) => (e.state === 'loading' || e.state === 'stopping') && e.gpuKey === device.key && !seated.has(e.id));
    for (const peer of peers) menu.push(peerRow(peer, engines));
    for (const engine of slotless) menu.push(slotlessEngineRow(engine));
    if (peers.length === 0 && slotless.length === 0) menu.push(info('No engines on this device'));
  }
  menu.push(
    separator(),
    launchMenu(state, verdicts),
    { label: 'Pause lab work', type: 'checkbox', checked: state.policy.labPaused, enabled: true, submenu: null, action: { kind: 'labPause', paused: !state.policy.labPaused } },
    separator(),
    item('Open dashboard…', { kind: 'openDashboard' }),
    item('Quit GPU Share', { kind: 'quit' }),
  );
  return menu;
}

/** The line a notification shows when a tray action fails: the code first, for searching. */
export function failureText(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'code' in error && 'message' in error && typeof error.code === 'string' && typeof error.message === 'string') {
    return `${error.code}: ${error.message}`;
  }
  return error instanceof Error ? error.message : String(error);
}

/** What to tell the user when a launch from the tray was not admitted: the verdict, then each
 *  reason in plain words with its figures. */
export function refusalText(profileName: string, plan: PlacementPlan): string {
  const reasons = plan.reasons.map(explainReason).join('; ');
  return `${profileName} was not launched: ${plan.verdict}${reasons === '' ? '' : ` — ${reasons}`}`;
}
