/**
 * Shares of the GPU among the alive, active peers.
 *
 * - The share (what /gpu/peers, /props, /metrics, the UI and the tray show) is the plain ratio
 *   `w_i / Σ w_j`: weights 2,1,1 → 50/25/25; 20:1 → 95.24/4.76. Weight is compute share.
 * - The window share (what the TDM schedule gives each peer, as opencoti does) floors each share
 *   at 10 % and renormalizes them all to sum 1: 20:1 → 90.50/9.50. The floor keeps a small peer's
 *   wait between windows bounded; peers above it keep their proportions, and only past 10 active
 *   peers does it make the ones under 10 % equal.
 */
export const WINDOW_SHARE_FLOOR = 0.1;

/** @param weights positive, finite weights (the codec sanitises them) of the active peers */
export function computeShares(weights: readonly number[]): number[] {
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  if (!(total > 0)) return weights.map(() => 0);
  return weights.map((weight) => weight / total);
}

/** @param shares the plain shares of the active peers (they sum to 1) */
export function windowShares(shares: readonly number[]): number[] {
  const floored = shares.map((share) => Math.max(WINDOW_SHARE_FLOOR, share));
  const total = floored.reduce((sum, share) => sum + share, 0);
  if (!(total > 0)) return shares.map(() => 0);
  return floored.map((share) => share / total);
}
