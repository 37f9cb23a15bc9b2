import { describe, expect, it } from 'vitest';
import { commandFor, healthPortOf, servesHttp, type LaunchSpec } from '../../electron/core/engines/supervisor.js';
import { declaredPortOf } from '../../electron/core/pacer/server-activity.js';
import { ENGINE_SECRET_ENV } from '../../electron/core/engines/engine-secret.js';
import { kvCacheTypeOf } from '../../electron/core/engines/launch-spec.js';
import { matchToken } from '../../electron/core/api/http.js';

const spec: LaunchSpec = { profileId: 'qwen', name: 'qwen', kind: 'llama-server', capability: 'chat', modelPath: '/m/qwen.gguf', modelKey: 'k', contextSize: 4096, gpuLayers: 99, threads: null, weight: 1, priority: 'interactive', pinned: false, command: '/opt/llama-server', args: [], env: {}, peakBytes: 1, peakSource: 'ESTIMATED' };
const deps = { launchers: { nodePath: '/node', cliPath: '/cli.js', builtinHostPath: '/host.js' }, gpuKey: 'GPU-1' };

describe("engines' ports", () => {
  it('gives each kind its secret the way it takes one; a command engine gets none', () => {
    const server = commandFor(spec, deps, 's3cret');
    expect(server.args.join(' ')).toContain('--api-key s3cret');
    expect(commandFor({ ...spec, kind: 'llamafile' }, deps, 's3cret').args.join(' ')).toContain('--api-key s3cret');
    const builtin = commandFor({ ...spec, kind: 'builtin' }, deps, 's3cret');
    expect(builtin.env[ENGINE_SECRET_ENV]).toBe('s3cret');
    expect(builtin.args).not.toContain('s3cret');
    const command = commandFor({ ...spec, kind: 'command', command: '/bin/thing', modelPath: null }, deps, 's3cret');
    expect(JSON.stringify(command)).not.toContain('s3cret');
  });

  it('knows which engines serve HTTP and on which port', () => {
    expect(servesHttp({ kind: 'command', args: ['40'] })).toBe(false);
    expect(servesHttp({ kind: 'command', args: ['--port', '9000'] })).toBe(true);
    expect(servesHttp({ kind: 'command', args: ['--port=9000'] })).toBe(true);
    expect(servesHttp({ kind: 'builtin', args: [] })).toBe(true);
    expect(declaredPortOf(['--port', 'lots'])).toBeNull();
    expect(healthPortOf({ kind: 'llamafile', args: [] })).toBe(8080);
    expect(healthPortOf({ kind: 'opencoti-llamafile', args: ['--port', '8123'] })).toBe(8123);
    expect(healthPortOf({ kind: 'command', args: ['--port', '8123'] })).toBeNull();
  });

  it('reads the KV cache type from llama.cpp flags', () => {
    expect(kvCacheTypeOf(['-ctk', 'q8_0'])).toBe('q8_0');
    expect(kvCacheTypeOf(['--cache-type-k=q4_0'])).toBe('q4_0');
    expect(kvCacheTypeOf(['-ctk', 'nonsense'])).toBeUndefined();
    expect(kvCacheTypeOf([])).toBeUndefined();
  });

  it('takes the bearer scheme in any case, and nothing else', () => {
    const tokens = new Map([['abc_DEF-123', 'x']]);
    expect(matchToken('Bearer abc_DEF-123', tokens)).toBe('x');
    expect(matchToken('bearer abc_DEF-123', tokens)).toBe('x');
    expect(matchToken('BEARER abc_DEF-123', tokens)).toBe('x');
    expect(matchToken('Basic abc_DEF-123', tokens)).toBeNull();
    expect(matchToken('bearer abc_def-123', tokens)).toBeNull();
  });
});
