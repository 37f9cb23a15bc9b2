/**
 * The tray icon tells the state without opening anything (UX.md): idle (outline), pacing (filled:
 * some peer is working), or a pressure dot (ELEVATED yellow, HIGH orange, CRITICAL red), the worst
 * device deciding. Pure: the state in, the icon's name and file out.
 */
import type { AppState, PressureLevel } from '../core/contract.js';
import { headerLine } from './tray-menu.js';

export type TrayIconState = 'idle' | 'pacing' | 'pressure-elevated' | 'pressure-high' | 'pressure-critical';

export const TRAY_ICON_STATES: readonly TrayIconState[] = ['idle', 'pacing', 'pressure-elevated', 'pressure-high', 'pressure-critical'];

const PRESSURE_RANK: Readonly<Record<PressureLevel, number>> = { NORMAL: 0, ELEVATED: 1, HIGH: 2, CRITICAL: 3 };
const PRESSURE_ICON: Readonly<Record<Exclude<PressureLevel, 'NORMAL'>, TrayIconState>> = {
  ELEVATED: 'pressure-elevated',
  HIGH: 'pressure-high',
  CRITICAL: 'pressure-critical',
};

export function trayIconState(state: Pick<AppState, 'devices'>): TrayIconState {
  let worst: PressureLevel = 'NORMAL';
  for (const device of state.devices) if (PRESSURE_RANK[device.pressure] > PRESSURE_RANK[worst]) worst = device.pressure;
  if (worst !== 'NORMAL') return PRESSURE_ICON[worst];
  // Filled as soon as anyone works, alone at full speed included: outline means nothing runs.
  return state.devices.some((device) => device.peers.some((peer) => peer.active)) ? 'pacing' : 'idle';
}

/**
 * The icon file, relative to the app's root: template images on macOS (the menu bar tints them;
 * `@2x` variants beside them are picked up by name), .ico on Windows, PNG on Linux.
 */
export function trayIconFile(icon: TrayIconState, platform: NodeJS.Platform): string {
  if (platform === 'darwin') return `resources/tray/tray-${icon}Template.png`;
  if (platform === 'win32') return `resources/tray/tray-${icon}.ico`;
  return `resources/tray/tray-${icon}.png`;
}

/** The tooltip: one line per device, as the menu's header says it. */
export function trayTooltip(state: Pick<AppState, 'devices'>): string {
  if (state.devices.length === 0) return 'GPU Share — no device found';
  return state.devices.map(headerLine).join('\n');
}
