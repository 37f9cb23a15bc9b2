/**
 * The dashboard's details as a person meets them, at 800×600 and at 1280×800, in Debian's
 * Chromium against a real `gpu-share serve` (a simulated GPU and the host CPU as devices, a
 * built-in engine on a generated tiny model):
 * - a weight control with fine steps: a slider with travel enough for a doubling per 8 px or
 *   more, arrow keys ×1.1, and a typed value that says why it was refused;
 * - a crashed engine's cause shown whole, never cut;
 * - a refused token said as such, with a way to paste the address again;
 * - the host CPU named "CPU" with "memory", never "GPU" or "VRAM";
 * - one tokens-per-second figure, named the same in Peers and Timeline, of the same engine.
 *
 * Needs `npm run build`; skipped, saying why, where that or Chromium is missing (never in CI).
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LaunchOutcome, PeerRow } from '../../electron/core/contract.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../../test/fixtures/gguf.js';
import { removeSegment } from '../../test/fixtures/segments.js';
import { call, startServe, state, until, type Served } from '../../test/fixtures/serve.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const missing = [
  existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (set CHROMIUM_PATH)`,
  existsSync(join(ROOT, 'dist', 'renderer', 'index.html')) ? null : 'dashboard not built (npm run build:renderer)',
  existsSync(join(ROOT, 'dist', 'electron', 'cli.js')) ? null : 'core not built (npm run build:ts)',
].filter((reason): reason is string => reason !== null);

const KEY = `GPU-details-${process.pid}`;
const VIEWPORTS = [
  { width: 800, height: 600 },
  { width: 1280, height: 800 },
] as const;
let dir = '';
let served: Served | null = null;
let browser: Browser | null = null;
let page: Page;
const pageErrors: string[] = [];
let chatting = false;
let chats: Promise<void> = Promise.resolve();

const server = (): Served => {
  if (served === null) throw new Error('gpu-share serve is not running');
  return served;
};

const peerOf = async (name: string): Promise<PeerRow | undefined> => (await state(server())).devices.find((d) => d.key === KEY)?.peers.find((p) => p.name === name);

/** Whether an element shows all of its text: nothing cut by its own box or by an ancestor's. */
async function shownWhole(locator: Locator): Promise<{ whole: boolean; why: string }> {
  return locator.evaluate((el) => {
    if (el.scrollWidth > el.clientWidth + 1) return { whole: false, why: `its text needs ${el.scrollWidth} px in ${el.clientWidth} px` };
    const box = el.getBoundingClientRect();
    for (let up = el.parentElement; up !== null; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (style.overflowX === 'visible' && style.overflowY === 'visible') continue;
      const outer = up.getBoundingClientRect();
      if (box.left < outer.left - 1 || box.right > outer.right + 1) return { whole: false, why: `${up.tagName}.${up.className} clips it (${Math.round(box.left)}–${Math.round(box.right)} in ${Math.round(outer.left)}–${Math.round(outer.right)})` };
      // A scrolling ancestor shows it after a scroll: that is not cut.
      if (style.overflowX === 'auto' || style.overflowX === 'scroll') break;
    }
    return { whole: true, why: '' };
  });
}

async function show(view: 'peers' | 'timeline' | 'models' | 'gpu' | 'settings'): Promise<void> {
  await page.getByTestId(`nav-${view}`).click();
  await page.locator(`#view[data-view="${view}"]`).waitFor();
}

async function selectDevice(key: string): Promise<void> {
  await page.getByTestId('device-picker').selectOption(key);
}

if (process.env['CI'] !== undefined && missing.length > 0) {
  it('has what the end-to-end tests need', () => {
    expect(missing).toEqual([]);
  });
}

