/**
 * The data folder as a hostile neighbour leaves it: links, FIFOs, directories and other users'
 * files at the data files' names, a folder others can write or another user owns, a full disk, two
 * servers on one folder. Each is refused with one line naming the file and the problem (never its
 * content), never waited on, never followed; a failed write keeps the old file.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkDataDir, DataDirError, DataFileError, readDataFile, writeDataFile, type DataWriteIo } from '../../electron/core/data-files.js';
import { acquireDataLock, DataLockError, LOCK_NAME } from '../../electron/core/data-lock.js';
import { listEngineRecords, writeEngineFile, type EngineStateFile } from '../../electron/core/engines/engine-files.js';
import { ProfileStore } from '../../electron/core/engines/profiles.js';
import { EnvelopeStore } from '../../electron/core/planner/envelopes.js';
import { openNodeSettings, readFolderSettings, SettingsFileError } from '../../electron/core/settings.js';

const isRoot = process.getuid?.() === 0;
/** A uid that is not ours (tests run as root here; nobody is 65534). */
const OTHER_UID = 65534;
const SECRET = 'secret-token-bytes-0123456789abcdefghijklmn';

let dir = '';
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpushare-datafolder-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const mkfifo = (path: string): void => void execFileSync('mkfifo', [path]);
/** Runs `work` and says how long it took: a FIFO must be refused at once, not waited on. */
const timed = <T>(work: () => T): { ms: number; result: T | undefined; error: unknown } => {
  const started = Date.now();
  try {
    const result = work();
    return { ms: Date.now() - started, result, error: undefined };
  } catch (error) {
    return { ms: Date.now() - started, result: undefined, error };
  }
};

