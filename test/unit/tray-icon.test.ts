import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { TRAY_ICON_STATES, trayIconFile, trayIconState, trayTooltip } from '../../electron/shell/tray-icon.js';
import { device, peer, sketchState } from './shell-state.js';

describe('tray icon', () => {
  it('is idle (outline) when nobody works, pacing (filled) as soon as one peer does', () => {
    expect(trayIconState({ devices: [] })).toBe('idle');
    expect(trayIconState({ devices: [device({ peers: [peer(0, 'a'), peer(1, 'b')] })] })).toBe('idle');
    expect(trayIconState({ devices: [device({ peers: [peer(0, 'a', { active: true, sharePct: 100 })] })] })).toBe('pacing');
    expect(trayIconState(sketchState())).toBe('pacing');
  });

  it('shows the worst pressure of any device, idle or not', () => {
    expect(trayIconState({ devices: [device({ pressure: 'ELEVATED' })] })).toBe('pressure-elevated');
    expect(trayIconState({ devices: [device({ pressure: 'HIGH', peers: [peer(0, 'a', { active: true })] })] })).toBe('pressure-high');
    expect(trayIconState({ devices: [device({ pressure: 'ELEVATED' }), device({ key: 'GPU-2', pressure: 'CRITICAL' }), device({ key: 'GPU-3', pressure: 'HIGH' })] })).toBe('pressure-critical');
    expect(trayIconState({ devices: [device({ pressure: 'NORMAL' }), device({ key: 'GPU-2', pressure: 'ELEVATED' })] })).toBe('pressure-elevated');
  });

  it('names the file per platform: template PNG on macOS, .ico on Windows, PNG on Linux', () => {
    expect(trayIconFile('idle', 'darwin')).toBe('resources/tray/tray-idleTemplate.png');
    expect(trayIconFile('pressure-high', 'win32')).toBe('resources/tray/tray-pressure-high.ico');
    expect(trayIconFile('pacing', 'linux')).toBe('resources/tray/tray-pacing.png');
    expect(new Set(TRAY_ICON_STATES.map((state) => trayIconFile(state, 'linux'))).size).toBe(5);
  });

  it('names files that exist in resources/tray for every state and platform', () => {
    for (const platform of ['darwin', 'win32', 'linux'] as const) {
      for (const state of TRAY_ICON_STATES) {
        const file = trayIconFile(state, platform);
        expect(existsSync(new URL(`../../${file}`, import.meta.url)), file).toBe(true);
      }
    }
  });

  it('has a tooltip line per device', () => {
    expect(trayTooltip(sketchState())).toBe('GPU Share — RTX 4090 · pacing 3 peers · period 120 ms');
    expect(trayTooltip({ devices: [] })).toBe('GPU Share — no device found');
    expect(trayTooltip({ devices: [device(), device({ name: 'CPU', pressure: 'HIGH' })] }).split('\n')).toEqual(['GPU Share — RTX 4090 · idle', 'GPU Share — CPU · idle · pressure HIGH']);
  });
});
