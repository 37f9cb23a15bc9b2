/**
 * The registries a long-running reader (the app, `serve`) has opened, by key: at most `limit`
 * (least recently read evicted first, its segment unmapped), so that asking for ever new keys
 * (`/gpu/peers?gpu_key=…` needs no token) cannot grow the process. Each key has its own watching
 * observer: liveness is judged per slot of one segment.
 */
import type { Clock } from '../clock.js';
import { RegistryObserver } from './observer.js';
import type { RegistrySegment } from './segment.js';
import type { AlivePeer } from './view.js';

export const SEGMENT_CACHE_LIMIT = 64;

interface Entry {
  /** null: nobody has created this registry yet (opened again on the next read). */
  segment: RegistrySegment | null;
  readonly observer: RegistryObserver;
  /** The last problem reported for this key, so that it is said once. */
  problem: string | null;
}

export class SegmentCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly clock: Clock,
    /** Opens a key's segment read-only; null when it does not exist; throws RegistryError. */
    private readonly open: (key: string) => RegistrySegment | null,
    /** A key's problem (refused, foreign), once per change. */
    private readonly report: (key: string, message: string) => void,
    readonly limit = SEGMENT_CACHE_LIMIT,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The alive peers of a key's registry: none when it does not exist or cannot be read. */
  peers(key: string): AlivePeer[] {
    const entry = this.touch(key);
    try {
      entry.segment ??= this.open(key);
      const peers = entry.segment === null ? [] : entry.observer.peers(entry.segment);
      entry.problem = null;
      return peers;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (entry.problem !== message) this.report(key, message);
      entry.problem = message;
      return [];
    }
  }

  close(): void {
    for (const entry of this.entries.values()) entry.segment?.close();
    this.entries.clear();
  }

  /** The key's entry, now the most recently used; evicts the least recently used past the limit. */
  private touch(key: string): Entry {
    let entry = this.entries.get(key);
    if (entry !== undefined) {
      this.entries.delete(key);
    } else {
      entry = { segment: null, observer: new RegistryObserver(this.clock, true), problem: null };
    }
    this.entries.set(key, entry);
    while (this.entries.size > this.limit) {
      const [oldestKey, oldest] = this.entries.entries().next().value as [string, Entry];
      oldest.segment?.close();
      this.entries.delete(oldestKey);
    }
    return entry;
  }
}
