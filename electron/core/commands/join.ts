/** `gpu-share join`: hold a slot, heartbeat it, print the boot line; free the slot on SIGINT or
 *  SIGTERM. With --watch, print this peer's `/gpu/peers` view as a JSON line every interval. */
import { RegistryError, type RegistryHelper } from '../../../native/helper.js';
import { systemClock } from '../clock.js';
import { segmentName } from '../registry/abi.js';
import { BrokenRegistryNotice } from '../registry/broken.js';
import { RegistryMember, processBootUs, startHeartbeat } from '../registry/member.js';
import { RegistryObserver } from '../registry/observer.js';
import { RegistrySegment } from '../registry/segment.js';
import { bootLogLine } from '../registry/view.js';
import { failureLatch, stopSignals, type CommandIo } from './io.js';

export interface JoinOptions {
  gpuKey: string;
  weight: number;
  name: string;
  active: boolean;
  watch: boolean;
  intervalMs: number;
}

export async function runJoin(options: JoinOptions, io: CommandIo, helper: RegistryHelper): Promise<number> {
  const clock = systemClock(() => helper.wallUs());
  const segment = RegistrySegment.openForJoin(helper, options.gpuKey);
  const member = new RegistryMember(segment, clock, {
    pid: process.pid,
    ownerPid: process.pid,
    bootUs: processBootUs(clock.wallUs()),
    name: options.name,
    weight: options.weight,
    active: options.active,
  });
  const slot = member.join();
  // Listen for SIGINT/SIGTERM before announcing ourselves: a supervisor may stop us the moment it
  // reads the boot line, and the slot must be freed then too.
  const signals = stopSignals();
  const alive = new RegistryObserver(clock, false).peers(segment).length;
  io.out(bootLogLine(options.gpuKey, slot, options.weight, alive));

  const failure = failureLatch();
  // A registry truncated under us is broken, not fatal: said once, then we keep trying.
  const broken = new BrokenRegistryNotice((line, state) => io.err(state === 'broken' ? `gpu-share: ${line}; heartbeating on until it is valid again` : `gpu-share: ${line}`));
  const heartbeat = startHeartbeat(member, (result) => {
    if (result === 'rejoined') {
      broken.succeeded();
      io.err(`gpu-share: our slot was reclaimed (stopped for more than 3 s?); rejoined ${segmentName(options.gpuKey)} slot ${member.slot}`);
    } else if (result instanceof Error) {
      if (!broken.failed(result)) failure.fail(result);
    } else {
      broken.succeeded();
    }
  });
  const watcher = new RegistryObserver(clock, true);
  const watch = options.watch
    ? setInterval(() => {
        try {
          io.out(JSON.stringify(watcher.view(options.gpuKey, segment, member.slot)));
        } catch (error) {
          if (!broken.failed(error)) failure.fail(error);
        }
      }, options.intervalMs)
    : null;

  await Promise.race([signals.stopped, failure.failed]);
  heartbeat.stop();
  if (watch) clearInterval(watch);
  if (failure.error === null) member.leave();
  segment.close();
  signals.release();
  const error = failure.error;
  if (error !== null) {
    io.err(`gpu-share: ${error instanceof RegistryError ? error.message : `heartbeat failed: ${error.message}`}`);
    return 1;
  }
  return 0;
}
