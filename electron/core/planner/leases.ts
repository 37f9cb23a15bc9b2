/**
 * Leases: memory promised to a load in progress, so that two loads planned a moment apart do not
 * both count the same free bytes. Taken on admission; `materialized` follows the loading process's
 * measured use; released when the load completes or fails; a lease past its TTL is never counted.
 */
import type { Lease } from './types.js';

export class LeaseBook {
  private readonly leases = new Map<string, Lease>();

  take(id: string, reservedBytes: number, nowUs: number, ttlUs: number): Lease {
    if (this.leases.has(id)) throw new Error(`lease ${id} is already held`);
    if (!Number.isFinite(reservedBytes) || reservedBytes <= 0) throw new Error(`lease ${id}: reserved bytes must be > 0, got ${reservedBytes}`);
    const lease: Lease = { id, reservedBytes, materializedBytes: 0, expiresAtUs: nowUs + ttlUs };
    this.leases.set(id, lease);
    return lease;
  }

  /** The loading process now uses `bytes` (measured): that part of the lease is real use. */
  materialize(id: string, bytes: number): void {
    const lease = this.leases.get(id);
    if (lease === undefined || !Number.isFinite(bytes) || bytes < 0) return;
    this.leases.set(id, { ...lease, materializedBytes: Math.min(lease.reservedBytes, bytes) });
  }

  release(id: string): boolean {
    return this.leases.delete(id);
  }

  /** Unexpired leases; expired ones are dropped here. */
  active(nowUs: number): Lease[] {
    for (const [id, lease] of this.leases) if (lease.expiresAtUs <= nowUs) this.leases.delete(id);
    return [...this.leases.values()];
  }
}
