// The dashboard's details, shot at 800×600 and 1280×800 with Debian's Chromium against a real
// `gpu-share serve` (a simulated GPU and the host CPU, two built-in engines on a generated tiny
// model, chatting through the gateway): the weight control with a refused typed value, a crashed
// engine's row, a refused token, the host CPU's device view and the tok/s figure in Peers and in
// the Timeline's tooltip. The same shots as renderer/e2e/details.e2e.test.ts checks.
// Run: npm run screenshots:details [-- --out DIR] (after a build). CHROMIUM_PATH overrides
// /usr/bin/chromium.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { TINY_GGUF_SPEC, writeGguf } from '../dist/test/fixtures/gguf.js';
import { removeSegment } from '../dist/test/fixtures/segments.js';
import { call, startServe, state, until } from '../dist/test/fixtures/serve.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
let options;
try {
  options = parseArgs({ options: { out: { type: 'string' }, help: { type: 'boolean' } }, allowPositionals: false }).values;
} catch (error) {
  console.error(`screenshots-details: ${error.message}\nusage: npm run screenshots:details [-- --out DIR]`);
  process.exit(2);
}
if (options.help) {
  console.log('usage: npm run screenshots:details [-- --out DIR]   (default docs/screenshots/details)');
  process.exit(0);
}
const OUT = options.out ?? join(ROOT, 'docs', 'screenshots', 'details');
mkdirSync(OUT, { recursive: true });
const KEY = 'GPU-5c1a7e2d-sim-24gb';
const GiB = 1024 ** 3;
const VIEWPORTS = [
  { width: 800, height: 600 },
  { width: 1280, height: 800 },
];

const dir = mkdtempSync(join(tmpdir(), 'gpushare-details-'));
writeGguf(join(dir, 'tiny.gguf'), TINY_GGUF_SPEC);
const sim = join(dir, 'sim.json');
writeFileSync(
  sim,
  JSON.stringify({
    devices: [
      { key: KEY, name: 'Sim RTX 4090 24GB', totalBytes: 24 * GiB, usedBytes: 3 * GiB, processes: null, health: 'OK', utilizationPct: 55, temperatureC: 58, powerW: 240 },
      { key: 'cpu-0', name: 'Host CPU', totalBytes: 32 * GiB, usedBytes: 9 * GiB, processes: null, health: 'OK', utilizationPct: 12, temperatureC: null, powerW: null },
    ],
  }),
);
const served = await startServe({ dataDir: join(dir, 'data'), sim });
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-dev-shm-usage'] });
let chatting = false;
let chats = Promise.resolve();
const shot = async (target, name) => {
  const file = join(OUT, `${name}.png`);
  await target.screenshot({ path: file });
  console.log(file);
};
try {
  for (const id of ['chat-a', 'chat-b']) {
    await call(served, 'POST', '/api/profiles', { id, name: id, capabilities: [id], engineKind: 'builtin', modelPath: join(dir, 'tiny.gguf'), contextSize: 256, threads: 1, priority: 'interactive', weight: id === 'chat-a' ? 2 : 1, gpuKey: KEY });
    await call(served, 'POST', '/api/engines', { profileId: id, gpuKey: KEY });
  }
  await until(async () => ((await state(served)).engines.filter((e) => e.state === 'running').length === 2 ? true : undefined), 90_000, 'two engines running');
  chatting = true;
  const chatWith = async (model, tokens) => {
    for (let i = 0; chatting; i++) await call(served, 'POST', '/v1/chat/completions', { model, messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: tokens }).catch(() => undefined);
  };
  chats = Promise.all([chatWith('chat-a', 32), chatWith('chat-b', 48)]);
  await until(async () => ((await state(served)).engines.every((e) => (e.tokensPerSecond ?? 0) > 0) ? true : undefined), 30_000, 'both engines with a rate');

  const page = await browser.newPage({ viewport: VIEWPORTS[1] });
  await page.goto(`${served.base}/#token=${served.token}`);
  await page.locator('[data-testid="connection-state"][data-state="live"]').waitFor({ timeout: 10_000 });
  await page.getByTestId('device-picker').selectOption(KEY);
  const peerA = (await state(served)).devices.find((d) => d.key === KEY).peers.find((p) => p.name === 'chat-a');
  const rowA = page.locator(`[data-testid="peer-row"][data-slot="${peerA.slot}"]`);

  for (const viewport of VIEWPORTS) {
    const size = `${viewport.width}x${viewport.height}`;
    await page.setViewportSize(viewport);
    // The weight control with a refused value.
    await page.getByTestId('nav-peers').click();
    const field = rowA.getByTestId('weight-input');
    await field.fill('abc');
    await field.press('Enter');
    await page.waitForTimeout(300);
    await shot(page.getByTestId('peers-table'), `weight-${size}`);
    await field.press('Escape');
    // tok/s in Peers, then in the Timeline's tooltip over chat-a's lane.
    await shot(page, `peers-rate-${size}`);
    await page.getByTestId('nav-timeline').click();
    await page.waitForTimeout(1500);
    const drawn = await page.evaluate(() => window.__gpuShareTimeline ?? null);
    const lane = drawn?.lanes.find((l) => l.name === 'chat-a');
    const box = await page.getByTestId('timeline-canvas').boundingBox();
    if (lane !== undefined && box !== null) {
      for (let x = box.x + box.width - 2; x > box.x + box.width - 120; x -= 3) {
        await page.mouse.move(x, box.y + lane.top + lane.height / 2);
        if ((await page.getByTestId('timeline-tip').count()) > 0) break;
      }
    }
    await shot(page, `timeline-rate-${size}`);
    await page.mouse.move(0, 0);
    // The host CPU as the device.
    await page.getByTestId('device-picker').selectOption('cpu-0');
    await page.getByTestId('nav-gpu').click();
    await page.waitForTimeout(500);
    await shot(page, `cpu-device-${size}`);
    await page.getByTestId('device-picker').selectOption(KEY);
    // A refused token.
    const other = await browser.newPage({ viewport });
    await other.goto(`${served.base}/#token=not-the-token`);
    await other.waitForTimeout(2500);
    await shot(other, `token-refused-${size}`);
    await other.close();
  }

  // A crashed engine, at both sizes.
  chatting = false;
  await chats;
  const engine = (await state(served)).engines.find((e) => e.profileId === 'chat-b' && e.state === 'running');
  process.kill(-engine.pid, 'SIGKILL');
  await page.getByTestId('nav-peers').click();
  await page.locator('[data-testid="crashed"]').waitFor({ timeout: 5_000 });
  for (const viewport of VIEWPORTS) {
    await page.setViewportSize(viewport);
    await page.waitForTimeout(300);
    await shot(page.getByTestId('peers-table'), `crashed-${viewport.width}x${viewport.height}`);
  }
} finally {
  chatting = false;
  await chats;
  await browser.close();
  await served.stop();
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
}
