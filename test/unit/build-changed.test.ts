/** `npm run serve` and `npm start` build only what changed (scripts/build-changed.mjs): run with
 *  --dry-run on a copy of the layout whose files' times the test sets. */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../fixtures/procs.js';

let root = '';
const OLD = new Date('2026-01-01T00:00:00Z');
const NEW = new Date('2026-02-01T00:00:00Z');

function file(path: string, time: Date, text = ''): void {
  const full = join(root, path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, text);
  utimesSync(full, time, time);
}

function dryRun(): string[] {
  const r = spawnSync(process.execPath, [join(root, 'scripts', 'build-changed.mjs'), '--dry-run'], { encoding: 'utf8', timeout: 30_000 });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim().split('\n');
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'gpushare-build-changed-'));
  mkdirSync(join(root, 'scripts'));
  copyFileSync(join(ROOT, 'scripts', 'build-changed.mjs'), join(root, 'scripts', 'build-changed.mjs'));
  const files = JSON.parse(readFileSync(join(ROOT, 'native', 'files.json'), 'utf8')) as Record<string, Record<string, string>>;
  file('native/files.json', OLD, JSON.stringify(files));
  file('native/gpushare.c', OLD);
  for (const name of Object.values(files[process.platform] ?? {})) file(`build/native/${process.platform}-${process.arch}/${name}`, NEW);
  file('electron/core/app.ts', OLD);
  file('renderer/src/App.svelte', OLD);
  file('renderer/src/lib/x.test.ts', NEW);
  file('package.json', OLD, '{}');
  file('package-lock.json', OLD, '{}');
  file('dist/tsconfig.build.tsbuildinfo', NEW);
  file('dist/renderer/index.html', NEW);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('build-changed', () => {
  it('builds nothing when every output is newer than its sources (tests do not count)', () => {
    expect(dryRun()).toEqual(['build-changed: the native helper is up to date', 'build-changed: the TypeScript is up to date', 'build-changed: the dashboard is up to date']);
  });

  it('builds the TypeScript and the dashboard after a core change, the dashboard alone after a renderer change, the helper after a C change', () => {
    file('electron/core/app.ts', new Date(NEW.getTime() + 1000));
    expect(dryRun()).toEqual(['build-changed: the native helper is up to date', 'build-changed: would build the TypeScript (incremental)', 'build-changed: would build the dashboard']);
    file('electron/core/app.ts', OLD);
    file('renderer/src/App.svelte', new Date(NEW.getTime() + 1000));
    expect(dryRun()).toEqual(['build-changed: the native helper is up to date', 'build-changed: the TypeScript is up to date', 'build-changed: would build the dashboard']);
    file('renderer/src/App.svelte', OLD);
    file('native/gpushare.c', new Date(NEW.getTime() + 1000));
    expect(dryRun()[0]).toBe('build-changed: would build the native helper');
    file('native/gpushare.c', OLD);
  });

  it('builds what is missing (a removed dist/)', () => {
    rmSync(join(root, 'dist'), { recursive: true });
    expect(dryRun()).toEqual(['build-changed: the native helper is up to date', 'build-changed: would build the TypeScript (incremental)', 'build-changed: would build the dashboard']);
  });
});
