type Shape = { at(x: number, y: number): boolean; box(x0: number, y0: number, x1: number, y1: number): number };
export interface Layer {
  shape: Shape;
  color?: number[] | ((x: number, y: number) => number[]);
  clear?: boolean;
}
export const TRAY_STATES: string[];
export const COLORS: Record<string, number[]>;
export const TRAY_SIZES: { linux: number; windows: number[]; mac: number };
export const APP_ICO_SIZES: number[];
export const ICNS_TYPES: Record<string, number>;
export function trayLayers(state: string, template: boolean): Layer[];
export function appLayers(): Layer[];
export function rasterize(layers: Layer[], size: number, units: number): Uint8Array;
export function crc32(bytes: Uint8Array): number;
export function zlibDeflate(data: Uint8Array): Uint8Array;
export function encodePng(rgba: Uint8Array, width: number, height: number): Buffer;
export function encodeIco(images: Array<{ size: number; rgba: Uint8Array }>): Buffer;
export function encodeIcns(pngBySize: Map<number, Buffer>): Buffer;
export function renderAll(): Map<string, Buffer>;
