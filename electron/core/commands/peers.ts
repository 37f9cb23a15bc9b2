/** `gpu-share peers`: print the `/gpu/peers` view as an observer (no slot held, segment opened
 *  read-only and never created). Without a key, every device (and every registry of this user)
 *  that has a segment, one view after the other. --watch refreshes every interval with monotonic
 *  ages. */
import { RegistryError, type RegistryHelper } from '../../../native/helper.js';
import { systemClock } from '../clock.js';
import { formatPeersTable } from '../registry/format.js';
import { unknownKeyNote } from '../registry/keys.js';
import { RegistryObserver } from '../registry/observer.js';
import { listSegments } from '../registry/segment-list.js';
import { RegistrySegment, segmentDir } from '../registry/segment.js';
import type { GpuPeersView } from '../registry/view.js';
import type { DeviceEntry } from '../telemetry/device-list.js';
import { failureLatch, stopSignals, type CommandIo } from './io.js';

export interface PeersOptions {
  /** undefined: every device that has a segment. */
  gpuKey: string | undefined;
  json: boolean;
  watch: boolean;
  intervalMs: number;
  /** Clear the screen between refreshes (a terminal, not a pipe). */
  clearScreen: boolean;
}

/** One key's segment (opened when it appears) and its own observer (liveness is per segment). */
class Watched {
  segment: RegistrySegment | null = null;
  readonly observer: RegistryObserver;

  constructor(
    readonly gpuKey: string,
    private readonly helper: RegistryHelper,
    observer: RegistryObserver,
  ) {
    this.observer = observer;
  }

  /** The view (no peers while nobody has created the registry), and whether the segment exists. */
  read(): { view: GpuPeersView; exists: boolean } {
    this.segment ??= RegistrySegment.openForObserve(this.helper, this.gpuKey);
    return { view: this.observer.view(this.gpuKey, this.segment), exists: this.segment !== null };
  }

  close(): void {
    this.segment?.close();
    this.segment = null;
  }
}

export async function runPeers(options: PeersOptions, io: CommandIo, helper: RegistryHelper): Promise<number> {
  const clock = systemClock(() => helper.wallUs());
  const watched = new Map<string, Watched>();
  const watchedOf = (key: string): Watched => {
    let entry = watched.get(key);
    if (entry === undefined) {
      entry = new Watched(key, helper, new RegistryObserver(clock, options.watch));
      watched.set(key, entry);
    }
    return entry;
  };
  let devices: DeviceEntry[] | null = null;
  // Telemetry (NVML, /proc) is imported only when needed: `peers --gpu-key K` on an existing
  // registry, what scripts and tests run in loops, starts as fast as before.
  const devicesNow = async (): Promise<DeviceEntry[]> => (devices ??= (await import('../telemetry/device-list.js')).listDevices({ wallUs: () => clock.wallUs() }).devices);
  /** The keys of this user's registries among those we can name (devices' and the one asked
   *  for): segment files are named by a hash, so a key is known only by hashing it. */
  const ownSegmentKeys = async (): Promise<string[]> => {
    const known = [...(await devicesNow()).map((d) => d.key), ...(options.gpuKey === undefined ? [] : [options.gpuKey])];
    return listSegments(segmentDir(helper), known).flatMap((s) => (s.mine && s.key !== null ? [s.key] : []));
  };
  const render = (view: GpuPeersView): string => (options.json ? JSON.stringify(view) : formatPeersTable(view));
  /** Segments refused or foreign in all-devices mode: said once each, the others still shown. */
  const said = new Set<string>();

  const readText = async (): Promise<string | null> => {
    if (options.gpuKey !== undefined) {
      const { view, exists } = watchedOf(options.gpuKey).read();
      if (!exists && !said.has(options.gpuKey)) {
        said.add(options.gpuKey);
        const note = unknownKeyNote(options.gpuKey, await devicesNow(), await ownSegmentKeys());
        if (note !== null) io.err(`gpu-share: ${note}`);
      }
      return render(view);
    }
    const keys = [...new Set([...(await devicesNow()).map((d) => d.key), ...(await ownSegmentKeys())])];
    const texts: string[] = [];
    for (const key of keys) {
      try {
        const { view, exists } = watchedOf(key).read();
        if (exists) texts.push(render(view));
      } catch (error) {
        if (!(error instanceof RegistryError)) throw error;
        if (!said.has(`${key}:${error.message}`)) io.err(`gpu-share: ${error.message}`);
        said.add(`${key}:${error.message}`);
      }
    }
    if (texts.length > 0) return texts.join(options.json ? '\n' : '\n\n');
    if (!said.has('')) {
      said.add('');
      io.err(`gpu-share: no registry on this machine yet; devices: ${(await devicesNow()).map((d) => `${d.index}: ${d.key} (${d.name})`).join(', ') || 'none'}`);
    }
    return null;
  };

  const closeAll = (): void => {
    for (const entry of watched.values()) entry.close();
  };
  if (!options.watch) {
    const text = await readText();
    if (text !== null) io.out(text);
    closeAll();
    return 0;
  }
  const failure = failureLatch();
  const show = async (): Promise<void> => {
    try {
      const text = await readText();
      if (text === null) return;
      io.out(options.clearScreen && !options.json ? `\x1b[H\x1b[2J${text}` : options.json ? text : `${text}\n`);
    } catch (error) {
      failure.fail(error);
    }
  };
  await show();
  const timer = setInterval(() => void show(), options.intervalMs);
  const signals = stopSignals();
  await Promise.race([signals.stopped, failure.failed]);
  signals.release();
  clearInterval(timer);
  closeAll();
  if (failure.error !== null) {
    io.err(`gpu-share: ${failure.error.message}`);
    return 1;
  }
  return 0;
}
