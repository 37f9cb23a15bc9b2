/**
 * The icons under resources/ are what scripts/make-icons.mjs draws, byte for byte, and their
 * containers are well formed: PNG (signature, chunk CRCs, IHDR, pixel data that node:zlib inflates
 * back to the drawn pixels), ICO (directory entries, BMP and PNG images) and ICNS (chunk types and
 * the PNG in each). The tray states read apart: outline vs filled, and a pressure badge whose shape
 * differs per level on the monochrome macOS templates, whose colour differs elsewhere.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as zlib from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  APP_ICO_SIZES, COLORS, ICNS_TYPES, TRAY_SIZES, TRAY_STATES, crc32, encodePng, rasterize, renderAll, trayLayers,
} from '../../scripts/make-icons.mjs';

const root = join(import.meta.dirname, '..', '..');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

interface Png {
  width: number;
  height: number;
  rgba: Uint8Array;
}

/** An independent CRC-32 (node:zlib's when this Node has it). */
const crc = (bytes: Uint8Array): number => {
  const fromZlib = (zlib as unknown as { crc32?: (data: Uint8Array) => number }).crc32;
  return fromZlib ? fromZlib(bytes) >>> 0 : crc32(bytes);
};

/** Decodes an 8-bit RGBA PNG, checking its structure; the pixel data goes through node:zlib. */
function decodePng(file: Buffer): Png {
  expect(file.subarray(0, 8).equals(PNG_SIGNATURE), 'PNG signature').toBe(true);
  let offset = 8;
  let width = 0;
  let height = 0;
  const idat: Buffer[] = [];
  const types: string[] = [];
  while (offset < file.length) {
    const length = file.readUInt32BE(offset);
    const type = file.toString('latin1', offset + 4, offset + 8);
    const data = file.subarray(offset + 8, offset + 8 + length);
    expect(file.readUInt32BE(offset + 8 + length), `CRC of ${type}`).toBe(crc(file.subarray(offset + 4, offset + 8 + length)));
    types.push(type);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      expect([...data.subarray(8, 13)], 'bit depth 8, RGBA, deflate, no interlace').toEqual([8, 6, 0, 0, 0]);
    } else if (type === 'IDAT') idat.push(data);
    offset += 12 + length;
  }
  expect(offset).toBe(file.length);
  expect(types[0]).toBe('IHDR');
  expect(types.at(-1)).toBe('IEND');
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * 4;
  expect(raw.length).toBe((stride + 1) * height);
  const rgba = new Uint8Array(stride * height);
  const filters = new Set<number>();
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    filters.add(filter);
    const src = y * (stride + 1) + 1;
    const row = y * stride;
    const up = row - stride;
    for (let x = 0; x < stride; x++) {
      const a = x >= 4 ? rgba[row + x - 4]! : 0;
      const b = y > 0 ? rgba[up + x]! : 0;
      let predictor = 0;
      if (filter === 1) predictor = a;
      else if (filter === 2) predictor = b;
      else if (filter === 3) predictor = (a + b) >>> 1;
      else if (filter === 4) {
        const c = x >= 4 && y > 0 ? rgba[up + x - 4]! : 0;
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      rgba[row + x] = (raw[src + x]! + predictor) & 0xff;
    }
  }
  expect([...filters].filter((f) => f > 4), 'PNG filter types').toEqual([]);
  return { width, height, rgba };
}

interface IcoImage {
  size: number;
  png: boolean;
  rgba: Uint8Array;
}

