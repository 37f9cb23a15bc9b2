/**
 * The weight control: a log-scale slider over the contract's whole range, 0.01–100 (equal travel
 * for ×2 anywhere on it, so 0.5 → 1 feels like 1 → 2), the usual weights marked on it, a number
 * field over the same range, keyboard steps, and the throttle that keeps a drag from flooding the
 * core while always sending the final value. The tray, the CLI and the API take the same range.
 */
import { WEIGHT_MAX, WEIGHT_MIN, WEIGHT_PRESETS } from '../../../electron/core/contract.js';

export const SLIDER_MIN_WEIGHT = WEIGHT_MIN;
export const SLIDER_MAX_WEIGHT = WEIGHT_MAX;
/** Marked on the slider; the tray offers the same ones. */
export const WEIGHT_MARKS: readonly number[] = WEIGHT_PRESETS;
/** The range input's integer positions: 0 … SLIDER_STEPS. */
export const SLIDER_STEPS = 1000;

const LOG_MIN = Math.log(SLIDER_MIN_WEIGHT);
const LOG_SPAN = Math.log(SLIDER_MAX_WEIGHT) - LOG_MIN;

/** Two significant figures: a dragged weight reads 1.3 or 0.47, not 1.2882495516931343. */
export function roundWeight(weight: number): number {
  return Number(weight.toPrecision(2));
}

export function positionToWeight(position: number): number {
  const clamped = Math.min(SLIDER_STEPS, Math.max(0, Number.isFinite(position) ? position : 0));
  return roundWeight(Math.exp(LOG_MIN + (clamped / SLIDER_STEPS) * LOG_SPAN));
}

/** Where a weight sits on the slider (a weight outside the range pins to an end). */
export function weightToPosition(weight: number): number {
  if (!(weight > 0)) return 0;
  const raw = ((Math.log(weight) - LOG_MIN) / LOG_SPAN) * SLIDER_STEPS;
  return Math.round(Math.min(SLIDER_STEPS, Math.max(0, raw)));
}

export type WeightKey = 'ArrowUp' | 'ArrowRight' | 'ArrowDown' | 'ArrowLeft' | 'PageUp' | 'PageDown' | 'Home' | 'End';
const WEIGHT_KEYS: readonly string[] = ['ArrowUp', 'ArrowRight', 'ArrowDown', 'ArrowLeft', 'PageUp', 'PageDown', 'Home', 'End'];

export const isWeightKey = (key: string): key is WeightKey => WEIGHT_KEYS.includes(key);

/** One arrow press: ×1.1 or ÷1.1, fine enough to set 2:1 against 1.9:1 from the keyboard. */
export const ARROW_FACTOR = 1.1;

/** A weight held to the slider's range. */
const clampSlider = (w: number): number => Math.min(SLIDER_MAX_WEIGHT, Math.max(SLIDER_MIN_WEIGHT, w));

/** `weight × factor` at two significant figures, always a different value than `weight` (at 1.0
 *  and below the rounding alone could give the same number back), within the slider's range. */
function scaleWeight(weight: number, factor: number): number {
  const scaled = clampSlider(roundWeight(weight * factor));
  if (scaled !== weight || scaled === SLIDER_MAX_WEIGHT || scaled === SLIDER_MIN_WEIGHT) return scaled;
  // The last significant figure's unit, one step further in the same direction.
  const unit = 10 ** (Math.floor(Math.log10(weight)) - 1);
  return clampSlider(roundWeight(factor > 1 ? weight + unit : weight - unit));
}

/**
 * The weight after a key press: arrows multiply or divide by 1.1 (two significant figures), Page
 * keys double or halve, Home/End go to the slider's ends. Always within 0.01–100.
 */
export function stepWeight(current: number, key: WeightKey): number {
  const value = Number.isFinite(current) && current > 0 ? clampSlider(current) : 1;
  switch (key) {
    case 'ArrowUp':
    case 'ArrowRight':
      return scaleWeight(value, ARROW_FACTOR);
    case 'ArrowDown':
    case 'ArrowLeft':
      return scaleWeight(value, 1 / ARROW_FACTOR);
    case 'PageUp':
      return scaleWeight(value, 2);
    case 'PageDown':
      return scaleWeight(value, 0.5);
    case 'Home':
      return SLIDER_MIN_WEIGHT;
    case 'End':
      return SLIDER_MAX_WEIGHT;
  }
}

export type WeightInput = { ok: true; weight: number } | { ok: false; message: string };

/** The number field: anything the core accepts (0.01–100), with a message that says what to
 *  type otherwise. */
export function parseWeightInput(text: string): WeightInput {
  const trimmed = text.trim().replace(',', '.');
  if (trimmed === '') return { ok: false, message: `type a weight from ${WEIGHT_MIN} to ${WEIGHT_MAX}` };
  const value = Number(trimmed);
  if (!Number.isFinite(value)) return { ok: false, message: `"${text.trim()}" is not a number: type a weight from ${WEIGHT_MIN} to ${WEIGHT_MAX}` };
  if (value < WEIGHT_MIN || value > WEIGHT_MAX) return { ok: false, message: `${value} is out of range: a weight is from ${WEIGHT_MIN} to ${WEIGHT_MAX}` };
  return { ok: true, weight: Number(value.toPrecision(6)) };
}

export interface Timers {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface Throttle<T> {
  /** A new value: sent at once if the last send is older than the interval, else when it is. */
  push(value: T): void;
  /** The drag ended: send the latest value now if it has not been sent. */
  flush(): void;
  /** Drop anything pending (the row left). */
  cancel(): void;
}

/**
 * Leading and trailing throttle: the first value of a drag goes at once, at most one per interval
 * after it, and the last value is always sent (by the trailing timer or by flush), so the core
 * ends on what the user let go at.
 */
export function createThrottle<T>(send: (value: T) => void, intervalMs: number, timers: Timers): Throttle<T> {
  let lastSentAt = Number.NEGATIVE_INFINITY;
  let pending: { value: T } | null = null;
  let timer: unknown = null;

  const fire = (): void => {
    timer = null;
    if (pending === null) return;
    const { value } = pending;
    pending = null;
    lastSentAt = timers.now();
    send(value);
  };

  return {
    push(value) {
      pending = { value };
      const wait = lastSentAt + intervalMs - timers.now();
      if (wait <= 0) {
        if (timer !== null) {
          timers.clearTimeout(timer);
          timer = null;
        }
        fire();
      } else if (timer === null) {
        timer = timers.setTimeout(fire, wait);
      }
    },
    flush() {
      if (timer !== null) {
        timers.clearTimeout(timer);
        timer = null;
      }
      fire();
    },
    cancel() {
      if (timer !== null) timers.clearTimeout(timer);
      timer = null;
      pending = null;
    },
  };
}