describe('readDataFile and writeDataFile', () => {
  it('refuses a FIFO, a directory, a link and another user’s file, naming the file and the problem', () => {
    const fifo = join(dir, 'fifo.json');
    mkfifo(fifo);
    const fifoRead = timed(() => readDataFile(fifo));
    expect(fifoRead.ms).toBeLessThan(1_000);
    expect(fifoRead.error).toBeInstanceOf(DataFileError);
    expect(String(fifoRead.error)).toContain(`${fifo}: is a FIFO, not a regular file`);

    mkdirSync(join(dir, 'dir.json'));
    expect(() => readDataFile(join(dir, 'dir.json'))).toThrow(/dir\.json: is a directory, not a regular file/);

    const target = join(dir, 'target');
    writeFileSync(target, SECRET);
    symlinkSync(target, join(dir, 'link.json'));
    expect(() => readDataFile(join(dir, 'link.json'))).toThrow(/link\.json: is a symbolic link, not a regular file/);

    expect(readDataFile(join(dir, 'absent.json'))).toBeNull();
  });

  it.skipIf(!isRoot)("refuses a file another user owns (chown to 65534)", () => {
    const theirs = join(dir, 'theirs.json');
    writeFileSync(theirs, SECRET);
    chownSync(theirs, OTHER_UID, OTHER_UID);
    expect(() => readDataFile(theirs)).toThrow(`${theirs}: belongs to user ${OTHER_UID}, not to this user (0)`);
  });

  it('writes over a link by replacing the link, never its target', () => {
    const system = join(dir, 'system-file');
    writeFileSync(system, 'root:x:0:0\n');
    const file = join(dir, 'profiles.json');
    symlinkSync(system, file);
    writeDataFile(file, '{"ok":true}\n');
    expect(readFileSync(system, 'utf8')).toBe('root:x:0:0\n');
    expect(lstatSync(file).isFile()).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('a write that fails for want of room keeps the old file, says so, and leaves no temporary file', () => {
    const file = join(dir, 'envelopes.json');
    writeFileSync(file, '{"envelopes":[]}\n');
    const full: DataWriteIo = {
      writeSync: () => {
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      },
      fsyncSync: () => undefined,
    };
    expect(() => writeDataFile(file, '{"envelopes":[1]}\n', 0o600, full)).toThrow(`${file}: could not be written: no space left on the device (ENOSPC); the file on disk is unchanged`);
    expect(readFileSync(file, 'utf8')).toBe('{"envelopes":[]}\n');
    expect(readdirSync(dir)).toEqual(['envelopes.json']);
  });
});

describe('the data folder', () => {
  it('is created 0700', () => {
    const data = join(dir, 'a', 'data');
    const checked = checkDataDir(data, { create: true });
    expect(statSync(data).mode & 0o777).toBe(0o700);
    expect(checked.tightened).toBeNull();
  });

  it('ours but open to others: made 0700 with one line', () => {
    const data = join(dir, 'data');
    mkdirSync(data);
    chmodSync(data, 0o777);
    const checked = checkDataDir(data, { create: true });
    expect(checked.tightened).toBe(`data: folder ${data} was open to other users (mode 777); made it this user's only (0700)`);
    expect(statSync(data).mode & 0o777).toBe(0o700);
  });

  it.skipIf(!isRoot)("another user's folder is refused with one line, directly or through a link", () => {
    const data = join(dir, 'theirs');
    mkdirSync(data, { mode: 0o700 });
    chownSync(data, OTHER_UID, OTHER_UID);
    expect(() => checkDataDir(data, { create: true })).toThrow(DataDirError);
    expect(() => checkDataDir(data, { create: true })).toThrow(`data folder ${data}: belongs to user ${OTHER_UID}, not to this user (0): refused`);
    const link = join(dir, 'link');
    symlinkSync(data, link);
    expect(() => checkDataDir(link, { create: true })).toThrow(`data folder ${link} (a link to ${data}): belongs to user ${OTHER_UID}`);
    // A link to a folder of ours is judged by its target and used.
    const ours = join(dir, 'ours');
    mkdirSync(ours, { mode: 0o700 });
    symlinkSync(ours, join(dir, 'ours-link'));
    expect(checkDataDir(join(dir, 'ours-link'), { create: true }).real).toBe(ours);
  });
});

describe('settings, profiles and envelopes', () => {
  it('a FIFO at settings.json, profiles.json or envelopes.json is refused at once, naming the file', () => {
    for (const name of ['settings.json', 'profiles.json', 'envelopes.json']) {
      const data = join(dir, name.replace('.json', ''));
      mkdirSync(data);
      mkfifo(join(data, name));
      const open = timed(() => (name === 'settings.json' ? openNodeSettings(data, 7787) : name === 'profiles.json' ? new ProfileStore({ dataDir: data }) : new EnvelopeStore(join(data, name))));
      expect(open.ms, name).toBeLessThan(1_000);
      expect(String(open.error), name).toContain(`${join(data, name)}: is a FIFO, not a regular file`);
    }
  });

  it('a directory at settings.json is one SettingsFileError naming it', () => {
    mkdirSync(join(dir, 'settings.json'));
    expect(() => openNodeSettings(dir, 7787)).toThrow(SettingsFileError);
    expect(() => openNodeSettings(dir, 7787)).toThrow(`settings file ${join(dir, 'settings.json')}: is a directory, not a regular file`);
  });

  it('a settings file that is not JSON is named without quoting its bytes', () => {
    writeFileSync(join(dir, 'settings.json'), `${SECRET} is not JSON`);
    const settings = openNodeSettings(dir, 7787);
    expect(settings.loadProblem?.message).toContain('is not valid JSON');
    expect(settings.loadProblem?.message).not.toContain(SECRET.slice(0, 12));
  });

  it('a FIFO swapped in for settings.json at runtime: the last good settings stay, one line says why, nothing waits', () => {
    const problems: string[] = [];
    const settings = openNodeSettings(dir, 7787, (line) => problems.push(line));
    const token = settings.get().apiToken;
    rmSync(join(dir, 'settings.json'));
    mkfifo(join(dir, 'settings.json'));
    const read = timed(() => settings.get());
    expect(read.ms).toBeLessThan(1_000);
    expect(read.result?.apiToken).toBe(token);
    expect(problems).toEqual([`settings file ${join(dir, 'settings.json')}: is a FIFO, not a regular file: refused (not read, not followed); remove it; the last good settings stay in use`]);
  });

  it("plan's read of settings.json is the server's: a link not followed, a FIFO not waited on, bad JSON named without its bytes", () => {
    const target = join(dir, 'elsewhere.json');
    writeFileSync(target, JSON.stringify({ apiPort: 7788, apiToken: SECRET, draining: true }));
    const linked = join(dir, 'linked');
    mkdirSync(linked);
    symlinkSync(target, join(linked, 'settings.json'));
    const viaLink = readFolderSettings(linked);
    expect(viaLink.problem).toContain(`${join(linked, 'settings.json')}: is a symbolic link`);
    expect(viaLink).toMatchObject({ apiPort: null, apiToken: null, controls: { draining: false } });
    const fifo = join(dir, 'fifo');
    mkdirSync(fifo);
    mkfifo(join(fifo, 'settings.json'));
    const read = timed(() => readFolderSettings(fifo));
    expect(read.ms).toBeLessThan(1_000);
    expect(read.result?.problem).toContain(`${join(fifo, 'settings.json')}: is a FIFO, not a regular file`);
    const bad = join(dir, 'bad');
    mkdirSync(bad);
    // Unquoted: V8's message would quote the bytes around it (`..."piToken": secret-tok"...`).
    writeFileSync(join(bad, 'settings.json'), `{"apiToken": ${SECRET}}`);
    const badRead = readFolderSettings(bad);
    expect(badRead.problem).toContain('is not valid JSON');
    expect(badRead.problem).not.toContain(SECRET.slice(0, 8));
  });

  it('a link at profiles.json is refused, and its target is never written', () => {
    const system = join(dir, 'system-file');
    writeFileSync(system, '{"version":1,"profiles":[]}\n');
    const data = join(dir, 'data');
    mkdirSync(data);
    symlinkSync(system, join(data, 'profiles.json'));
    expect(() => new ProfileStore({ dataDir: data })).toThrow(/profiles\.json: is a symbolic link/);
    expect(readFileSync(system, 'utf8')).toBe('{"version":1,"profiles":[]}\n');
    expect(statSync(system).mode & 0o777).not.toBe(0o600);
  });
});

describe('engine records', () => {
  const record = (id: string): EngineStateFile => ({ id, profileId: id, name: id, kind: 'command', pid: process.pid, supervisorPid: process.pid, port: null, gpuKey: 'cpu-0', startedAt: new Date().toISOString() });

  it('a record its live supervisor left unreadable is kept and reported, not deleted', () => {
    const enginesDir = join(dir, 'engines');
    mkdirSync(enginesDir);
    const file = join(enginesDir, `${process.pid}-e1.json`);
    writeFileSync(file, '');
    const listed = listEngineRecords(dir);
    expect(listed.engines).toEqual([]);
    expect(listed.unreadable).toEqual([{ file, supervisorPid: process.pid, problem: 'is empty' }]);
    expect(existsSync(file)).toBe(true);
  });

  it('an engines folder that is a link is refused, not followed', () => {
    const elsewhere = join(dir, 'elsewhere');
    mkdirSync(elsewhere);
    const data = join(dir, 'data');
    mkdirSync(data);
    symlinkSync(elsewhere, join(data, 'engines'));
    expect(() => writeEngineFile(data, record('e3'))).toThrow(`${join(data, 'engines')}: is a symbolic link: refused`);
    expect(() => listEngineRecords(data)).toThrow(/is a symbolic link/);
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it.skipIf(!isRoot)('on a full disk the record is not written empty, and the error says so (a 16 kB tmpfs)', () => {
    const mount = join(dir, 'full');
    mkdirSync(mount);
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=16k', 'tmpfs', mount]).status !== 0) return;
    try {
      writeFileSync(join(mount, 'filler'), Buffer.alloc(64 * 1024)); // fills it
    } catch {
      // full: as wanted
    }
    try {
      expect(() => writeEngineFile(mount, record('e2'))).toThrow(/could not be written: no space left on the device \(ENOSPC\)|cannot be created/);
      const left = existsSync(join(mount, 'engines')) ? readdirSync(join(mount, 'engines')) : [];
      expect(left, 'no empty record, no temporary file').toEqual([]);
    } finally {
      spawnSync('umount', [mount]);
    }
  });
});

describe('one server per data folder', () => {
  it('a second holder is refused with one line naming the first (pid, start, host); the first releases it', () => {
    const lock = acquireDataLock(dir, 'serve');
    expect(() => acquireDataLock(dir, 'app')).toThrow(DataLockError);
    expect(() => acquireDataLock(dir, 'app')).toThrow(new RegExp(`^data folder ${dir} is in use by serve \\(pid ${process.pid} on [^,]+, started \\d{4}-`));
    lock.release();
    expect(existsSync(join(dir, LOCK_NAME))).toBe(false);
    acquireDataLock(dir, 'app').release();
  });

  it('a lock whose holder died is taken over with one line', () => {
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    const pid = Number(dead.stdout);
    writeFileSync(join(dir, LOCK_NAME), JSON.stringify({ pid, what: 'serve', host: hostname(), startedAt: '2026-01-01T00:00:00.000Z', bootId: null, procStart: null }));
    const lock = acquireDataLock(dir, 'serve');
    expect(lock.tookOver).toBe(`data: took over the lock of serve (pid ${pid}, started 2026-01-01T00:00:00.000Z): pid ${pid} is not running`);
    expect(JSON.parse(readFileSync(join(dir, LOCK_NAME), 'utf8'))).toMatchObject({ pid: process.pid, what: 'serve' });
    lock.release();
  });
});
