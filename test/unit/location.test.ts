/** Where a key's segment is: the file cosmopolitan's shm_open("/opencoti-gpu-<key>") opens, on
 *  every OS (docs/registry.md), checked against RFC 7693 and Python's hashlib. */
import { spawnSync } from 'node:child_process';
import { blake2b } from '@noble/hashes/blake2.js';
import { describe, expect, it } from 'vitest';
import { cosmoShmFileName, keyOfSegmentFile, segmentDirFor, segmentFileName, segmentPathFor, SEGMENT_FILE_PATTERN } from '../../electron/core/registry/location.js';

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const UUID = 'GPU-8f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b';
// python3 -c "import hashlib;print(hashlib.blake2b(b'/opencoti-gpu-<key>',digest_size=32).hexdigest())"
const CPU0_HEX = '60b072385dac537acac501ea23f71c255fbc32efb357424fa49c9bbd09e21886';
const UUID_HEX = 'add94d773031aee34df91dbf41500d2080423f1faee067a14a990d04094274b0';

describe('BLAKE2b', () => {
  it('is RFC 7693 (appendix A: BLAKE2b-512 of "abc") and its 256-bit form', () => {
    expect(hex(blake2b(new TextEncoder().encode('abc')))).toBe(
      'ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923',
    );
    expect(cosmoShmFileName('abc')).toBe('bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319.sem');
  });
});

describe('the segment file of a key', () => {
  it('is cosmopolitan\'s <hex>.sem for /opencoti-gpu-<key>', () => {
    expect(segmentFileName('cpu-0')).toBe(`${CPU0_HEX}.sem`);
    expect(segmentFileName(UUID)).toBe(`${UUID_HEX}.sem`);
    expect(SEGMENT_FILE_PATTERN.test(segmentFileName('cpu-0'))).toBe(true);
    expect(SEGMENT_FILE_PATTERN.test('opencoti-gpu-cpu-0')).toBe(false);
  });

  it('lies in /dev/shm on Linux (/tmp where that is no directory), /tmp on macOS, the temp folder on Windows', () => {
    expect(segmentPathFor('cpu-0', { platform: 'linux', devShmIsDirectory: true })).toBe(`/dev/shm/${CPU0_HEX}.sem`);
    expect(segmentPathFor('cpu-0', { platform: 'linux', devShmIsDirectory: false })).toBe(`/tmp/${CPU0_HEX}.sem`);
    expect(segmentPathFor(UUID, { platform: 'linux', devShmIsDirectory: true })).toBe(`/dev/shm/${UUID_HEX}.sem`);
    expect(segmentPathFor('cpu-0', { platform: 'darwin' })).toBe(`/tmp/${CPU0_HEX}.sem`);
    expect(segmentPathFor(UUID, { platform: 'darwin' })).toBe(`/tmp/${UUID_HEX}.sem`);
    const temp = 'C:\\Users\\ana\\AppData\\Local\\Temp\\';
    expect(segmentPathFor('cpu-0', { platform: 'win32', tempDir: temp })).toBe(`${temp}${CPU0_HEX}.sem`);
    expect(segmentPathFor(UUID, { platform: 'win32', tempDir: temp })).toBe(`${temp}${UUID_HEX}.sem`);
    expect(segmentDirFor({ platform: 'win32', tempDir: 'C:\\Temp' })).toBe('C:\\Temp\\');
  });

  it('is what Python\'s hashlib computes', () => {
    const python = spawnSync('python3', ['-c', 'import hashlib,sys\nfor n in sys.argv[1:]: print(hashlib.blake2b(n.encode(),digest_size=32).hexdigest())', '/opencoti-gpu-cpu-0', `/opencoti-gpu-${UUID}`], { encoding: 'utf8' });
    if (python.status !== 0) return; // no python3 here: the constants above are its output
    expect(python.stdout.trim().split('\n')).toEqual([CPU0_HEX, UUID_HEX]);
  });

  it('maps back to a key only where a known key hashes to it', () => {
    expect(keyOfSegmentFile(`${UUID_HEX}.sem`, ['cpu-0', UUID])).toBe(UUID);
    expect(keyOfSegmentFile(`${UUID_HEX}.sem`, ['cpu-0'])).toBeNull();
  });
});
