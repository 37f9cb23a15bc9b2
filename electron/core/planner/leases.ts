/**
 * Leases: memory promised to a load in progress, so that two loads planned a moment apart do not
 * both count the same free bytes. Taken on admission; `materialized` follows the loading process's
 * measured use; released when the load completes or fails; a lease past its TTL is never counted.
 */
import type { Lease } from './types.js';

export class LeaseBook {
  private readonly leases = new Map<string, Lease>();
  /** Lease id → the device it holds memory on (none: the book's only device). */
  private readonly devices = new Map<string, string>();

  /** `deviceKey`: the device whose memory it holds; leases of one device never count on another. */
  take(id: string, reservedBytes: number, nowUs: number, ttlUs: number, deviceKey?: string): Lease {
    if (this.leases.has(id)) throw new Error(`lease ${id} is already held`);
    if (!Number.isFinite(reservedBytes) || reservedBytes <= 0) throw new Error(`lease ${id}: reserved bytes must be > 0, got ${reservedBytes}`);
    const lease: Lease = { id, reservedBytes, materializedBytes: 0, expiresAtUs: nowUs + ttlUs };
    this.leases.set(id, lease);
    if (deviceKey !== undefined) this.devices.set(id, deviceKey);
    return lease;
  }

  /** The loading process now uses `bytes` (measured): that part of the lease is real use. */
  materialize(id: string, bytes: number): void {
    const lease = this.leases.get(id);
    if (lease === undefined || !Number.isFinite(bytes) || bytes < 0) return;
    this.leases.set(id, { ...lease, materializedBytes: Math.min(lease.reservedBytes, bytes) });
  }

  release(id: string): boolean {
    this.devices.delete(id);
    return this.leases.delete(id);
  }

  /** Unexpired leases (of one device, when `deviceKey` is given); expired ones are dropped here. */
  active(nowUs: number, deviceKey?: string): Lease[] {
    for (const [id, lease] of this.leases) {
      if (lease.expiresAtUs <= nowUs) this.release(id);
    }
    const all = [...this.leases.values()];
    return deviceKey === undefined ? all : all.filter((lease) => (this.devices.get(lease.id) ?? deviceKey) === deviceKey);
  }
}
