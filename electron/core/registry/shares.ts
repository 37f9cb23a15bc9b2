/**
 * Shares of the GPU among the alive, active peers: `w_i / Σ w_j`, then a floor of `min(10%, 1/n)`
 * by water-filling (peers under the floor are raised to it and the rest is split among the others
 * by weight, repeated until nobody is under). Weights 2,1,1 → 0.5, 0.25, 0.25.
 */
export const SHARE_FLOOR_MAX = 0.1;

export function shareFloor(activeCount: number): number {
  return activeCount <= 0 ? 0 : Math.min(SHARE_FLOOR_MAX, 1 / activeCount);
}

/** @param weights positive, finite weights (the codec sanitises them) of the active peers */
export function computeShares(weights: readonly number[]): number[] {
  const n = weights.length;
  if (n === 0) return [];
  const floor = shareFloor(n);
  const shares = new Array<number>(n).fill(0);
  const pinned = new Array<boolean>(n).fill(false);
  let pinnedCount = 0;
  for (;;) {
    const mass = 1 - floor * pinnedCount;
    let free = 0;
    for (let i = 0; i < n; i++) if (!pinned[i]) free += weights[i] ?? 0;
    let raised = 0;
    for (let i = 0; i < n; i++) {
      if (pinned[i]) continue;
      const share = free > 0 ? (mass * (weights[i] ?? 0)) / free : 0;
      // The tolerance keeps a peer that sits exactly on the floor from flapping on rounding.
      if (share < floor - 1e-12) {
        pinned[i] = true;
        shares[i] = floor;
        raised++;
      } else {
        shares[i] = share;
      }
    }
    if (raised === 0) return shares;
    pinnedCount += raised;
    if (pinnedCount === n) return shares.fill(1 / n);
  }
}
