/**
 * The gateway's waiting line: requests wait for their engine by priority (interactive before
 * background before lab), first come first served within a priority. Each engine serves one
 * request at a time (the built-in engine has one sequence; a llama-server slot likewise), so an
 * interactive request overtakes background ones that have not started yet. Pure bookkeeping: no
 * I/O, no timers; the caller resolves the grants and hears each engine's count of requests.
 */
import { PRIORITY_RANK, type Priority } from '../planner/policy.js';

export interface Waiter {
  readonly seq: number;
  readonly key: string;
  readonly priority: Priority;
  grant(): void;
}

export class GatewayQueue {
  private readonly waiting: Waiter[] = [];
  private readonly busy = new Set<string>();
  private seq = 0;

  /** `onCount`: told each time the number of requests for an engine (served now or waiting)
   *  changes, with the new number: the engine's activity as the gateway knows it. */
  constructor(
    readonly limit: number,
    private readonly onCount: (key: string, count: number) => void = () => undefined,
  ) {}

  /** Requests for `key`: the one served now and those waiting for it. */
  count(key: string): number {
    return (this.busy.has(key) ? 1 : 0) + this.waiting.filter((w) => w.key === key).length;
  }

  get depth(): number {
    return this.waiting.length;
  }

  /** Is a request being served on `key` now? */
  serving(key: string): boolean {
    return this.busy.has(key);
  }

  /** Is there room for one more waiter? */
  get full(): boolean {
    return this.waiting.length >= this.limit;
  }

  /**
   * Join the line for `key` (an engine). Returns the position (0 = served now: the grant is called
   * at once) and a `leave` to call when the client goes away before its turn.
   */
  enter(key: string, priority: Priority, grant: () => void): { position: number; leave: () => void } {
    const waiter: Waiter = { seq: ++this.seq, key, priority, grant };
    if (!this.busy.has(key) && !this.waiting.some((w) => w.key === key)) {
      this.busy.add(key);
      this.onCount(key, 1);
      grant();
      return { position: 0, leave: () => undefined };
    }
    this.waiting.push(waiter);
    this.waiting.sort(byTurn);
    this.onCount(key, this.count(key));
    return {
      position: this.positionOf(waiter),
      leave: () => {
        const at = this.waiting.indexOf(waiter);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        this.onCount(key, this.count(key));
      },
    };
  }

  /** The request on `key` is done: the next in line for it gets its turn. */
  release(key: string): void {
    const next = this.waiting.find((w) => w.key === key);
    if (next === undefined) {
      if (this.busy.delete(key)) this.onCount(key, 0);
      return;
    }
    this.waiting.splice(this.waiting.indexOf(next), 1);
    this.onCount(key, this.count(key));
    next.grant();
  }

  /** 1-based place among those waiting for the same engine (the one being served is ahead). */
  private positionOf(waiter: Waiter): number {
    return this.waiting.filter((w) => w.key === waiter.key).indexOf(waiter) + 1;
  }
}

function byTurn(a: Waiter, b: Waiter): number {
  return PRIORITY_RANK[b.priority] - PRIORITY_RANK[a.priority] || a.seq - b.seq;
}