/** Parses an ICO file: header, directory entries, and each image (BMP or PNG). */
function decodeIco(file: Buffer): IcoImage[] {
  expect(file.readUInt16LE(0), 'ICO reserved').toBe(0);
  expect(file.readUInt16LE(2), 'ICO type 1 (icon)').toBe(1);
  const count = file.readUInt16LE(4);
  const images: IcoImage[] = [];
  let end = 6 + count * 16;
  for (let i = 0; i < count; i++) {
    const e = 6 + i * 16;
    const size = file[e] === 0 ? 256 : file[e]!;
    expect(file[e + 1] === 0 ? 256 : file[e + 1], 'square').toBe(size);
    expect(file.readUInt16LE(e + 4), 'planes').toBe(1);
    expect(file.readUInt16LE(e + 6), 'bits per pixel').toBe(32);
    const bytes = file.readUInt32LE(e + 8);
    const offset = file.readUInt32LE(e + 12);
    expect(offset, 'images follow each other').toBe(end);
    end = offset + bytes;
    expect(end).toBeLessThanOrEqual(file.length);
    const data = file.subarray(offset, offset + bytes);
    if (data.subarray(0, 8).equals(PNG_SIGNATURE)) {
      const png = decodePng(data);
      expect([png.width, png.height]).toEqual([size, size]);
      images.push({ size, png: true, rgba: png.rgba });
      continue;
    }
    expect(data.readUInt32LE(0), 'BITMAPINFOHEADER').toBe(40);
    expect(data.readInt32LE(4)).toBe(size);
    expect(data.readInt32LE(8), 'XOR + AND height').toBe(size * 2);
    expect(data.readUInt16LE(14)).toBe(32);
    const maskStride = Math.ceil(size / 32) * 4;
    expect(bytes).toBe(40 + size * size * 4 + maskStride * size);
    const rgba = new Uint8Array(size * size * 4);
    let maskErrors = 0;
    for (let y = 0; y < size; y++) {
      for (let x = 0; x < size; x++) {
        const src = 40 + ((size - 1 - y) * size + x) * 4;
        const o = (y * size + x) * 4;
        rgba.set([data[src + 2]!, data[src + 1]!, data[src]!, data[src + 3]!], o);
        const masked = (data[40 + size * size * 4 + (size - 1 - y) * maskStride + (x >>> 3)]! >> (7 - (x & 7))) & 1;
        if (masked !== (rgba[o + 3] === 0 ? 1 : 0)) maskErrors++;
      }
    }
    expect(maskErrors, 'AND mask bits not set exactly where the image is transparent').toBe(0);
    images.push({ size, png: false, rgba });
  }
  expect(end).toBe(file.length);
  return images;
}

/** Parses an ICNS file: chunk type → decoded PNG. */
function decodeIcns(file: Buffer): Map<string, Png> {
  expect(file.toString('latin1', 0, 4)).toBe('icns');
  expect(file.readUInt32BE(4), 'ICNS length').toBe(file.length);
  const chunks = new Map<string, Png>();
  let offset = 8;
  while (offset < file.length) {
    const type = file.toString('latin1', offset, offset + 4);
    const length = file.readUInt32BE(offset + 4);
    expect(length).toBeGreaterThan(8);
    chunks.set(type, decodePng(file.subarray(offset + 8, offset + length)));
    offset += length;
  }
  expect(offset).toBe(file.length);
  return chunks;
}

const read = (path: string): Buffer => readFileSync(join(root, path));
const alphaAt = (png: Png, x: number, y: number): number => png.rgba[(y * png.width + x) * 4 + 3]!;
const rgbAt = (png: Png, x: number, y: number): number[] => [...png.rgba.subarray((y * png.width + x) * 4, (y * png.width + x) * 4 + 3)];