describe.skipIf(missing.length > 0)(`dashboard details at 800×600 and 1280×800${missing.length > 0 ? ` — skipped: ${missing.join('; ')}` : ''}`, () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpushare-details-'));
    writeGguf(join(dir, 'tiny.gguf'), TINY_GGUF_SPEC);
    const sim = join(dir, 'sim.json');
    writeFileSync(
      sim,
      JSON.stringify({
        devices: [
          { key: KEY, name: 'Sim 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK', utilizationPct: 35, temperatureC: 52, powerW: 120 },
          { key: 'cpu-0', name: 'Host CPU', totalBytes: 16 * GiB, usedBytes: 4 * GiB, processes: null, health: 'OK', utilizationPct: 10, temperatureC: null, powerW: null },
        ],
      }),
    );
    served = await startServe({ dataDir: join(dir, 'data'), sim });
    // Two engines decoding at once: the Timeline draws windows only when peers share the device.
    for (const id of ['chat-a', 'chat-b']) {
      const profile = { id, name: id, capabilities: [id], engineKind: 'builtin', modelPath: join(dir, 'tiny.gguf'), contextSize: 256, threads: 1, priority: 'interactive', weight: 1, gpuKey: KEY };
      expect((await call(server(), 'POST', '/api/profiles', profile)).status).toBe(201);
      const launched = await call<LaunchOutcome>(server(), 'POST', '/api/engines', { profileId: id, gpuKey: KEY });
      expect(launched.status, JSON.stringify(launched.body)).toBe(202);
    }
    await until(async () => ((await state(server())).engines.filter((e) => e.state === 'running').length === 2 ? true : undefined), 90_000, 'chat-a and chat-b running');
    // Chats go on through the gateway, so that the engines have rates to show.
    chatting = true;
    const chatWith = async (model: string, tokens: number): Promise<void> => {
      for (let i = 0; chatting; i++) await call(server(), 'POST', '/v1/chat/completions', { model, messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: tokens }).catch(() => undefined);
    };
    chats = Promise.all([chatWith('chat-a', 32), chatWith('chat-b', 48)]).then(() => undefined);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage({ viewport: VIEWPORTS[0] });
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    await page.goto(`${server().base}/#token=${server().token}`);
    await page.locator('[data-testid="connection-state"][data-state="live"]').waitFor({ timeout: 10_000 });
    await selectDevice(KEY);
  }, 120_000);

  afterAll(async () => {
    chatting = false;
    await chats;
    await browser?.close();
    await served?.stop();
    removeSegment(KEY);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  for (const viewport of VIEWPORTS) {
    it(`${viewport.width}×${viewport.height}: the weight slider has travel (≥ 8 px per doubling), arrows step ×1.1, a bad typed weight says why`, async () => {
      await page.setViewportSize(viewport);
      await show('peers');
      const peer = await until(() => peerOf('chat-a'), 10_000, 'chat-a in the registry');
      const row = page.locator(`[data-testid="peer-row"][data-slot="${peer.slot}"]`);
      const slider = row.getByTestId('weight-slider');
      const box = await slider.boundingBox();
      if (box === null) throw new Error('no slider');
      // 0.01–100 is 13.3 doublings.
      expect(box.width / Math.log2(100 / 0.01), `slider ${box.width} px wide`).toBeGreaterThanOrEqual(8);

      const field = row.getByTestId('weight-input');
      await field.fill('1');
      await field.press('Enter');
      await until(async () => ((await peerOf('chat-a'))?.weight === 1 ? true : undefined), 5_000, 'weight 1');
      await slider.focus();
      await page.keyboard.press('ArrowUp');
      await until(async () => ((await peerOf('chat-a'))?.weight === 1.1 ? true : undefined), 5_000, 'weight 1.1 after one ArrowUp');
      await page.keyboard.press('ArrowDown');
      await until(async () => ((await peerOf('chat-a'))?.weight === 1 ? true : undefined), 5_000, 'weight 1 after one ArrowDown');

      for (const [typed, why] of [
        ['abc', /not a number/],
        ['0', /out of range.*0\.01 to 100/],
        ['500', /out of range.*0\.01 to 100/],
      ] as const) {
        await field.fill(typed);
        await field.press('Enter');
        const error = row.getByTestId('weight-error');
        await error.waitFor({ timeout: 2_000 });
        expect(await error.textContent()).toMatch(why);
        expect(await field.getAttribute('aria-invalid')).toBe('true');
        expect((await shownWhole(error)).why).toBe('');
      }
      await field.press('Escape');
      await expect.poll(() => row.getByTestId('weight-error').count()).toBe(0);
      expect((await peerOf('chat-a'))?.weight).toBe(1);
    }, 40_000);

    it(`${viewport.width}×${viewport.height}: one tok/s figure, named the same in Peers and Timeline, of the same engine`, async () => {
      await page.setViewportSize(viewport);
      const peer = await until(() => peerOf('chat-a'), 10_000, 'chat-a in the registry');
      await until(async () => {
        const engine = (await state(server())).engines.find((e) => e.profileId === 'chat-a');
        return engine?.tokensPerSecond !== null && (engine?.tokensPerSecond ?? 0) > 0 ? true : undefined;
      }, 30_000, 'chat-a decoding with a rate');
      await until(async () => ((await state(server())).devices.find((d) => d.key === KEY)?.schedule?.windows.length === 2 ? true : undefined), 20_000, 'both engines in the schedule');
      // Read in one view, then the other, until both show the same figure (it moves every 2 s).
      let peersFigure = '';
      let timelineFigure = '';
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        await show('peers');
        const row = page.locator(`[data-testid="peer-row"][data-slot="${peer.slot}"]`);
        const cell = row.getByTestId('tokens-per-second');
        // At 800 px the rate column makes room for the weight: its figure is in the Timeline.
        peersFigure = (await cell.isVisible()) ? ((await cell.textContent()) ?? '') : '';
        await show('timeline');
        const canvas = page.getByTestId('timeline-canvas');
        const canvasBox = await canvas.boundingBox();
        const drawn = await until(async () => (await page.evaluate(() => window.__gpuShareTimeline ?? null)) ?? undefined, 10_000, 'the timeline drawn');
        const lane = drawn.lanes.find((l) => l.name === 'chat-a');
        if (canvasBox === null || lane === undefined) throw new Error('no canvas or lane for chat-a');
        timelineFigure = '';
        for (let x = canvasBox.x + canvasBox.width - 2; x > canvasBox.x + canvasBox.width - 120 && timelineFigure === ''; x -= 3) {
          await page.mouse.move(x, canvasBox.y + lane.top + lane.height / 2);
          const tip = page.getByTestId('timeline-tip');
          if ((await tip.count()) > 0) {
            expect(await tip.locator('dt', { hasText: 'tok/s' }).count()).toBe(1);
            timelineFigure = (await tip.getByTestId('timeline-tokens-per-second').textContent()) ?? '';
          }
        }
        await page.mouse.move(0, 0);
        if (timelineFigure !== '' && (peersFigure === '' || peersFigure === timelineFigure)) break;
      }
      expect(timelineFigure).toMatch(/^\d+\.\d$/);
      if (viewport.width >= 1280) {
        expect(peersFigure).toBe(timelineFigure);
        await show('peers');
        expect(await page.locator('thead th', { hasText: /^tok\/s$/ }).count()).toBe(1);
      }
    }, 60_000);

    it(`${viewport.width}×${viewport.height}: the host CPU as a device is "CPU" with "memory" in every view`, async () => {
      await page.setViewportSize(viewport);
      await selectDevice('cpu-0');
      try {
        await expect.poll(() => page.getByTestId('nav-gpu').textContent()).toBe('CPU');
        for (const view of ['peers', 'timeline', 'models', 'gpu', 'settings'] as const) {
          await show(view);
          const text = (await page.locator('main').innerText()).replace(/GPU Share/g, '');
          expect(text, `the ${view} view`).not.toMatch(/\bGPUs?\b|\bVRAM\b/);
        }
        await show('gpu');
        expect(await page.getByTestId('device-view-title').textContent()).toBe('CPU');
        expect(await page.getByTestId('memory-title').textContent()).toBe('Memory');
      } finally {
        await selectDevice(KEY);
      }
      await expect.poll(() => page.getByTestId('nav-gpu').textContent()).toBe('GPU');
    }, 40_000);
  }

  it('a crashed engine\'s cause is shown whole at 800×600 and at 1280×800', async () => {
    await show('peers');
    const peer = await until(() => peerOf('chat-a'), 5_000, 'chat-a in the registry');
    const engine = (await state(server())).engines.find((e) => e.profileId === 'chat-a' && e.state === 'running');
    if (engine === undefined) throw new Error('chat-a is not running');
    chatting = false;
    await chats;
    process.kill(-engine.pid, 'SIGKILL');
    const row = page.locator(`[data-testid="peer-row"][data-slot="${peer.slot}"][data-pid="${peer.pid}"]`);
    await row.locator('[data-testid="crashed"]').waitFor({ timeout: 5_000 });
    for (const viewport of VIEWPORTS) {
      await page.setViewportSize(viewport);
      const crashed = row.getByTestId('crashed');
      expect(await crashed.textContent()).toMatch(/^crashed \(SIGKILL\) · \d+(\.\d)? s ago$/);
      const shown = await shownWhole(crashed);
      expect(shown.why, `at ${viewport.width}×${viewport.height}`).toBe('');
    }
  }, 30_000);

  it('a refused token says so and takes the address again (800×600 and 1280×800)', async () => {
    for (const viewport of VIEWPORTS) {
      const other = await (browser as Browser).newPage({ viewport });
      try {
        await other.goto(`${server().base}/#token=not-the-token`);
        const refused = other.getByTestId('token-refused');
        await refused.waitFor({ timeout: 10_000 });
        expect(await other.locator('[data-testid="connection-state"]').getAttribute('data-state')).toBe('refused');
        expect(await other.getByTestId('connection-state').textContent()).toContain('token refused');
        expect(await refused.textContent()).toContain('refused');
        // No "connection lost" with a disabled button: the field and Open work.
        const address = other.getByTestId('token-address');
        expect(await address.isEnabled()).toBe(true);
        await address.fill('http://127.0.0.1:1/');
        await other.getByTestId('token-open').click();
        expect(await other.getByTestId('token-address-error').textContent()).toContain('no token');
        await address.fill(`${server().base}/#token=${server().token}`);
        await other.getByTestId('token-open').click();
        await other.locator('[data-testid="connection-state"][data-state="live"]').waitFor({ timeout: 10_000 });
        expect(await other.getByTestId('token-refused').count()).toBe(0);
        expect(other.url()).not.toContain(server().token);
      } finally {
        await other.close();
      }
    }
  }, 40_000);

  it('raised no page error', () => {
    expect(pageErrors).toEqual([]);
  });
});

