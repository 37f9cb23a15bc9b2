import { describe, expect, it } from 'vitest';
import { busyByMetrics, parseServerMetrics } from '../../electron/core/pacer/metrics-activity.js';
import { commandFor, type LaunchSpec } from '../../electron/core/engines/supervisor.js';

describe('llama.cpp /metrics as an activity source', () => {
  it('reads requests_processing and tokens_predicted_total, with or without labels', () => {
    const text = [
      '# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.',
      '# TYPE llamacpp:prompt_tokens_total counter',
      'llamacpp:prompt_tokens_total 120',
      'llamacpp:tokens_predicted_total 4096',
      'llamacpp:requests_processing{slot="0"} 1',
    ].join('\n');
    expect(parseServerMetrics(text)).toEqual({ requestsProcessing: 1, requestsDeferred: 0, tokensPredicted: 4096 });
    expect(parseServerMetrics(`${text}\nllamacpp:requests_deferred 2\n`)?.requestsDeferred).toBe(2);
  });

  it('is busy with a request in flight or queued or tokens generated since the last poll, known idle otherwise', () => {
    const idle = { requestsProcessing: 0, requestsDeferred: 0, tokensPredicted: 100 };
    expect(busyByMetrics(null, idle)).toBe(false);
    expect(busyByMetrics(idle, idle)).toBe(false);
    expect(busyByMetrics(idle, { ...idle, requestsProcessing: 1 })).toBe(true);
    expect(busyByMetrics(idle, { ...idle, requestsDeferred: 1 })).toBe(true);
    // A request that began and ended between two polls.
    expect(busyByMetrics(idle, { ...idle, tokensPredicted: 130 })).toBe(true);
  });

  it('says nothing when a figure is missing or not a number', () => {
    expect(parseServerMetrics('llamacpp:requests_processing 0\n')).toBeNull();
    expect(parseServerMetrics('llamacpp:requests_processing NaN\nllamacpp:tokens_predicted_total 3\n')).toBeNull();
    expect(parseServerMetrics('<html>not metrics</html>')).toBeNull();
  });
});

describe('commandFor', () => {
  const spec: LaunchSpec = { profileId: 'qwen', name: 'qwen chat', kind: 'llama-server', capability: 'chat', modelPath: '/m/qwen.gguf', modelKey: 'k', contextSize: 8192, gpuLayers: 99, threads: null, weight: 3, priority: 'interactive', pinned: false, command: '/opt/llama-server', args: ['--port', '8099'], env: { A: '1' }, peakBytes: 1, peakSource: 'ESTIMATED' };
  const deps = { launchers: { nodePath: '/node', cliPath: '/cli.js', builtinHostPath: '/host.js' }, gpuKey: 'GPU-1' };

  it('runs llama-server under the process gate with --metrics and its /metrics as the activity source', () => {
    expect(commandFor(spec, deps)).toEqual({
      command: '/node',
      args: ['/cli.js', 'run', '--gpu-key', 'GPU-1', '--weight', '3', '--name', 'qwen chat', '--exit-with-parent', '--activity-url', 'http://127.0.0.1:8099/metrics', '--', '/opt/llama-server', '-m', '/m/qwen.gguf', '-c', '8192', '-ngl', '99', '--metrics', '--port', '8099'],
      // Pinned to its device (GPU-1, a CUDA UUID's form) through its environment.
      env: { CUDA_VISIBLE_DEVICES: 'GPU-1', A: '1' },
    });
  });

  it('gives a llamafile its /metrics as the activity source too (on its --port, else 8080), without adding --metrics', () => {
    const llamafile = commandFor({ ...spec, kind: 'llamafile', command: '/bin/qwen.llamafile', args: ['--server', '--metrics'] }, deps);
    expect(llamafile.args.slice(llamafile.args.indexOf('--activity-url'), llamafile.args.indexOf('--') + 2)).toEqual(['--activity-url', 'http://127.0.0.1:8080/metrics', '--', '/bin/qwen.llamafile']);
    expect(llamafile.args.filter((arg) => arg === '--metrics')).toHaveLength(1);
    const onPort = commandFor({ ...spec, kind: 'llamafile', command: '/bin/qwen.llamafile', args: ['--port', '9123'] }, deps);
    expect(onPort.args).toContain('http://127.0.0.1:9123/metrics');
  });

  it('starts the built-in host itself (it paces itself) and an opencoti llamafile with its weight', () => {
    expect(commandFor({ ...spec, kind: 'builtin', args: [], threads: 1 }, deps).args).toEqual(['--max-semi-space-size=1', '/host.js', '--model', '/m/qwen.gguf', '--ctx', '8192', '--gpu-layers', '99', '--port', '0', '--gpu-key', 'GPU-1', '--weight', '3', '--name', 'qwen chat', '--alias', 'qwen chat', '--threads', '1']);
    const llamafile = commandFor({ ...spec, kind: 'opencoti-llamafile', command: '/bin/qwen.llamafile', args: [] }, deps);
    expect(llamafile.command).toBe('/bin/qwen.llamafile');
    expect(llamafile.args).toContain('--gpu-share-weight');
    expect(llamafile.args[llamafile.args.indexOf('--gpu-share-weight') + 1]).toBe('3');
  });
});
