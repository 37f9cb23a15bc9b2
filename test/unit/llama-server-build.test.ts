import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cacheRoot, cmakeFlags, commitOfTarHeader, cudaArchsFromComputeCaps, findNvcc, variantName } from '../../scripts/llama-server-build.mjs';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'llama-server-build.mjs');
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('llama-server:build', () => {
  it('builds for the compute capabilities nvidia-smi lists, each once, and nothing else', () => {
    expect(cudaArchsFromComputeCaps('9.0\n')).toEqual(['90']);
    expect(cudaArchsFromComputeCaps('9.0\n8.6\n9.0\n')).toEqual(['86', '90']);
    expect(() => cudaArchsFromComputeCaps('')).toThrow('listed no GPU');
    expect(() => cudaArchsFromComputeCaps('No devices were found\n')).toThrow('"No devices were found" where a compute capability');
  });

  it('keys the cache by commit, and a CUDA build by its architectures too, outside the clone', () => {
    const commit = '80fb11ac73e66d89eae2c6a91d8a77428fa733ed';
    expect(variantName(commit, null)).toBe(commit);
    expect(variantName(commit, ['86', '90'])).toBe(`${commit}-cuda-86-90`);
    expect(cacheRoot({ GPU_SHARE_CACHE: '/c' })).toBe('/c/llama-server');
    expect(cacheRoot({ XDG_CACHE_HOME: '/x', HOME: '/h' })).toBe('/x/gpu-share/llama-server');
    expect(cacheRoot({ HOME: '/h' })).toBe('/h/.cache/gpu-share/llama-server');
  });

  it('asks CMake for nothing that downloads (web UI, curl, OpenSSL, FetchContent) and only the GPUs present', () => {
    const cpu = cmakeFlags(null, null);
    for (const flag of ['-DLLAMA_CURL=OFF', '-DLLAMA_BUILD_UI=OFF', '-DLLAMA_USE_PREBUILT_UI=OFF', '-DLLAMA_OPENSSL=OFF', '-DFETCHCONTENT_FULLY_DISCONNECTED=ON']) expect(cpu).toContain(flag);
    expect(cpu.some((f) => f.includes('CUDA'))).toBe(false);
    const cuda = cmakeFlags(['86', '90'], '/usr/local/cuda/bin/nvcc');
    expect(cuda).toContain('-DGGML_CUDA=ON');
    expect(cuda).toContain('-DCMAKE_CUDA_ARCHITECTURES=86;90');
    expect(cuda).toContain('-DCUDAToolkit_ROOT=/usr/local/cuda');
  });

  it('finds no nvcc where there is none', () => {
    expect(findNvcc({ PATH: '/usr/bin:/bin' }, [])).toBeNull();
    const dir = mkdtempSync(join(tmpdir(), 'nvcc-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'nvcc'), '#!/bin/sh\n', { mode: 0o755 });
    expect(findNvcc({ PATH: `${dir}:/usr/bin:/bin` }, [])).toBe(join(dir, 'nvcc'));
    expect(findNvcc({ PATH: '/nonexistent', CUDA_HOME: '/nonexistent-cuda' }, [join(dir, 'nvcc')])).toBe(join(dir, 'nvcc'));
  });

  it("reads the commit of a `git archive` tarball from its pax header", () => {
    const repo = mkdtempSync(join(tmpdir(), 'archive-'));
    dirs.push(repo);
    const git = (...args: string[]) => spawnSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'buffer' });
    git('init', '-q');
    writeFileSync(join(repo, 'a.txt'), 'a');
    git('add', 'a.txt');
    git('commit', '-qm', 'a');
    const commit = git('rev-parse', 'HEAD').stdout.toString().trim();
    const tar = git('archive', '--format=tar', 'HEAD').stdout;
    expect(commitOfTarHeader(tar)).toBe(commit);
    expect(commitOfTarHeader(Buffer.alloc(1024))).toBeNull();
  });

  it('says in one line what is missing and exits 2', () => {
    const run = (...args: string[]) => spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8', env: { ...process.env, PATH: `/nonexistent-bin:${process.env['PATH'] ?? ''}` } });
    for (const [args, text] of [
      [['--source', '/nonexistent.tar.xz'], '--source: no such file: /nonexistent.tar.xz'],
      [['--cuda-arch', '90'], '--cuda-arch: only with --cuda'],
      [['--jobs', 'x'], '--jobs: must be a whole number'],
    ] as const) {
      const result = run(...args);
      expect(result.status).toBe(2);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toContain(text);
      expect(result.stdout).toBe('');
    }
  });

  it('names a flag it does not know, or a stray word, and shows the usage instead of a stack trace (exit 2)', () => {
    for (const [args, text] of [
      [['--cudaa'], "llama-server:build: Unknown option '--cudaa'"],
      [['build'], "llama-server:build: Unexpected argument 'build'"],
    ] as const) {
      const result = spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8' });
      expect(result.status).toBe(2);
      const lines = result.stderr.trim().split('\n');
      expect(lines).toHaveLength(2);
      expect(lines[0]).toContain(text);
      expect(lines[1]).toMatch(/^usage: llama-server-build /);
      expect(result.stderr).not.toContain('    at ');
    }
  });
});
