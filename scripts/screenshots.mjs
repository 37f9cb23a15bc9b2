// The dashboard's screenshots in docs/screenshots/, taken with Debian's Chromium (playwright-core)
// at 1280×800 against a real `gpu-share serve` on a simulated 24 GB device: a built-in engine on a
// generated tiny model and three paced command engines at weights 2, 1 and 0.5.
// Run: npm run screenshots (it builds first). CHROMIUM_PATH overrides /usr/bin/chromium.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { TINY_GGUF_SPEC, writeGguf } from '../dist/test/fixtures/gguf.js';
import { BURN_ENGINE } from '../dist/test/fixtures/procs.js';
import { removeSegment } from '../dist/test/fixtures/segments.js';
import { call, startServe, state, until } from '../dist/test/fixtures/serve.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT = join(ROOT, 'docs', 'screenshots');
const KEY = 'GPU-5c1a7e2d-sim-24gb';
const GiB = 1024 ** 3;

const dir = mkdtempSync(join(tmpdir(), 'gpushare-shots-'));
const model = join(dir, 'qwen-tiny.gguf');
writeGguf(model, TINY_GGUF_SPEC);
const sim = join(dir, 'sim.json');
// The simulated device's figures move (the file is re-read when it changes), so that the GPU
// view's sparklines have a shape.
let tick = 0;
const writeSim = () => {
  const wave = Math.sin(tick++ / 4);
  const device = { key: KEY, name: 'Sim RTX 4090 24GB', totalBytes: 24 * GiB, usedBytes: Math.round((3.2 + 0.3 * wave) * GiB), processes: null, health: 'OK', utilizationPct: Math.round(55 + 35 * wave), temperatureC: Math.round(58 + 8 * wave), powerW: Math.round(240 + 110 * wave) };
  writeFileSync(sim, JSON.stringify({ devices: [device] }));
};
writeSim();
const simTimer = setInterval(writeSim, 500);
let stopChatting = async () => {};
// Command profiles are the local user's to make (over HTTP they are refused): written before
// serve starts.
const burner = (id, capability, priority, weight) => ({ id, name: id, capabilities: [capability], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--duration-s', '600'], contextSize: 256, priority, weight });
const served = await startServe({ dataDir: join(dir, 'data'), sim, profiles: [burner('coder', 'code', 'background', 2), burner('summarizer', 'summarize', 'background', 1), burner('embed-lab', 'embed', 'lab', 0.5)] });
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-dev-shm-usage'] });
try {
  const profiles = [
    { id: 'qwen-chat', name: 'qwen-chat', capabilities: ['chat'], engineKind: 'builtin', modelPath: model, contextSize: 256, threads: 1, priority: 'interactive', weight: 1 },
    { id: 'coder', name: 'coder', capabilities: ['code'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--duration-s', '600'], contextSize: 256, priority: 'background', weight: 2 },
    { id: 'summarizer', name: 'summarizer', capabilities: ['summarize'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--duration-s', '600'], contextSize: 256, priority: 'background', weight: 1 },
    { id: 'qwen-long', name: 'qwen-long', capabilities: ['long'], engineKind: 'builtin', modelPath: model, contextSize: 4096, threads: 1, priority: 'background', weight: 1, launch: false },
    { id: 'embed-lab', name: 'embed-lab', capabilities: ['embed'], engineKind: 'command', command: process.execPath, args: [BURN_ENGINE, '--mode', 'unaware', '--duration-s', '600'], contextSize: 256, priority: 'lab', weight: 0.5 },
  ];
  for (const { launch, ...profile } of profiles) {
    if (profile.engineKind !== 'command') await call(served, 'POST', '/api/profiles', profile);
    if (launch !== false) await call(served, 'POST', '/api/engines', { profileId: profile.id });
  }
  // A few chats through the gateway, for the built-in engine's tokens per second and time to first token.
  await until(async () => (await state(served)).engines.some((e) => e.profileId === 'qwen-chat' && e.state === 'running') || undefined, 60_000, 'qwen-chat running');
  // Chats go on while the views are taken.
  let chatting = true;
  const chats = (async () => {
    for (let i = 0; chatting; i++) await call(served, 'POST', '/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 48 });
  })();
  stopChatting = async () => {
    chatting = false;
    await chats;
  };
  // A few readings of its /metrics (every 2 s) make a rate and its sparkline.
  await new Promise((resolve) => setTimeout(resolve, 8_500));
  await until(async () => ((await state(served)).devices[0]?.schedule?.windows.length ?? 0) >= 3 || undefined, 30_000, 'three active peers');
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${served.base}/#token=${served.token}`);
  await page.locator('[data-testid="connection-state"][data-state="live"]').waitFor({ timeout: 15_000 });
  mkdirSync(OUT, { recursive: true });
  for (const view of ['peers', 'timeline', 'models', 'gpu', 'settings']) {
    await page.getByTestId(`nav-${view}`).click();
    // The timeline needs a few seconds of history to fill its lanes.
    await page.waitForTimeout(view === 'timeline' ? 6_000 : 1_000);
    // The model cards' figures come from estimates that take a moment.
    if (view === 'models') await page.getByText('reading the model…').first().waitFor({ state: 'detached', timeout: 30_000 });
    if (view === 'timeline') {
      const box = await page.getByTestId('timeline-canvas').boundingBox();
      if (box !== null) await page.mouse.move(box.x + box.width - 40, box.y + 20);
      await page.waitForTimeout(300);
    }
    await page.screenshot({ path: join(OUT, `${view}.png`) });
    console.log(`docs/screenshots/${view}.png`);
  }
  // The Launch dialog of a model not running yet: its plan and what it needs.
  await page.getByTestId('nav-models').click();
  await page.locator('[data-testid="profile-card"][data-profile="qwen-long"]').getByTestId('launch').click();
  await page.getByTestId('plan-dialog').getByTestId('memory-breakdown').waitFor({ timeout: 30_000 });
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(OUT, 'launch.png') });
  console.log('docs/screenshots/launch.png');
} finally {
  await stopChatting();
  clearInterval(simTimer);
  await browser.close();
  await served.stop();
  removeSegment(KEY);
  rmSync(dir, { recursive: true, force: true });
}