describe('generated icons', () => {
  let generated: Map<string, Buffer>;
  beforeAll(() => {
    generated = renderAll();
  }, 60_000);

  it('regenerating gives the committed bytes, and nothing else lies in resources/icons and resources/tray', () => {
    const onDisk = ['icons', 'tray'].flatMap((dir) => readdirSync(join(root, 'resources', dir)).map((name) => `resources/${dir}/${name}`));
    expect(onDisk.sort()).toEqual([...generated.keys()].sort());
    for (const [path, bytes] of generated) {
      expect(existsSync(join(root, path)), path).toBe(true);
      expect(read(path).equals(bytes), `${path} differs from what scripts/make-icons.mjs draws (run npm run icons)`).toBe(true);
    }
  });

  it('names every tray state for each system', () => {
    for (const state of TRAY_STATES) {
      for (const name of [`tray-${state}.png`, `tray-${state}.ico`, `tray-${state}Template.png`, `tray-${state}Template@2x.png`]) {
        expect(generated.has(`resources/tray/${name}`), name).toBe(true);
      }
    }
    expect(TRAY_STATES).toEqual(['idle', 'pacing', 'pressure-elevated', 'pressure-high', 'pressure-critical']);
  });

  it('PNGs decode (through node:zlib) to exactly the drawn pixels', () => {
    const png = decodePng(read('resources/tray/tray-pacing.png'));
    expect([png.width, png.height]).toEqual([TRAY_SIZES.linux, TRAY_SIZES.linux]);
    expect(Buffer.from(png.rgba).equals(Buffer.from(rasterize(trayLayers('pacing', false), TRAY_SIZES.linux, 16)))).toBe(true);
    // A canvas with every filter's case and long runs (the encoder's own round trip).
    const rgba = new Uint8Array(37 * 23 * 4).map((_, i) => (i % 7 === 0 ? (i * 31) & 0xff : (i >> 6) & 0xff));
    const round = decodePng(encodePng(rgba, 37, 23));
    expect(Buffer.from(round.rgba).equals(Buffer.from(rgba))).toBe(true);
  });

  it('the app icon: a 1024 px PNG, an ICO of 16-256 px (256 as PNG) and an ICNS of PNG chunks', () => {
    const png = decodePng(read('resources/icons/icon.png'));
    expect([png.width, png.height]).toEqual([1024, 1024]);
    const ico = decodeIco(read('resources/icons/icon.ico'));
    expect(ico.map((i) => i.size)).toEqual(APP_ICO_SIZES);
    expect(ico.filter((i) => i.png).map((i) => i.size)).toEqual([256]);
    const icns = decodeIcns(read('resources/icons/icon.icns'));
    expect([...icns.keys()].sort()).toEqual(Object.keys(ICNS_TYPES).sort());
    for (const [type, image] of icns) expect([type, image.width, image.height]).toEqual([type, ICNS_TYPES[type], ICNS_TYPES[type]]);
    expect(Math.max(...Object.values(ICNS_TYPES))).toBe(1024);
    // Transparent corners (a rounded square), opaque middle.
    expect(alphaAt(png, 0, 0)).toBe(0);
    expect(alphaAt(png, 512, 512)).toBe(255);
  });

  it('Windows tray icons hold 16 to 48 px images', () => {
    for (const state of TRAY_STATES) {
      const images = decodeIco(read(`resources/tray/tray-${state}.ico`));
      expect(images.map((i) => i.size)).toEqual(TRAY_SIZES.windows);
      expect(images.every((i) => !i.png)).toBe(true);
    }
  });

  it('macOS tray icons are template images: black and alpha only, @2x twice the size', () => {
    for (const state of TRAY_STATES) {
      const one = decodePng(read(`resources/tray/tray-${state}Template.png`));
      const two = decodePng(read(`resources/tray/tray-${state}Template@2x.png`));
      expect([one.width, two.width]).toEqual([TRAY_SIZES.mac, TRAY_SIZES.mac * 2]);
      for (const png of [one, two]) {
        let opaque = 0;
        let coloured = 0;
        for (let i = 0; i < png.rgba.length; i += 4) {
          if (png.rgba[i] !== 0 || png.rgba[i + 1] !== 0 || png.rgba[i + 2] !== 0) coloured++;
          if (png.rgba[i + 3]! > 0) opaque++;
        }
        expect(coloured, `${state}: pixels that are not black in a template`).toBe(0);
        expect(opaque, `${state}: something is drawn`).toBeGreaterThan(20);
      }
    }
  });

  it('idle is an outline, pacing is filled (Linux 32 px: the body centre at 16,16 is empty or drawn)', () => {
    const idle = decodePng(read('resources/tray/tray-idle.png'));
    const pacing = decodePng(read('resources/tray/tray-pacing.png'));
    expect(alphaAt(idle, 16, 16)).toBe(0);
    expect(alphaAt(pacing, 16, 16)).toBe(255);
    expect(rgbAt(pacing, 16, 16)).toEqual(COLORS['glyph']);
    // Both have the chip's edge.
    expect(alphaAt(idle, 16, 8)).toBe(255);
    expect(alphaAt(pacing, 16, 8)).toBe(255);
  });

  it('pressure badges: yellow, orange, red where colour shows; a ring, a disc and a triangle on templates', () => {
    // Linux icons, 32 px (2 px per glyph unit): the badge is centred at (24, 24).
    const badge = (state: string) => decodePng(read(`resources/tray/tray-${state}.png`));
    expect(rgbAt(badge('pressure-elevated'), 24 + 5, 24)).toEqual(COLORS['pressure-elevated']); // on the ring
    expect(alphaAt(badge('pressure-elevated'), 24, 24)).toBe(0); // its hole
    expect(rgbAt(badge('pressure-high'), 24, 24)).toEqual(COLORS['pressure-high']);
    expect(rgbAt(badge('pressure-critical'), 24, 26)).toEqual(COLORS['pressure-critical']);
    // The gap between glyph and badge is cleared.
    expect(alphaAt(badge('pressure-high'), 18, 18)).toBe(0);

    // Templates (@2x, 32 px): the badge areas differ pairwise in shape, and from pacing.
    const mask = (state: string) => {
      const png = decodePng(read(`resources/tray/tray-${state}Template@2x.png`));
      const bits: number[] = [];
      for (let y = 16; y < 32; y++) for (let x = 16; x < 32; x++) bits.push(alphaAt(png, x, y) >= 128 ? 1 : 0);
      return bits;
    };
    const states = ['pacing', 'pressure-elevated', 'pressure-high', 'pressure-critical'];
    const masks = states.map(mask);
    for (let a = 0; a < states.length; a++) {
      for (let b = a + 1; b < states.length; b++) {
        const differing = masks[a]!.filter((bit, i) => bit !== masks[b]![i]).length;
        expect(differing, `${states[a]} vs ${states[b]}: badge pixels that differ`).toBeGreaterThanOrEqual(20);
      }
    }
  });
});
