/**
 * One colour per peer, everywhere (rows, share bar, timeline lanes, VRAM bar), from its registry
 * slot: the slot is the only identity every view agrees on, and it is stable for a peer's life.
 * The 16 slots (the ABI's slot count) take the 16 hues 22.5° apart, visited in steps of 7 (7 and 16
 * share no factor, so every hue is used once): neighbouring slots land 157.5° apart and never look
 * alike.
 */

export const SLOT_COUNT = 16;
const HUE_STEP = 360 / SLOT_COUNT;
const SLOT_STRIDE = 7;
const HUE_OFFSET = 205;

export interface PeerColour {
  hue: number;
  /** Solid: the peer's marks (dot, share, "ran" blocks). */
  solid: string;
  /** Light: its schedule windows and backgrounds. */
  light: string;
}

/** A slot as an index into the 16 (anything that is not a slot counts as slot 0). */
const slotIndex = (slot: number): number => (Number.isInteger(slot) && slot >= 0 ? slot % SLOT_COUNT : 0);

export function slotHue(slot: number): number {
  return (HUE_OFFSET + ((slotIndex(slot) * SLOT_STRIDE) % SLOT_COUNT) * HUE_STEP) % 360;
}

/** Lightness steps through three levels by slot, so that two slots whose hues happen to be
 *  close (45° apart) still differ in brightness. */
const LIGHTNESS = [47, 38, 57] as const;

/** Built once per slot: the timeline asks for every block of every frame. */
const colourBySlot = new Map<number, PeerColour>();

export function peerColour(slot: number): PeerColour {
  const known = colourBySlot.get(slot);
  if (known !== undefined) return known;
  const colour = makePeerColour(slot);
  colourBySlot.set(slot, colour);
  return colour;
}

function makePeerColour(slot: number): PeerColour {
  const hue = Math.round(slotHue(slot) * 10) / 10;
  const lightness = LIGHTNESS[slotIndex(slot) % LIGHTNESS.length] ?? 47;
  return {
    hue,
    solid: `hsl(${hue} 68% ${lightness}%)`,
    light: `hsl(${hue} 68% ${lightness}% / 0.28)`,
  };
}
