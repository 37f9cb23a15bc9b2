/**
 * The app's main process, booted end to end: the built `dist/electron/main.js` runs in a real Node
 * process with `electron` resolved to a stand-in of Electron 45's main-process API
 * (test/fixtures/electron-standin), first from this checkout, then from a packaged layout (the
 * file list electron-builder would pack, laid out as plain folders). In order: the single-instance
 * lock, the settings file, the core, the tray (a real icon file, a menu from the live state), the
 * IPC handlers against the contract, the dashboard window (built page, built preload, the app's
 * CSP) rendered in Chromium through the preload, a built-in engine launched through IPC that
 * answers through the gateway, a weight reaching /gpu/peers, and quit: the engine gone, its slot
 * free, exit 0.
 */
import { existsSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, copyFileSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_METHODS,
  DASHBOARD_CSP,
  PRELOAD_API_GLOBAL,
  PRELOAD_SHELL_GLOBAL,
  SHELL_METHODS,
  ipcChannel,
  shellChannel,
  type AppState,
  type EngineView,
  type GpuShareApi,
  type LaunchOutcome,
  type ShellExtras,
} from '../../electron/core/contract.js';
import { decodeSegment } from '../../electron/core/registry/codec.js';
import type { GpuPeersView } from '../../electron/core/registry/view.js';
import { GiB } from '../../electron/core/planner/policy.js';
import { loadBuilderConfig, packedFiles } from '../../scripts/packed-files.mjs';
import { loadPreload, preparePage, serveRendererFolder, startApp, type RunningApp } from '../fixtures/electron-app.js';
import type { MenuItemRecord, StandinConfig } from '../fixtures/electron-standin/protocol.js';
import { TINY_GGUF_SPEC, writeGguf } from '../fixtures/gguf.js';
import { ROOT, procState } from '../fixtures/procs.js';
import { until } from '../fixtures/serve.js';
import { removeSegment, shmPath } from '../fixtures/segments.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const TARGET = `${process.platform}-${process.arch}`;
const BUILT_MAIN = join(ROOT, 'dist', 'electron', 'main.js');
const missing = [
  existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (set CHROMIUM_PATH)`,
  existsSync(BUILT_MAIN) && existsSync(join(ROOT, 'dist', 'test', 'fixtures', 'electron-standin', 'register.js')) ? null : 'not built (npm run build:ts)',
  existsSync(join(ROOT, 'dist', 'renderer', 'index.html')) ? null : 'dashboard not built (npm run build:renderer)',
  process.platform === 'linux' ? null : 'the stand-in keeps the Linux single-instance lock and the packaged layout of linux targets',
].filter((reason): reason is string => reason !== null);

// In CI nothing may be missing: a skipped boot test there would hide a main process that cannot start.
if (process.env['CI'] !== undefined && missing.length > 0) {
  it('has what the boot test needs', () => {
    expect(missing).toEqual([]);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const inside = (path: string, folder: string): boolean => path === folder || path.startsWith(folder + sep);

/** The files a process has mapped (its shared libraries and Node addons), from /proc. */
function mappedFiles(pid: number): string[] {
  const files = new Set<string>();
  for (const line of readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
    const path = line.split(/\s+/).slice(5).join(' ');
    if (path.startsWith('/')) files.add(path);
  }
  return [...files];
}

function labels(items: readonly MenuItemRecord[]): string[] {
  return items.flatMap((item) => [item.label, ...(item.submenu === null ? [] : labels(item.submenu).map((label) => `${item.label} › ${label}`))]);
}

/**
 * The package for this platform as plain folders, from the file list scripts/packed-files.mjs
 * computes with electron-builder's own rules: `resources/app.asar/…` (the archive's content),
 * `resources/app.asar.unpacked/…` (native code), the extra resources (the helper). Files are hard
 * links where the file system allows. An unpacked file also appears in app.asar as a link to
 * its unpacked copy: Electron's asar reader answers such an entry from app.asar.unpacked.
 */
async function buildPackagedLayout(into: string): Promise<{ resources: string; appAsar: string }> {
  const resources = join(into, 'resources');
  const { files } = await packedFiles(TARGET);
  const place = (source: string, dest: string): void => {
    mkdirSync(dirname(dest), { recursive: true });
    try {
      linkSync(source, dest);
    } catch {
      copyFileSync(source, dest);
    }
  };
  for (const file of files) {
    const dest = join(resources, ...file.dest.split('/'));
    place(file.source, dest);
    if (file.where === 'unpacked') {
      const inArchive = join(resources, 'app.asar', ...file.dest.split('/').slice(1));
      mkdirSync(dirname(inArchive), { recursive: true });
      symlinkSync(relative(dirname(inArchive), dest), inArchive);
    }
  }
  return { resources, appAsar: join(resources, 'app.asar') };
}

interface Mode {
  name: string;
  packaged: boolean;
  /** Builds what the app runs from; returns where the app lives. */
  prepare(dir: string): Promise<{ appPath: string; resourcesPath: string; layout: string | null }>;
}

const MODES: Mode[] = [
  {
    name: 'from this checkout (npm start)',
    packaged: false,
    // `electron .`: the app folder is the checkout; resourcesPath is Electron's own (no app there).
    prepare: async (dir) => ({ appPath: ROOT, resourcesPath: join(dir, 'electron-dist', 'resources'), layout: null }),
  },
  {
    name: 'packaged (app.asar and app.asar.unpacked as folders)',
    packaged: true,
    prepare: async (dir) => {
      const layout = join(dir, 'GPU Share');
      const { resources, appAsar } = await buildPackagedLayout(layout);
      return { appPath: appAsar, resourcesPath: resources, layout: realpathSync(layout) };
    },
  },
];

for (const mode of MODES) {
  describe.skipIf(missing.length > 0)(`the main process boots ${mode.name}${missing.length > 0 ? ` — skipped: ${missing.join('; ')}` : ''}`, () => {
    const KEY = `GPU-boot-${mode.packaged ? 'pkg' : 'dev'}-${process.pid}`;
    let dir = '';
    let home = '';
    let appPath = '';
    let layout: string | null = null;
    let app: RunningApp;
    let port = 0;
    let token = '';
    let api: GpuShareApi;
    let shell: ShellExtras;
    let browser: Browser | null = null;
    let engine: EngineView | null = null;
    let enginePid = 0;
    const userData = (): string => join(home, '.config', mode.packaged ? 'GPU Share' : 'gpu-share');
    const dataDir = (): string => join(home, '.local', 'share', 'gpu-share');
    const get = async <T>(path: string): Promise<{ status: number; body: T }> => {
      const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: response.status, body: (await response.json()) as T };
    };

    beforeAll(async () => {
      // Outside the repository, so that nothing can be found there by accident.
      dir = realpathSync(mkdtempSync(join(tmpdir(), 'gpushare-boot-')));
      home = join(dir, 'home');
      mkdirSync(home);
      writeGguf(join(dir, 'tiny.gguf'), TINY_GGUF_SPEC);
      const sim = join(dir, 'sim.json');
      writeFileSync(sim, JSON.stringify({ devices: [{ key: KEY, name: 'Sim boot 24GB', totalBytes: 24 * GiB, usedBytes: 1 * GiB, processes: null, health: 'OK' }] }));
      const prepared = await mode.prepare(dir);
      const packageJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; devDependencies: { electron: string } };
      appPath = prepared.appPath;
      layout = prepared.layout;
      port = await freePort();
      const config: StandinConfig = {
        appPath,
        isPackaged: mode.packaged,
        resourcesPath: prepared.resourcesPath,
        userData: userData(),
        name: mode.packaged ? 'GPU Share' : 'gpu-share',
        version: packageJson.version,
        electronVersion: packageJson.devDependencies.electron,
        // Packaged, the fuses are as electron-builder flips them; `electron .` leaves them on.
        runAsNodeFuse: mode.packaged ? (loadBuilderConfig() as { electronFuses?: { runAsNode?: boolean } }).electronFuses?.runAsNode !== false : true,
      };
      const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), XDG_DATA_HOME: join(home, '.local', 'share'), GPU_SHARE_SIM: sim, GPU_SHARE_API_PORT: String(port) };
      for (const name of ['GPU_SHARE_DATA_DIR', 'GPU_SHARE_NATIVE_DIR', 'GPU_SHARE_RENDERER_URL', 'ELECTRON_RUN_AS_NODE', 'APPIMAGE', 'NODE_OPTIONS']) delete env[name];
      app = startApp({ main: join(appPath, 'dist', 'electron', 'main.js'), config, env, cwd: dir });
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      app?.kill();
      if (enginePid > 0 && procState(enginePid) !== null) process.kill(enginePid, 'SIGKILL');
      removeSegment(KEY);
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    }, 30_000);

    it('takes the single-instance lock', async () => {
      const lock = await app.next('single-instance-lock');
      expect(lock.got).toBe(true);
      expect(lstatSync(lock.lockPath).isSymbolicLink()).toBe(true);
      expect(inside(lock.lockPath, userData())).toBe(true);
    });

    it("creates the settings file in the app's data folder", async () => {
      const file = join(dataDir(), 'settings.json');
      await until(() => (existsSync(file) ? true : undefined), 20_000, `${file} to be created`, 50);
      const settings = JSON.parse(readFileSync(file, 'utf8')) as { apiToken: string; apiPort: number };
      expect(settings.apiToken).toMatch(/^[A-Za-z0-9_-]{32,}$/);
      token = settings.apiToken;
      // The settings live beside the profiles, shared with `gpu-share serve`, not in Electron's
      // userData; both are under this test's home.
      expect(inside(file, home)).toBe(true);
      expect(lstatSync(file).mode & 0o777).toBe(0o600);
    });

    it('starts the core: the API answers with the simulated device', async () => {
      const state = await until(
        async () => {
          try {
            const answer = await get<AppState>('/api/state');
            return answer.status === 200 ? answer.body : undefined;
          } catch {
            return undefined;
          }
        },
        20_000,
        'the API',
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${app.log.join('\n')}`);
      });
      expect(state.devices.map((device) => device.key)).toEqual([KEY]);
    });

    it('creates a tray with an icon file that exists and a menu built from the live state', async () => {
      const tray = await app.next('tray-created');
      expect(tray.image.empty ? `tray icon ${tray.image.path} is missing or not an image` : null).toBeNull();
      expect(existsSync(tray.image.path)).toBe(true);
      expect(inside(tray.image.path, join(appPath, 'resources', 'tray'))).toBe(true);
      expect(tray.image.width).toBeGreaterThanOrEqual(16);
      const menu = await app.next('tray-menu', (record) => record.items !== null);
      const shown = labels(menu.items ?? []);
      expect(shown[0]).toContain('Sim boot 24GB');
      expect(shown.some((label) => label.startsWith('Open dashboard'))).toBe(true);
      expect(shown.some((label) => label.startsWith('Quit'))).toBe(true);
    });

    it('has a handler for every IPC channel of the contract and none outside it', async () => {
      await app.next('ipc-handle');
      // A round trip: the records sent before its answer (the handlers of one synchronous setup)
      // have all arrived.
      await app.command({ cmd: 'permission', permission: 'notifications' });
      const expected = [...API_METHODS.map(ipcChannel), ...SHELL_METHODS.map(shellChannel)].sort();
      const handled = app.all('ipc-handle').map((record) => record.channel);
      expect(new Set(handled).size).toBe(handled.length);
      const without = expected.filter((channel) => !handled.includes(channel));
      const outside = handled.filter((channel) => !expected.includes(channel));
      expect({ 'contract channels without a handler': without, 'handlers outside the contract': outside }).toEqual({ 'contract channels without a handler': [], 'handlers outside the contract': [] });
      expect(app.all('ipc-remove-handler')).toEqual([]);
      // No listener outside the contract either (send / sendSync channels).
      expect(app.all('ipc-on').map((record) => record.channel)).toEqual([]);
    });

    it('shows the dashboard: the built index.html with the built preload, under the app’s CSP, rendered in Chromium', async () => {
      await app.command({ cmd: 'click', labels: ['Open dashboard'] });
      const created = await app.next('window-created');
      const options = created.options as { show: boolean; webPreferences: Record<string, unknown> };
      expect(options.show).toBe(false);
      expect(options.webPreferences).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false, webSecurity: true });
      const load = await app.next('window-load');
      expect(load.error, `loading the dashboard (${load.url})`).toBeNull();
      expect(load.file).toBe(join(appPath, 'dist', 'renderer', 'index.html'));
      expect(load.preload).toBe(join(appPath, 'dist', 'electron', 'preload.cjs'));
      expect(existsSync(load.file ?? '')).toBe(true);
      expect(existsSync(load.preload ?? '')).toBe(true);
      await app.next('window-shown');

      // The session: the app's CSP on the renderer's files (replacing a server's), nothing on
      // other URLs, every permission refused, no new windows.
      const csp = (await app.command({ cmd: 'headers', url: load.url, responseHeaders: { 'content-security-policy': ["default-src *"] } })) as { responseHeaders?: Record<string, string[]> };
      expect(csp.responseHeaders).toEqual({ 'Content-Security-Policy': [DASHBOARD_CSP] });
      expect(await app.command({ cmd: 'headers', url: 'https://example.com/', responseHeaders: {} })).toEqual({});
      expect(await app.command({ cmd: 'permission', permission: 'media' })).toEqual({ request: false, check: false });
      expect(await app.command({ cmd: 'window-open', url: 'https://example.com/' })).toEqual({ action: 'deny' });

      // The preload as a sandboxed renderer loads it: it needs nothing but 'electron'.
      const preload = loadPreload(load.preload ?? '', app);
      expect(preload.required).toEqual(['electron']);
      api = preload.exposed.get(PRELOAD_API_GLOBAL) as GpuShareApi;
      shell = preload.exposed.get(PRELOAD_SHELL_GLOBAL) as ShellExtras;
      expect(api).toBeDefined();
      expect(shell).toBeDefined();

      // Chromium renders the loaded page: its folder served with the headers the app's session
      // gives the file:// URLs, the built preload run first with its IPC wired to the app.
      const served = await serveRendererFolder(load.file ?? '', app);
      try {
        browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'] });
        const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
        const problems: string[] = [];
        page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
        page.on('console', (message) => {
          if (message.type() === 'error') problems.push(`console: ${message.text()}`);
        });
        const stopEvents = await preparePage(page, load.preload ?? '', app);
        await page.goto(`${served.origin}/index.html`);
        await page.locator('[data-testid="connection-state"][data-state="live"]').waitFor({ timeout: 15_000 });
        await expect.poll(() => page.getByTestId('device-picker').textContent(), { timeout: 10_000 }).toContain(KEY);
        expect(await page.getByTestId('pressure-badge').textContent()).toBe('NORMAL');
        expect(served.cspSeen.length).toBeGreaterThan(0);
        expect(new Set(served.cspSeen)).toEqual(new Set([DASHBOARD_CSP]));
        expect(problems).toEqual([]);
        stopEvents();
        await page.close();
      } finally {
        served.server.close();
      }
    }, 60_000);

    it("answers every method of the preload's API through its channel", async () => {
      for (const method of API_METHODS) {
        const call = (api as unknown as Record<string, () => Promise<unknown>>)[method];
        if (call === undefined) throw new Error(`the preload has no ${method}`);
        // Without arguments: a value, or the contract's BAD_REQUEST for what is missing; never a
        // channel without a handler.
        const outcome = await call().then(
          () => 'value',
          (error: unknown) => (error as { code?: string; message?: string }).code ?? String((error as Error).message ?? error),
        );
        expect(['value', 'BAD_REQUEST'], `${method}: ${outcome}`).toContain(outcome);
      }
      expect(await shell.pickModelFile()).toBeNull();
      expect(await shell.getLaunchAtLogin()).toBe(false);
      await shell.openDataFolder();
      expect(app.all('open-path').map((record) => record.path)).toEqual([dataDir()]);
    });

    it('launches a built-in engine through IPC in a utility process that joins the registry and answers through the gateway', async () => {
      await api.createProfile({ id: 'boot', name: 'boot', capabilities: ['chat'], engineKind: 'builtin', modelPath: join(dir, 'tiny.gguf'), contextSize: 256, threads: 1, priority: 'interactive', weight: 1 } as Parameters<GpuShareApi['createProfile']>[0]);
      const outcome: LaunchOutcome = await api.launch({ profileId: 'boot' });
      expect(outcome.plan.verdict).toBe('ADMIT');
      expect(outcome.engine).not.toBeNull();
      // (node-llama-cpp's own binary check in the main process forks one first.)
      const fork = await app.next('utility-fork', (record) => record.modulePath.endsWith('engine-host.js'));
      expect(fork.modulePath).toBe(join(appPath, 'dist', 'electron', 'core', 'engines', 'builtin', 'engine-host.js'));
      expect(fork.serviceName).toContain('engine-host');
      enginePid = fork.pid;
      engine = await until(
        async () => {
          const found = (await api.getState()).engines.find((candidate) => candidate.profileId === 'boot');
          if (found !== undefined && (found.state === 'crashed' || found.state === 'stopped')) {
            throw new Error(`the engine ${found.state} (exit code ${String(found.exitCode)}, signal ${String(found.exitSignal)}) while loading; its last lines:\n${found.logTail.join('\n')}`);
          }
          return found?.state === 'running' ? found : undefined;
        },
        60_000,
        'the engine running',
        200,
      ).catch(async (error: unknown) => {
        throw new Error(`${error instanceof Error ? error.message : String(error)}\nengines: ${JSON.stringify((await api.getState()).engines.map((e) => [e.id, e.state]))}`);
      });
      const peers = (await get<GpuPeersView>(`/gpu/peers?gpu_key=${KEY}`)).body;
      expect(peers.peers.map((peer) => peer.pid)).toContain(enginePid);

      const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, seed: 1 }),
      });
      const body = (await response.json()) as { choices?: { message?: { content?: unknown } }[] };
      expect(response.status, JSON.stringify(body)).toBe(200);
      expect(typeof body.choices?.[0]?.message?.content).toBe('string');

      if (layout !== null) {
        // Packaged: every native file both processes loaded comes from the layout.
        const root = layout;
        for (const pid of [app.child.pid ?? 0, enginePid]) {
          const native = mappedFiles(pid).filter((file) => /libgpushare|koffi|node-llama-cpp|\.node$/.test(file));
          expect(native.some((file) => file.includes('libgpushare')), `pid ${pid} maps the registry helper`).toBe(true);
          expect(native.filter((file) => !inside(file, root)), `pid ${pid}: native files outside the package`).toEqual([]);
        }
        expect(mappedFiles(app.child.pid ?? 0).some((file) => file.includes('koffi'))).toBe(true);
      }
    }, 120_000);

    it('a weight changed through IPC reaches /gpu/peers within 1 s', async () => {
      if (engine === null) throw new Error('no engine');
      const engineId = engine.id;
      const started = performance.now();
      await api.setWeight(engineId, 3);
      const seenAfterMs = await until(
        async () => {
          const peers = (await get<GpuPeersView>(`/gpu/peers?gpu_key=${KEY}`)).body;
          return peers.peers.some((peer) => peer.pid === enginePid && Math.abs(peer.weight - 3) < 1e-3) ? performance.now() - started : undefined;
        },
        5_000,
        'weight 3 in /gpu/peers',
        20,
      );
      expect(seenAfterMs).toBeLessThan(1_000);
    });

    it('quits from the tray: the engine stops, its slot is freed and the process exits 0 within 15 s', async () => {
      const started = performance.now();
      await app.command({ cmd: 'click', labels: ['Quit'] });
      const exit = await Promise.race([app.exit, new Promise<null>((resolve) => setTimeout(() => resolve(null), 15_000))]);
      expect(exit, `still running 15 s after quit; its last lines:\n${app.log.slice(-20).join('\n')}`).not.toBeNull();
      expect(exit?.code).toBe(0);
      expect((exit?.atMs ?? Infinity) - started).toBeLessThan(15_000);
      expect(app.all('quit-phase').map((record) => record.phase)).toEqual(['before-quit', 'before-quit', 'will-quit', 'quit']);
      await until(() => (procState(enginePid) === null || procState(enginePid) === 'Z' ? true : undefined), 5_000, `engine ${enginePid} gone`, 50);
      expect(enginePid, 'an engine was started').toBeGreaterThan(0);
      // (No segment at all: no engine ever joined.)
      const segment = existsSync(shmPath(KEY)) ? decodeSegment(new Uint8Array(readFileSync(shmPath(KEY)))) : null;
      expect(segment?.slots.filter((slot) => slot.pid === enginePid) ?? []).toEqual([]);
      expect(existsSync(join(userData(), 'SingletonLock'))).toBe(false);
      // Nothing the app touched was missing from the stand-in (a use swallowed by a catch
      // included), and nothing went to the error box.
      expect(app.all('unimplemented')).toEqual([]);
      expect(app.all('error-box')).toEqual([]);
    }, 30_000);
  });
}
