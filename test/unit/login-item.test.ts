import { describe, expect, it } from 'vitest';
import { autostartEntry, autostartFile, desktopExecArgument } from '../../electron/shell/login-item.js';

describe('Linux launch at login (XDG autostart)', () => {
  it('lives in $XDG_CONFIG_HOME/autostart, else ~/.config/autostart', () => {
    expect(autostartFile({ XDG_CONFIG_HOME: '/cfg' }, '/home/u')).toBe('/cfg/autostart/gpu-share.desktop');
    expect(autostartFile({}, '/home/u')).toBe('/home/u/.config/autostart/gpu-share.desktop');
    expect(autostartFile({ XDG_CONFIG_HOME: '' }, '/home/u')).toBe('/home/u/.config/autostart/gpu-share.desktop');
  });

  it('quotes Exec arguments as the Desktop Entry spec says', () => {
    expect(desktopExecArgument('/opt/gpu-share/GPU-Share.AppImage')).toBe('/opt/gpu-share/GPU-Share.AppImage');
    expect(desktopExecArgument('/home/u/My Apps/GPU Share.AppImage')).toBe('"/home/u/My Apps/GPU Share.AppImage"');
    expect(desktopExecArgument('a"b$c`d\\e')).toBe('"a\\"b\\$c\\`d\\\\e"');
    expect(desktopExecArgument('100%')).toBe('"100%%"');
  });

  it('writes an entry that starts the app, backslashes escaped once more as a string value', () => {
    const entry = autostartEntry(['/usr/lib/electron', '/home/u/src/gpu share']);
    expect(entry.split('\n')).toEqual([
      '[Desktop Entry]',
      'Type=Application',
      'Name=GPU Share',
      'Comment=Share one GPU between local LLM engines',
      'Exec=/usr/lib/electron "/home/u/src/gpu share"',
      'Terminal=false',
      'X-GNOME-Autostart-enabled=true',
      '',
    ]);
    expect(autostartEntry(['/x/a\\b c'])).toContain('Exec="/x/a\\\\\\\\b c"');
  });
});
