/** Recognising a llama.cpp server on `gpu-share run`'s command line, and the boot line's words. */
import { describe, expect, it } from 'vitest';
import { describeActivity, detectLlamaServer, flagValue } from '../../electron/core/pacer/server-activity.js';

describe('detectLlamaServer', () => {
  it('finds the /metrics URL of a llama-server from --port/--host and adds --metrics it lacks', () => {
    expect(detectLlamaServer('/opt/llama/llama-server', ['-m', 'x.gguf', '--port', '8081'], {})).toEqual({ metricsUrl: 'http://127.0.0.1:8081/metrics', addArgs: ['--metrics'], apiKey: undefined, apiKeyFile: undefined });
    expect(detectLlamaServer('llama-server.exe', ['--host', '0.0.0.0', '--metrics'], {})).toMatchObject({ metricsUrl: 'http://127.0.0.1:8080/metrics', addArgs: [] });
    expect(detectLlamaServer('llama-server', ['--host=::', '--port=9000'], {})?.metricsUrl).toBe('http://[::1]:9000/metrics');
    expect(detectLlamaServer('llama-server', ['--host', '127.0.0.2', '--port', '9000'], {})?.metricsUrl).toBe('http://127.0.0.2:9000/metrics');
  });

  it('probes another server with --port but changes nothing on its command line', () => {
    // A wrapper script, or vLLM: its /metrics has no llama.cpp figures, and CPU time then decides.
    expect(detectLlamaServer('python', ['-m', 'vllm.entrypoints.openai.api_server', '--port', '8000'], {})).toMatchObject({ metricsUrl: 'http://127.0.0.1:8000/metrics', addArgs: [] });
  });

  it('takes the API key from the command line, else from LLAMA_API_KEY; names a key file', () => {
    expect(detectLlamaServer('llama-server', ['--port', '1', '--api-key', 'sekrit'], { LLAMA_API_KEY: 'env' })?.apiKey).toBe('sekrit');
    expect(detectLlamaServer('llama-server', ['--port', '1'], { LLAMA_API_KEY: 'env' })?.apiKey).toBe('env');
    expect(detectLlamaServer('llama-server', ['--port', '1', '--api-key-file', '/k.txt'], {})?.apiKeyFile).toBe('/k.txt');
  });

  it('recognises nothing without --port/--host, on a host it would not probe, or on a bad port', () => {
    expect(detectLlamaServer('llama-server', ['-m', 'x.gguf'], {})).toBeNull();
    expect(detectLlamaServer('llama-server', ['--host', '192.168.1.5'], {})).toBeNull();
    expect(detectLlamaServer('llama-server', ['--host', '/tmp/llama.sock'], {})).toBeNull();
    expect(detectLlamaServer('llama-server', ['--port', 'eighty'], {})).toBeNull();
    expect(detectLlamaServer('llama-server', ['--port', '70000'], {})).toBeNull();
    expect(detectLlamaServer('llama-server', ['--port'], {})).toBeNull();
  });

  it('reads the last of repeated flags, as llama.cpp does', () => {
    expect(flagValue(['--port', '1', '--port=2'], '--port')).toBe('2');
    expect(flagValue(['--portable', '1'], '--port')).toBeUndefined();
  });
});

describe('describeActivity', () => {
  it('says which signal the boot line uses', () => {
    expect(describeActivity(undefined, false, true)).toBe('CPU time of the process tree');
    expect(describeActivity('http://127.0.0.1:8081/metrics', true, true)).toBe('llama.cpp metrics at http://127.0.0.1:8081/metrics (detected from --port/--host), CPU time of the process tree until it answers');
    expect(describeActivity(undefined, false, false)).toBe('unknown on this platform (paced whenever it runs)');
  });
});
