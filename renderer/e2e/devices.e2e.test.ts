/**
 * A device per engine in Debian's Chromium (playwright-core) against a real `gpu-share serve` on
 * two simulated GPUs, the first nearly full: Edit fills the Add form with a profile's values and
 * saves them; the Launch dialog starts on the device chosen in the header, names it and its plan
 * (a rejection there names the second GPU, which has room), plans again when the second GPU is
 * picked, and launches there: the engine runs with the second GPU's UUID in CUDA_VISIBLE_DEVICES
 * and shows among the second GPU's peers, not the first's.
 *
 * Needs `npm run build:ts` and `npm run build:renderer` first; skipped, saying why, when those or
 * Chromium are missing.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Profile } from '../../electron/core/contract.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { TINY_GGUF_SPEC, writeGguf } from '../../test/fixtures/gguf.js';
import { BURN_ENGINE } from '../../test/fixtures/procs.js';
import { removeSegment } from '../../test/fixtures/segments.js';
import { call, startServe, state, until, type Served } from '../../test/fixtures/serve.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const missing = [
  existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (set CHROMIUM_PATH)`,
  existsSync(join(ROOT, 'dist', 'renderer', 'index.html')) ? null : 'dashboard not built (npm run build:renderer)',
  existsSync(join(ROOT, 'dist', 'electron', 'cli.js')) && existsSync(BURN_ENGINE) ? null : 'core not built (npm run build:ts)',
].filter((reason): reason is string => reason !== null);

const KEY_A = `GPU-e2eA-${process.pid}`;
const KEY_B = `GPU-e2eB-${process.pid}`;
let dir = '';
let served: Served | null = null;
let browser: Browser | null = null;
let page: Page;
const pageErrors: string[] = [];

const server = (): Served => {
  if (served === null) throw new Error('gpu-share serve is not running');
  return served;
};

if (process.env['CI'] !== undefined && missing.length > 0) {
  it('has what the device end-to-end test needs', () => {
    expect(missing).toEqual([]);
  });
}

describe.skipIf(missing.length > 0)(`a device per engine in Chromium against gpu-share serve${missing.length > 0 ? ` — skipped: ${missing.join('; ')}` : ''}`, () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpushare-e2e-devices-'));
    writeGguf(join(dir, 'tiny.gguf'), TINY_GGUF_SPEC);
    const sim = join(dir, 'sim.json');
    writeFileSync(
      sim,
      JSON.stringify({
        devices: [
          { key: KEY_A, name: 'Sim A 24GB', totalBytes: 24 * GiB, usedBytes: 23 * GiB, processes: null, health: 'OK' },
          { key: KEY_B, name: 'Sim B 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' },
        ],
      }),
    );
    served = await startServe({ dataDir: join(dir, 'data'), sim });
    const tiny = { id: 'tiny', name: 'tiny', capabilities: ['chat'], engineKind: 'builtin', modelPath: join(dir, 'tiny.gguf'), contextSize: 512, threads: 1, priority: 'interactive' };
    expect((await call(server(), 'POST', '/api/profiles', tiny)).status).toBe(201);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    await page.goto(`${server().base}/#token=${server().token}`);
    await page.locator('[data-testid="connection-state"][data-state="live"]').waitFor({ timeout: 10_000 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await served?.stop();
    removeSegment(KEY_A);
    removeSegment(KEY_B);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it('Edit opens the Add form with the profile\'s values, and saving changes the profile', async () => {
    await page.getByTestId('nav-models').click();
    const card = page.locator('[data-testid="profile-card"][data-profile="tiny"]');
    await card.getByTestId('edit').click();
    const form = page.getByTestId('edit-model');
    await form.waitFor();
    expect(await form.getByTestId('model-name').inputValue()).toBe('tiny');
    expect(await form.getByTestId('model-path').inputValue()).toBe(join(dir, 'tiny.gguf'));
    expect(await form.getByTestId('model-context').inputValue()).toBe('512');
    expect(await form.getByTestId('model-device').inputValue()).toBe('');
    // Every device is offered, by its place and name.
    expect(await form.getByTestId('model-device').locator('option').allTextContents()).toEqual([
      expect.stringMatching(/^default/),
      expect.stringMatching(/^GPU 0 "Sim A 24GB" · /),
      expect.stringMatching(/^GPU 1 "Sim B 24GB" · /),
    ]);
    await form.getByTestId('model-context').fill('256');
    await form.getByTestId('model-device').selectOption(KEY_A);
    await form.getByTestId('save-model').click();
    await form.waitFor({ state: 'detached', timeout: 10_000 });
    const saved = (await call<Profile[]>(server(), 'GET', '/api/profiles')).body.find((p) => p.id === 'tiny');
    expect(saved).toMatchObject({ contextSize: 256, gpuKey: KEY_A, name: 'tiny' });
    // And back to the default device.
    await card.getByTestId('edit').click();
    expect(await page.getByTestId('edit-model').getByTestId('model-device').inputValue()).toBe(KEY_A);
    await page.getByTestId('edit-model').getByTestId('model-device').selectOption('');
    await page.getByTestId('edit-model').getByTestId('save-model').click();
    await until(async () => ((await call<Profile[]>(server(), 'GET', '/api/profiles')).body.find((p) => p.id === 'tiny')?.gpuKey === null ? true : undefined), 5_000, 'the preferred device cleared');
  }, 30_000);

  it('the Launch dialog starts on the header\'s device, names it and its plan, picks the second GPU and launches there', async () => {
    // The first GPU chosen in the header: the dialog starts there.
    await page.getByTestId('device-picker').selectOption(KEY_A);
    await page.getByTestId('nav-models').click();
    const card = page.locator('[data-testid="profile-card"][data-profile="tiny"]');
    await card.getByTestId('launch').click();
    const dialog = page.getByTestId('plan-dialog');
    await dialog.getByTestId('plan-verdict').waitFor({ timeout: 15_000 });
    expect(await dialog.getByTestId('plan-device-select').inputValue()).toBe(KEY_A);
    expect(await dialog.getByTestId('plan-device').textContent()).toBe(`planned for GPU 0 "Sim A 24GB" [${KEY_A}]`);
    expect(await dialog.getByTestId('plan-verdict').textContent()).toBe('does not fit');
    expect(await dialog.getByTestId('plan-headline').textContent()).toMatch(/^REJECT_CAPACITY: .* or launch it on GPU 1 "Sim B 24GB", which has room$/);
    expect(await dialog.getByTestId('confirm-launch').count()).toBe(0);

    // The second GPU picked: planned again there, named, and it fits.
    await dialog.getByTestId('plan-device-select').selectOption(KEY_B);
    await expect.poll(() => dialog.getByTestId('plan-device').textContent({ timeout: 500 }).catch(() => null), { timeout: 15_000 }).toBe(`planned for GPU 1 "Sim B 24GB" [${KEY_B}]`);
    expect(await dialog.getByTestId('plan-verdict').textContent()).toBe('fits');
    expect(await dialog.getByTestId('plan-headline').textContent()).toMatch(/^ADMIT: needs [\d.]+ (GiB|MiB), [\d.]+ GiB schedulable/);
    await dialog.getByTestId('confirm-launch').click();
    await dialog.waitFor({ state: 'detached', timeout: 10_000 });
    await expect.poll(() => card.getAttribute('data-phase'), { timeout: 30_000, interval: 100 }).toMatch(/^(running|idle)$/);

    const engine = (await state(server())).engines.find((e) => e.profileId === 'tiny' && e.state === 'running');
    if (engine === undefined) throw new Error('tiny is not running');
    expect(engine.gpuKey).toBe(KEY_B);
    const environ = readFileSync(`/proc/${engine.pid}/environ`, 'utf8').split('\0');
    expect(environ).toContain(`CUDA_VISIBLE_DEVICES=${KEY_B}`);

    // In the second GPU's Peers, not the first's.
    await page.getByTestId('nav-peers').click();
    const row = page.locator(`[data-testid="peer-row"][data-pid="${engine.pid}"]`);
    await expect.poll(() => row.count(), { timeout: 5_000 }).toBe(0);
    await page.getByTestId('device-picker').selectOption(KEY_B);
    await row.waitFor({ timeout: 10_000 });
    expect(await row.textContent()).toContain('tiny');
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
