import { join } from 'node:path';
import { homedir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { defaultDataDir } from '../../electron/core/paths.js';

describe('the default data folder', () => {
  it('follows XDG_DATA_HOME on Linux, ignoring an empty or relative one as the XDG spec says', () => {
    expect(defaultDataDir({ XDG_DATA_HOME: '/x/data' }, 'linux')).toBe('/x/data/gpu-share');
    const fallback = join(homedir(), '.local', 'share', 'gpu-share');
    expect(defaultDataDir({}, 'linux')).toBe(fallback);
    expect(defaultDataDir({ XDG_DATA_HOME: '' }, 'linux')).toBe(fallback);
    expect(defaultDataDir({ XDG_DATA_HOME: 'relative/data' }, 'linux')).toBe(fallback);
    expect(defaultDataDir({ GPU_SHARE_DATA_DIR: '/elsewhere', XDG_DATA_HOME: '/x' }, 'linux')).toBe('/elsewhere');
  });
});
