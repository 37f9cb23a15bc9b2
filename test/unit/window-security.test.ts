import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { contentSecurityPolicy, devRendererOrigin, isAppRendererUrl, isRendererResource, mainWindowOptions, mayNavigate, type RendererLocation } from '../../electron/shell/window-security.js';

const INDEX = '/home/u/gpu-share/dist/renderer/index.html';
const location: RendererLocation = { kind: 'file', indexPath: INDEX };
const fileUrl = (path: string): string => pathToFileURL(path).href;

/** A policy as directive → sources. */
function parsePolicy(policy: string): Map<string, string[]> {
  const directives = new Map<string, string[]>();
  for (const part of policy.split(';')) {
    const [name, ...sources] = part.trim().split(/\s+/);
    if (name !== undefined && name !== '') directives.set(name, sources);
  }
  return directives;
}

describe('dashboard window options', () => {
  it('is 1100×720, usable down to 800×600, shown when painted', () => {
    const options = mainWindowOptions('/app/dist/electron/preload.cjs');
    expect([options.width, options.height, options.minWidth, options.minHeight, options.show]).toEqual([1100, 720, 800, 600, false]);
  });

  it('isolates the page: sandbox, context isolation, no Node, web security, the preload', () => {
    const prefs = mainWindowOptions('/app/dist/electron/preload.cjs').webPreferences;
    expect(prefs).toMatchObject({
      preload: '/app/dist/electron/preload.cjs',
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInSubFrames: false,
      nodeIntegrationInWorker: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
    });
  });
});

describe('content security policy', () => {
  const policy = parsePolicy(contentSecurityPolicy());

  it('allows only the app itself, and never evaluates strings', () => {
    expect(policy.get('default-src')).toEqual(["'self'"]);
    expect(policy.get('connect-src')).toEqual(["'self'"]);
    expect(policy.get('script-src')).toEqual(["'self'"]);
    expect(policy.get('object-src')).toEqual(["'none'"]);
    expect(policy.get('base-uri')).toEqual(["'none'"]);
    expect(policy.get('frame-ancestors')).toEqual(["'none'"]);
    expect(contentSecurityPolicy()).not.toMatch(/unsafe-eval|\*|https?:|ws:/);
  });

  it("allows everything the renderer's own <meta> policy allows (both apply: the header must not break the page)", () => {
    const html = readFileSync(new URL('../../renderer/index.html', import.meta.url), 'utf8');
    const meta = /http-equiv="Content-Security-Policy"\s+content="([^"]+)"/.exec(html);
    expect(meta).not.toBeNull();
    const rendererPolicy = parsePolicy(meta?.[1] ?? '');
    for (const [directive, sources] of rendererPolicy) {
      const ours = policy.get(directive) ?? policy.get('default-src') ?? [];
      for (const source of sources) expect(ours, `${directive} ${source}`).toContain(source);
    }
  });
});

describe('renderer URLs', () => {
  it('knows the entry page, whatever the route in its hash', () => {
    expect(isAppRendererUrl(fileUrl(INDEX), location)).toBe(true);
    expect(isAppRendererUrl(`${fileUrl(INDEX)}#/models`, location)).toBe(true);
    expect(isAppRendererUrl(`${fileUrl(INDEX)}?x=1`, location)).toBe(true);
  });

  it('lets the window navigate nowhere but its own page', () => {
    expect(mayNavigate(`${fileUrl(INDEX)}#/gpu`, location)).toBe(true);
    for (const url of [
      'https://example.com/',
      'http://127.0.0.1:7787/',
      fileUrl('/home/u/gpu-share/dist/renderer/other.html'),
      fileUrl('/etc/passwd'),
      'javascript:alert(1)',
      'data:text/html,<script>1</script>',
      'file://evil-host/home/u/gpu-share/dist/renderer/index.html',
      '',
    ]) {
      expect(mayNavigate(url, location), url).toBe(false);
    }
  });

  it('counts files under the renderer folder as its resources, and nothing walks out of it', () => {
    expect(isRendererResource(fileUrl('/home/u/gpu-share/dist/renderer/assets/index-abc.js'), location)).toBe(true);
    expect(isRendererResource('file:///home/u/gpu-share/dist/renderer/../../secret.txt', location)).toBe(false);
    expect(isRendererResource('file:///home/u/gpu-share/dist/renderer%2F..%2F..%2Fsecret', location)).toBe(false);
    expect(isRendererResource(fileUrl('/home/u/gpu-share/dist/renderer-other/x.js'), location)).toBe(false);
    expect(isRendererResource('https://example.com/home/u/gpu-share/dist/renderer/a.js', location)).toBe(false);
  });

  it('handles paths that need escaping in a file URL', () => {
    const spaced: RendererLocation = { kind: 'file', indexPath: '/opt/GPU Share/resources/app.asar/dist/renderer/index.html' };
    expect(isAppRendererUrl('file:///opt/GPU%20Share/resources/app.asar/dist/renderer/index.html#/', spaced)).toBe(true);
    expect(isAppRendererUrl('file:///opt/GPU Share/resources/app.asar/dist/renderer/index.html', spaced)).toBe(true);
  });

  it('takes a development server only on loopback over http(s)', () => {
    expect(devRendererOrigin('http://127.0.0.1:5173/')).toBe('http://127.0.0.1:5173');
    expect(devRendererOrigin('http://localhost:5173')).toBe('http://localhost:5173');
    for (const value of [undefined, '', 'http://192.168.1.2:5173', 'https://example.com', 'file:///tmp/index.html', 'http://127.0.0.1.evil.com:5173', 'nonsense']) {
      expect(devRendererOrigin(value), String(value)).toBeNull();
    }
    const dev: RendererLocation = { kind: 'origin', origin: 'http://127.0.0.1:5173' };
    expect(mayNavigate('http://127.0.0.1:5173/#/peers', dev)).toBe(true);
    expect(mayNavigate('http://127.0.0.1:5174/', dev)).toBe(false);
  });
});
