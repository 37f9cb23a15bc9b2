/**
 * Reading the registry as a reader: one-shot (wall-clock ages) or watching (monotonic ages since
 * each heartbeat last changed). Produces the alive peers with shares and the `/gpu/peers` view.
 */
import type { Clock } from '../clock.js';
import type { DecodedSegment } from './codec.js';
import { LivenessWatcher, judgeOneShot } from './liveness.js';
import { headerProblemError } from './segment.js';
import { buildPeersView, resolvePeers, type AlivePeer, type GpuPeersView } from './view.js';

export interface SegmentReader {
  readonly gpuKey: string;
  read(): DecodedSegment;
}

export class RegistryObserver {
  private readonly watcher: LivenessWatcher | null;

  /** @param watching true for a reader that reads repeatedly (ages on the monotonic clock) */
  constructor(
    private readonly clock: Clock,
    watching: boolean,
  ) {
    this.watcher = watching ? new LivenessWatcher() : null;
  }

  /** Alive peers of a segment; throws RegistryError when its header is not ABI v1. */
  peers(segment: SegmentReader): AlivePeer[] {
    const decoded = segment.read();
    if (decoded.headerProblem !== null) throw headerProblemError(segment.gpuKey, decoded.headerProblem);
    const liveness = this.watcher
      ? this.watcher.observe(decoded.slots, this.clock.wallUs(), this.clock.monoUs())
      : judgeOneShot(decoded.slots, this.clock.wallUs());
    return resolvePeers(decoded, liveness);
  }

  /** The `/gpu/peers` view; segment null = nobody has created the registry yet. */
  view(gpuKey: string, segment: SegmentReader | null, selfSlot: number | null = null): GpuPeersView {
    return buildPeersView(gpuKey, segment === null ? [] : this.peers(segment), selfSlot);
  }
}
