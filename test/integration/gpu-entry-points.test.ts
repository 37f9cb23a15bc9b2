/** Every GPU entry point, on a machine without an NVIDIA GPU: exit 2 with one line saying so. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nvidiaSmiListsGpu } from '../fixtures/llama-server.js';
import { ROOT } from '../fixtures/procs.js';

const noGpu = !nvidiaSmiListsGpu();

describe.skipIf(!noGpu || process.platform !== 'linux')('GPU entry points without a GPU', () => {
  const cases: [string, string, string[], string][] = [
    ['bench:pacing --gpu', process.execPath, [join(ROOT, 'dist', 'test', 'bench', 'pacing-bench.js'), '--gpu'], 'bench:pacing --gpu: no NVIDIA GPU here'],
    ['the NVML checks', process.execPath, [join(ROOT, 'dist', 'test', 'fixtures', 'gpu-checks.js')], 'NVML GPU checks skipped'],
    ['bench:pacing --gpu --engine builtin', process.execPath, [join(ROOT, 'dist', 'test', 'bench', 'pacing-bench.js'), '--gpu', '--engine', 'builtin'], 'bench:pacing --gpu: no NVIDIA GPU here'],
    ['scripts/gpu-check.sh coop', 'bash', [join(ROOT, 'scripts', 'gpu-check.sh'), 'coop', join(ROOT, 'bench-results', 'gpu-check')], 'gpu-check: no NVIDIA GPU here'],
    ['scripts/gpu-check.sh', 'bash', [join(ROOT, 'scripts', 'gpu-check.sh'), 'all', join(ROOT, 'bench-results', 'gpu-check')], 'gpu-check: no NVIDIA GPU here'],
    ['llama-server:build --cuda', process.execPath, [join(ROOT, 'scripts', 'llama-server-build.mjs'), '--cuda'], 'llama-server:build: --cuda: '],
  ];
  for (const [name, command, args, text] of cases) {
    it(`${name} exits 2 with one line`, () => {
      const result = spawnSync(command, args, { encoding: 'utf8', timeout: 60_000 });
      expect(result.status).toBe(2);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toContain(text);
    });
  }
});
