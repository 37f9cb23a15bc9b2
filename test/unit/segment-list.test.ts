/** Finding registries by content in the segment folder, and saying a broken one once. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RegistryError } from '../../native/helper.js';
import { BrokenRegistryNotice } from '../../electron/core/registry/broken.js';
import { encodeEmptySegment } from '../../electron/core/registry/codec.js';
import { segmentFileName } from '../../electron/core/registry/location.js';
import { listSegments, listedName } from '../../electron/core/registry/segment-list.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('listSegments', () => {
  it('lists only registries (magic and version), names them by the known key that hashes to them, and opens no link or FIFO', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpushare-list-'));
    dirs.push(dir);
    writeFileSync(join(dir, segmentFileName('cpu-0')), encodeEmptySegment());
    writeFileSync(join(dir, segmentFileName('t-unknown')), encodeEmptySegment());
    // A cosmopolitan semaphore: same kind of name, not a registry.
    writeFileSync(join(dir, segmentFileName('sem')), new Uint8Array(4096));
    const wrongVersion = encodeEmptySegment();
    wrongVersion[8] = 2;
    writeFileSync(join(dir, segmentFileName('v2')), wrongVersion);
    writeFileSync(join(dir, 'opencoti-gpu-cpu-0'), encodeEmptySegment()); // the old name: never read
    symlinkSync(join(dir, segmentFileName('cpu-0')), join(dir, segmentFileName('link')));
    mkdirSync(join(dir, segmentFileName('dir')));
    try {
      execFileSync('mkfifo', [join(dir, segmentFileName('fifo'))]);
    } catch {
      // no mkfifo: the rest still holds
    }
    const listed = listSegments(dir, ['GPU-x', 'cpu-0'], { uid: process.geteuid?.() ?? -1 });
    expect(listed.map(listedName)).toEqual(['cpu-0', `unknown key (${segmentFileName('t-unknown')})`]);
    expect(listed[0]).toMatchObject({ key: 'cpu-0', path: join(dir, segmentFileName('cpu-0')), mine: true });
  });

  it('is empty where the folder cannot be read', () => {
    expect(listSegments(join(tmpdir(), 'gpushare-no-such-folder'), ['cpu-0'])).toEqual([]);
  });
});

describe('BrokenRegistryNotice', () => {
  it('says a broken registry once, and once that it is valid again; other errors are not its own', () => {
    const said: string[] = [];
    const notice = new BrokenRegistryNotice((line, state) => said.push(`${state}: ${line}`));
    const broken = new RegistryError('BROKEN', 'it shrank');
    expect(notice.failed(broken)).toBe(true);
    expect(notice.failed(broken)).toBe(true);
    expect(notice.brokenReason).toBe('it shrank');
    expect(notice.failed(new RegistryError('REGISTRY_FULL', 'full'))).toBe(false);
    notice.succeeded();
    notice.succeeded();
    expect(notice.brokenReason).toBeNull();
    expect(said).toEqual(['broken: it shrank', 'valid-again: the registry is valid again']);
  });
});
