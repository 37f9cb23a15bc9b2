/** `gpu-share peers`: print the `/gpu/peers` view as an observer (no slot held, segment opened
 *  read-only and never created). --watch refreshes it every interval with monotonic ages. */
import type { RegistryHelper } from '../../../native/helper.js';
import { systemClock } from '../clock.js';
import { formatPeersTable } from '../registry/format.js';
import { RegistryObserver } from '../registry/observer.js';
import { RegistrySegment } from '../registry/segment.js';
import type { GpuPeersView } from '../registry/view.js';
import { failureLatch, stopSignals, type CommandIo } from './io.js';

export interface PeersOptions {
  gpuKey: string;
  json: boolean;
  watch: boolean;
  intervalMs: number;
  /** Clear the screen between refreshes (a terminal, not a pipe). */
  clearScreen: boolean;
}

export async function runPeers(options: PeersOptions, io: CommandIo, helper: RegistryHelper): Promise<number> {
  const clock = systemClock(() => helper.wallUs());
  const observer = new RegistryObserver(clock, options.watch);
  let segment: RegistrySegment | null = RegistrySegment.openForObserve(helper, options.gpuKey);
  const render = (view: GpuPeersView): string => (options.json ? JSON.stringify(view) : formatPeersTable(view));
  const readView = (): GpuPeersView => {
    // The registry may be created after we start watching.
    segment ??= RegistrySegment.openForObserve(helper, options.gpuKey);
    return observer.view(options.gpuKey, segment);
  };

  if (!options.watch) {
    io.out(render(readView()));
    segment?.close();
    return 0;
  }
  const failure = failureLatch();
  const show = (): void => {
    try {
      const text = render(readView());
      io.out(options.clearScreen && !options.json ? `\x1b[H\x1b[2J${text}` : options.json ? text : `${text}\n`);
    } catch (error) {
      failure.fail(error);
    }
  };
  show();
  const timer = setInterval(show, options.intervalMs);
  const signals = stopSignals();
  await Promise.race([signals.stopped, failure.failed]);
  signals.release();
  clearInterval(timer);
  segment?.close();
  if (failure.error !== null) {
    io.err(`gpu-share: ${failure.error.message}`);
    return 1;
  }
  return 0;
}
