import { describe, expect, it } from 'vitest';
import { spawn, execFileSync } from 'node:child_process';
import { descendantsOf, parseProcessTable, utilityForkPlan } from '../../electron/shell/utility-fork.js';
import { commandFor, type LaunchSpec } from '../../electron/core/engines/supervisor.js';

const APP = '/opt/GPU Share/gpu-share';
const HOST = '/opt/GPU Share/resources/app.asar/dist/electron/core/engines/builtin/engine-host.js';
const CLI = '/opt/GPU Share/resources/app.asar/dist/electron/cli.js';
const builtinSpec: LaunchSpec = { profileId: 'q', name: 'qwen-chat', kind: 'builtin', capability: 'chat', modelPath: '/m/q.gguf', modelKey: 'k', contextSize: 256, gpuLayers: 0, threads: null, weight: 1, priority: 'interactive', pinned: false, command: null, args: [], env: {}, peakBytes: 1024 ** 3, peakSource: 'ESTIMATED' };

describe('which engines start as utility processes', () => {
  it('forks the built-in engine host: the script is the module, the rest its arguments', () => {
    const plan = utilityForkPlan({ command: APP, args: [HOST, '--model', '/m/q.gguf', '--name', 'qwen-chat', '--port', '0'], env: { LLAMA_X: '1' } }, APP, { PATH: '/usr/bin', HOME: '/home/u' });
    expect(plan).toEqual({
      modulePath: HOST,
      args: ['--model', '/m/q.gguf', '--name', 'qwen-chat', '--port', '0'],
      execArgv: [],
      env: { PATH: '/usr/bin', HOME: '/home/u', LLAMA_X: '1' },
      serviceName: 'GPU Share engine-host: qwen-chat',
    });
  });

  it('forks `gpu-share run` with the paced command after --', () => {
    const plan = utilityForkPlan({ command: APP, args: [CLI, 'run', '--gpu-key', 'cpu-0', '--exit-with-parent', '--', '/usr/bin/llama-server', '-m', 'x.gguf'], env: {} }, APP, {});
    expect(plan?.modulePath).toBe(CLI);
    expect(plan?.args).toEqual(['run', '--gpu-key', 'cpu-0', '--exit-with-parent', '--', '/usr/bin/llama-server', '-m', 'x.gguf']);
    expect(plan?.serviceName).toBe('GPU Share cli');
  });

  it('starts the estimator with its heap limit as a V8 flag (packaged apps ignore NODE_OPTIONS), and no other flag', () => {
    const plan = utilityForkPlan({ command: APP, args: ['--max-old-space-size=512', '/app/estimate-host.js', '--serve'], env: {} }, APP, {});
    expect(plan?.execArgv).toEqual(['--max-old-space-size=512']);
    expect(plan?.modulePath).toBe('/app/estimate-host.js');
    expect(plan?.args).toEqual(['--serve']);
    expect(utilityForkPlan({ command: APP, args: ['--inspect', '/app/estimate-host.js'], env: {} }, APP, {})).toBeNull();
  });

  it("starts the built-in engine host with the supervisor's V8 flags as execArgv", () => {
    const request = commandFor(builtinSpec, { launchers: { nodePath: APP, cliPath: CLI, builtinHostPath: HOST }, gpuKey: 'cpu-0' });
    const plan = utilityForkPlan(request, APP, {});
    expect(plan?.execArgv).toEqual(['--max-semi-space-size=1']);
    expect(plan?.modulePath).toBe(HOST);
    expect(plan?.args.slice(0, 2)).toEqual(['--model', '/m/q.gguf']);
  });

  it('leaves other executables, and a node without a script, to an ordinary spawn', () => {
    expect(utilityForkPlan({ command: '/usr/bin/llamafile', args: ['-m', 'x'], env: {} }, APP, {})).toBeNull();
    expect(utilityForkPlan({ command: APP, args: [], env: {} }, APP, {})).toBeNull();
    expect(utilityForkPlan({ command: APP, args: ['--version'], env: {} }, APP, {})).toBeNull();
  });

  it('never passes ELECTRON_RUN_AS_NODE on, and the request wins over the environment', () => {
    const plan = utilityForkPlan({ command: APP, args: [HOST], env: { ELECTRON_RUN_AS_NODE: '1', MODE: 'engine' } }, APP, { ELECTRON_RUN_AS_NODE: '1', MODE: 'app', GONE: undefined });
    expect(plan?.env).toEqual({ MODE: 'engine' });
  });
});

describe('process tree', () => {
  it('reads ps output and finds descendants, parents first', () => {
    const table = parseProcessTable(['    1     0', '  100     1', '  200   100', '  201   100', '  300   200', '  999     1', 'garbage', '  12 x', ''].join('\n'));
    expect(descendantsOf(100, table)).toEqual([200, 201, 300]);
    expect(descendantsOf(300, table)).toEqual([]);
  });

  it('ends on a cycle (a table read while pids were reused)', () => {
    expect(descendantsOf(1, parseProcessTable('2 1\n3 2\n1 3\n'))).toEqual([2, 3]);
  });

  it.skipIf(process.platform === 'win32')('finds a real grandchild through ps', async () => {
    const child = spawn('sh', ['-c', 'sleep 30 & echo $!; wait'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const grandchild = await new Promise<number>((resolve) => child.stdout.once('data', (data: Buffer) => resolve(Number(data.toString().trim()))));
      const table = parseProcessTable(execFileSync('ps', ['-A', '-o', 'pid=,ppid='], { encoding: 'utf8' }));
      expect(descendantsOf(process.pid, table)).toEqual(expect.arrayContaining([child.pid, grandchild]));
      expect(descendantsOf(child.pid ?? -1, table)).toEqual([grandchild]);
      process.kill(grandchild, 'SIGKILL');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
