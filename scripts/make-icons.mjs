#!/usr/bin/env node
// Draws every icon of GPU Share from one glyph and writes them under resources/:
//
//   resources/icons/icon.png, icon.ico, icon.icns          the app icon
//   resources/tray/tray-<state>.png                         Linux tray, coloured
//   resources/tray/tray-<state>.ico                         Windows tray, coloured
//   resources/tray/tray-<state>Template.png, …@2x.png       macOS tray: template images (black + alpha)
//
// for the states idle (outline glyph), pacing (filled glyph) and pressure-elevated / -high /
// -critical (filled glyph with a badge: a ring, a disc and a triangle, yellow / orange / red where
// colour is allowed; the shape alone tells them apart in a monochrome template).
//
// Plain Node, nothing downloaded: edge pixels are sampled 8x8 (4x4 for large sizes), PNG
// is encoded here (filters, a fixed-Huffman deflate, CRC and Adler checksums) and so are the ICO
// and ICNS containers. Only arithmetic and Math.round/sqrt are used, so the output is the same
// bytes on every machine; test/unit/icons.test.ts regenerates everything and compares.
//
//   node scripts/make-icons.mjs          write the files
//   node scripts/make-icons.mjs --check  compare with the files on disk, exit 1 on a difference
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TRAY_STATES = ['idle', 'pacing', 'pressure-elevated', 'pressure-high', 'pressure-critical'];

// ---- the glyph: a chip whose body is cut into three time windows, on a 16-unit grid ----------

const rgb = (hex) => [parseInt(hex.slice(1, 3), 16), parseInt(hex.slice(3, 5), 16), parseInt(hex.slice(5, 7), 16)];

export const COLORS = {
  glyph: rgb('#1fb5a6'),
  'pressure-elevated': rgb('#f2c200'),
  'pressure-high': rgb('#ff8a00'),
  'pressure-critical': rgb('#e5243b'),
  appTop: rgb('#253349'),
  appBottom: rgb('#0c1322'),
  appGlyph: rgb('#2dd4bf'),
};

// A shape answers two questions: is a point inside (`at`), and is a whole box inside (IN), outside
// (OUT) or crossed by the shape's edge (EDGE) (`box`, exact or on the safe side: EDGE when unsure).
// Pixels whose box is decided need one colour; only pixels on an edge are sampled.
const IN = 1;
const OUT = 0;
const EDGE = 2;

/** Rectangle with rounded corners: the points within r of the inner rectangle. Convex. */
function roundRect(x0, y0, x1, y1, r) {
  const [ix0, iy0, ix1, iy1] = [x0 + r, y0 + r, x1 - r, y1 - r];
  const at = (x, y) => {
    const dx = x < ix0 ? ix0 - x : x > ix1 ? x - ix1 : 0;
    const dy = y < iy0 ? iy0 - y : y > iy1 ? y - iy1 : 0;
    return dx * dx + dy * dy <= r * r;
  };
  return {
    at,
    box(bx0, by0, bx1, by1) {
      const dx = Math.max(0, bx0 - ix1, ix0 - bx1);
      const dy = Math.max(0, by0 - iy1, iy0 - by1);
      if (dx * dx + dy * dy > r * r) return OUT;
      return at(bx0, by0) && at(bx1, by0) && at(bx0, by1) && at(bx1, by1) ? IN : EDGE;
    },
  };
}
const rect = (x0, y0, x1, y1) => roundRect(x0, y0, x1, y1, 0);
const disc = (cx, cy, r) => roundRect(cx - r, cy - r, cx + r, cy + r, r);
/** Triangle (any winding). Convex: a box is inside when its corners are, outside when its
 *  corners are all beyond one edge. */
function triangle(a, b, c) {
  const edges = [[a, b], [b, c], [c, a]];
  const side = ([p, q], x, y) => (q[0] - p[0]) * (y - p[1]) - (q[1] - p[1]) * (x - p[0]);
  const orientation = Math.sign(side([a, b], c[0], c[1]));
  const at = (x, y) => edges.every((e) => side(e, x, y) * orientation >= 0);
  return {
    at,
    box(bx0, by0, bx1, by1) {
      const corners = [[bx0, by0], [bx1, by0], [bx0, by1], [bx1, by1]];
      if (corners.every(([x, y]) => at(x, y))) return IN;
      if (edges.some((e) => corners.every(([x, y]) => side(e, x, y) * orientation < 0))) return OUT;
      return EDGE;
    },
  };
}
function union(...shapes) {
  return {
    at: (x, y) => shapes.some((s) => s.at(x, y)),
    box(x0, y0, x1, y1) {
      let edge = false;
      for (const s of shapes) {
        const v = s.box(x0, y0, x1, y1);
        if (v === IN) return IN;
        if (v === EDGE) edge = true;
      }
      return edge ? EDGE : OUT;
    },
  };
}
function minus(a, b) {
  return {
    at: (x, y) => a.at(x, y) && !b.at(x, y),
    box(x0, y0, x1, y1) {
      const va = a.box(x0, y0, x1, y1);
      if (va === OUT) return OUT;
      const vb = b.box(x0, y0, x1, y1);
      if (vb === IN) return OUT;
      return va === IN && vb === OUT ? IN : EDGE;
    },
  };
}
/** A shape scaled by `scale` and moved so that point (gx, gy) of it lands on (x, y). */
function placed(shape, scale, x, y, gx, gy) {
  const u = (v, o, g) => (v - o) / scale + g;
  return {
    at: (px, py) => shape.at(u(px, x, gx), u(py, y, gy)),
    box: (x0, y0, x1, y1) => shape.box(u(x0, x, gx), u(y0, y, gy), u(x1, x, gx), u(y1, y, gy)),
  };
}
const ring = (cx, cy, r0, r1) => minus(disc(cx, cy, r0), disc(cx, cy, r1));

// Body 4..12 with two pins per side (at 5..6 and 10..11, 2 units long).
const pins = union(
  rect(5, 2, 6, 4), rect(10, 2, 11, 4), rect(5, 12, 6, 14), rect(10, 12, 11, 14),
  rect(2, 5, 4, 6), rect(2, 10, 4, 11), rect(12, 5, 14, 6), rect(12, 10, 14, 11),
);
const body = roundRect(4, 4, 12, 12, 2);
/** Idle: the body's outline and the pins. */
const outlineGlyph = union(minus(body, roundRect(5, 5, 11, 11, 1)), pins);
/** Pacing: the body filled, cut by two slits into three windows (the time-division windows). */
const filledGlyph = union(minus(body, union(rect(6, 5.5, 7, 10.5), rect(9, 5.5, 10, 10.5))), pins);

/** The pressure badge, bottom right, and the gap cleared around it. */
const BADGE_GAP = disc(12, 12, 4.6);
const BADGES = {
  'pressure-elevated': ring(12, 12, 3.5, 2),
  'pressure-high': disc(12, 12, 3.5),
  'pressure-critical': triangle([12, 8.2], [15.8, 15.2], [8.2, 15.2]),
};

/**
 * The layers of a tray icon in glyph units (16 x 16): each covers its shape with a colour, or clears
 * it; later layers win. `template` draws everything black (macOS template images).
 */
export function trayLayers(state, template) {
  const ink = (color) => (template ? [0, 0, 0] : color);
  if (state === 'idle') return [{ shape: outlineGlyph, color: ink(COLORS.glyph) }];
  if (state === 'pacing') return [{ shape: filledGlyph, color: ink(COLORS.glyph) }];
  const badge = BADGES[state];
  if (badge === undefined) throw new Error(`unknown tray state ${state}`);
  return [
    { shape: filledGlyph, color: ink(COLORS.glyph) },
    { shape: BADGE_GAP, clear: true },
    { shape: badge, color: ink(COLORS[state]) },
  ];
}

/** The app icon's layers on a 1024-unit canvas: a rounded square (macOS grid: 824 of 1024) with
 *  a vertical gradient, and the filled glyph (its 2..14 box scaled to 200..824 - 176). */
export function appLayers() {
  const [t, b] = [COLORS.appTop, COLORS.appBottom];
  const gradient = (_x, y) => {
    const k = Math.min(1, Math.max(0, (y - 100) / 824));
    return [Math.round(t[0] + (b[0] - t[0]) * k), Math.round(t[1] + (b[1] - t[1]) * k), Math.round(t[2] + (b[2] - t[2]) * k)];
  };
  return [
    { shape: roundRect(100, 100, 924, 924, 185), color: gradient },
    { shape: placed(filledGlyph, 46, 512, 512, 8, 8), color: COLORS.appGlyph },
  ];
}

/** The index of the layer that colours point (x, y), or -1 when none does (or a clear wins). */
function winnerAt(layers, x, y) {
  let w = -1;
  for (let i = 0; i < layers.length; i++) if (layers[i].shape.at(x, y)) w = layers[i].clear ? -1 : i;
  return w;
}

/** The same for a whole box, or -2 when an edge crosses it. */
function winnerOfBox(layers, x0, y0, x1, y1) {
  let w = -1;
  for (let i = 0; i < layers.length; i++) {
    const v = layers[i].shape.box(x0, y0, x1, y1);
    if (v === EDGE) return -2;
    if (v === IN) w = layers[i].clear ? -1 : i;
  }
  return w;
}

/**
 * Rasterises layers on a `size` x `size` RGBA canvas; `units` is the layers' canvas size (16 for
 * the tray glyph, 1024 for the app icon). A pixel that lies wholly inside one layer (or none) takes
 * that layer's colour at its centre; a pixel crossed by an edge is the average of S x S samples.
 */
export function rasterize(layers, size, units) {
  const S = size >= 256 ? 4 : 8;
  const n = S * S;
  const out = new Uint8Array(size * size * 4);
  const k = units / size;
  for (let py = 0; py < size; py++) {
    for (let px = 0; px < size; px++) {
      const whole = winnerOfBox(layers, px * k, py * k, (px + 1) * k, (py + 1) * k);
      if (whole === -1) continue;
      const o = (py * size + px) * 4;
      if (whole >= 0) {
        const color = layers[whole].color;
        out.set(typeof color === 'function' ? color((px + 0.5) * k, (py + 0.5) * k) : color, o);
        out[o + 3] = 255;
        continue;
      }
      let count = 0;
      let r = 0;
      let g = 0;
      let bl = 0;
      for (let sy = 0; sy < S; sy++) {
        const y = (py + (sy + 0.5) / S) * k;
        for (let sx = 0; sx < S; sx++) {
          const x = (px + (sx + 0.5) / S) * k;
          const w = winnerAt(layers, x, y);
          if (w < 0) continue;
          const color = typeof layers[w].color === 'function' ? layers[w].color(x, y) : layers[w].color;
          count++;
          r += color[0];
          g += color[1];
          bl += color[2];
        }
      }
      if (count > 0) {
        out[o] = Math.round(r / count);
        out[o + 1] = Math.round(g / count);
        out[o + 2] = Math.round(bl / count);
        out[o + 3] = Math.round((count * 255) / n);
      }
    }
  }
  return out;
}

// ---- PNG: filters, a fixed-Huffman deflate (LZ77 with hash chains), zlib and CRC -------------

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function adler32(bytes) {
  let a = 1;
  let b = 0;
  for (let i = 0; i < bytes.length; i++) {
    a = (a + bytes[i]) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

class BitWriter {
  constructor(capacity) {
    this.buf = new Uint8Array(capacity);
    this.pos = 0;
    this.bit = 0;
    this.acc = 0;
  }
  /** `count` bits of `value`, least significant first. */
  bits(value, count) {
    for (let i = 0; i < count; i++) {
      this.acc |= ((value >>> i) & 1) << this.bit;
      if (++this.bit === 8) this.flushByte();
    }
  }
  /** A Huffman code: most significant bit first. */
  code(value, length) {
    for (let i = length - 1; i >= 0; i--) {
      this.acc |= ((value >>> i) & 1) << this.bit;
      if (++this.bit === 8) this.flushByte();
    }
  }
  flushByte() {
    if (this.pos === this.buf.length) {
      const bigger = new Uint8Array(this.buf.length * 2);
      bigger.set(this.buf);
      this.buf = bigger;
    }
    this.buf[this.pos++] = this.acc;
    this.acc = 0;
    this.bit = 0;
  }
  finish() {
    if (this.bit > 0) this.flushByte();
    return this.buf.subarray(0, this.pos);
  }
}

const LENGTH_BASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LENGTH_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577];
const DIST_EXTRA = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

function writeLiteralOrLength(w, sym) {
  if (sym < 144) w.code(0x30 + sym, 8);
  else if (sym < 256) w.code(0x190 + sym - 144, 9);
  else if (sym < 280) w.code(sym - 256, 7);
  else w.code(0xc0 + sym - 280, 8);
}

function writeMatch(w, length, distance) {
  let li = LENGTH_BASE.length - 1;
  while (LENGTH_BASE[li] > length) li--;
  writeLiteralOrLength(w, 257 + li);
  w.bits(length - LENGTH_BASE[li], LENGTH_EXTRA[li]);
  let di = DIST_BASE.length - 1;
  while (DIST_BASE[di] > distance) di--;
  w.code(di, 5);
  w.bits(distance - DIST_BASE[di], DIST_EXTRA[di]);
}

/** A zlib stream (RFC 1950) of one fixed-Huffman deflate block (RFC 1951), greedy LZ77 matching. */
export function zlibDeflate(data) {
  const WINDOW = 32768;
  const HASH_BITS = 15;
  const MAX_CHAIN = 48;
  const head = new Int32Array(1 << HASH_BITS).fill(-1);
  const prev = new Int32Array(WINDOW).fill(-1);
  const hashAt = (i) => (((data[i] << 10) ^ (data[i + 1] << 5) ^ data[i + 2]) & ((1 << HASH_BITS) - 1));
  const insert = (i) => {
    if (i + 2 >= data.length) return;
    const h = hashAt(i);
    prev[i & (WINDOW - 1)] = head[h];
    head[h] = i;
  };
  const w = new BitWriter(Math.max(1024, data.length >>> 2));
  w.bits(0x78, 8);
  w.bits(0x01, 8);
  w.bits(1, 1); // last block
  w.bits(1, 2); // fixed Huffman codes
  let i = 0;
  while (i < data.length) {
    let bestLength = 0;
    let bestDistance = 0;
    if (i + 2 < data.length) {
      let candidate = head[hashAt(i)];
      let chain = MAX_CHAIN;
      const limit = Math.min(258, data.length - i);
      while (candidate >= 0 && i - candidate <= WINDOW && chain-- > 0) {
        let length = 0;
        while (length < limit && data[candidate + length] === data[i + length]) length++;
        if (length > bestLength) {
          bestLength = length;
          bestDistance = i - candidate;
          if (length === limit) break;
        }
        const next = prev[candidate & (WINDOW - 1)];
        if (next >= candidate) break;
        candidate = next;
      }
    }
    if (bestLength >= 3) {
      writeMatch(w, bestLength, bestDistance);
      for (let k = 0; k < bestLength; k++) insert(i + k);
      i += bestLength;
    } else {
      writeLiteralOrLength(w, data[i]);
      insert(i);
      i++;
    }
  }
  writeLiteralOrLength(w, 256);
  const body = w.finish();
  const out = new Uint8Array(body.length + 4);
  out.set(body);
  new DataView(out.buffer).setUint32(body.length, adler32(data));
  return out;
}

function pngChunk(type, data) {
  const chunk = Buffer.alloc(12 + data.length);
  chunk.writeUInt32BE(data.length, 0);
  chunk.write(type, 4, 'latin1');
  Buffer.from(data.buffer, data.byteOffset, data.byteLength).copy(chunk, 8);
  chunk.writeUInt32BE(crc32(chunk.subarray(4, 8 + data.length)), 8 + data.length);
  return chunk;
}

/** PNG of an RGBA canvas; each row gets the filter (none, sub, up, average, Paeth) with the
 *  smallest sum of absolute differences. */
export function encodePng(rgba, width, height) {
  const stride = width * 4;
  const raw = new Uint8Array((stride + 1) * height);
  const candidate = new Uint8Array(stride);
  for (let y = 0; y < height; y++) {
    const row = rgba.subarray(y * stride, (y + 1) * stride);
    const up = y > 0 ? rgba.subarray((y - 1) * stride, y * stride) : null;
    let bestScore = Infinity;
    for (let filter = 0; filter < 5; filter++) {
      let score = 0;
      for (let x = 0; x < stride; x++) {
        const a = x >= 4 ? row[x - 4] : 0;
        const b = up ? up[x] : 0;
        const c = up && x >= 4 ? up[x - 4] : 0;
        let predictor = 0;
        if (filter === 1) predictor = a;
        else if (filter === 2) predictor = b;
        else if (filter === 3) predictor = (a + b) >>> 1;
        else if (filter === 4) {
          const p = a + b - c;
          const pa = Math.abs(p - a);
          const pb = Math.abs(p - b);
          const pc = Math.abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
        }
        const v = (row[x] - predictor) & 0xff;
        candidate[x] = v;
        score += v < 128 ? v : 256 - v;
      }
      if (score < bestScore) {
        bestScore = score;
        raw[y * (stride + 1)] = filter;
        raw.set(candidate, y * (stride + 1) + 1);
      }
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 6; // RGBA
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', zlibDeflate(raw)),
    pngChunk('IEND', new Uint8Array(0)),
  ]);
}

// ---- ICO and ICNS --------------------------------------------------------------------------

/** A 32-bit BMP image as an ICO entry holds it: BITMAPINFOHEADER, BGRA rows bottom-up, AND mask. */
function icoBitmap(rgba, size) {
  const maskStride = Math.ceil(size / 32) * 4;
  const out = Buffer.alloc(40 + size * size * 4 + maskStride * size);
  out.writeUInt32LE(40, 0);
  out.writeInt32LE(size, 4);
  out.writeInt32LE(size * 2, 8); // XOR bitmap + AND mask
  out.writeUInt16LE(1, 12);
  out.writeUInt16LE(32, 14);
  out.writeUInt32LE(size * size * 4 + maskStride * size, 20);
  let o = 40;
  for (let y = size - 1; y >= 0; y--) {
    for (let x = 0; x < size; x++) {
      const i = (y * size + x) * 4;
      out[o++] = rgba[i + 2];
      out[o++] = rgba[i + 1];
      out[o++] = rgba[i];
      out[o++] = rgba[i + 3];
    }
  }
  for (let y = size - 1; y >= 0; y--) {
    for (let x = 0; x < size; x++) {
      if (rgba[(y * size + x) * 4 + 3] === 0) out[o + (x >>> 3)] |= 0x80 >>> (x & 7);
    }
    o += maskStride;
  }
  return out;
}

/** An ICO file: `images` are { size, rgba }; 256 px is stored as PNG, smaller sizes as BMP. */
export function encodeIco(images) {
  const header = Buffer.alloc(6 + images.length * 16);
  header.writeUInt16LE(0, 0);
  header.writeUInt16LE(1, 2);
  header.writeUInt16LE(images.length, 4);
  const blobs = images.map(({ size, rgba }) => (size >= 256 ? encodePng(rgba, size, size) : icoBitmap(rgba, size)));
  let offset = header.length;
  images.forEach(({ size }, i) => {
    const e = 6 + i * 16;
    header[e] = size >= 256 ? 0 : size;
    header[e + 1] = size >= 256 ? 0 : size;
    header.writeUInt16LE(1, e + 4);
    header.writeUInt16LE(32, e + 6);
    header.writeUInt32LE(blobs[i].length, e + 8);
    header.writeUInt32LE(offset, e + 12);
    offset += blobs[i].length;
  });
  return Buffer.concat([header, ...blobs]);
}

/** ICNS chunk types holding PNG data, and the pixel size of each. */
export const ICNS_TYPES = {
  icp4: 16, icp5: 32, ic11: 32, ic12: 64, ic07: 128, ic13: 256, ic08: 256, ic14: 512, ic09: 512, ic10: 1024,
};

/** An ICNS file from PNGs by pixel size. */
export function encodeIcns(pngBySize) {
  const chunks = Object.entries(ICNS_TYPES).map(([type, size]) => {
    const png = pngBySize.get(size);
    const chunk = Buffer.alloc(8 + png.length);
    chunk.write(type, 0, 'latin1');
    chunk.writeUInt32BE(chunk.length, 4);
    png.copy(chunk, 8);
    return chunk;
  });
  const header = Buffer.alloc(8);
  header.write('icns', 0, 'latin1');
  header.writeUInt32BE(8 + chunks.reduce((s, c) => s + c.length, 0), 4);
  return Buffer.concat([header, ...chunks]);
}

// ---- everything ------------------------------------------------------------------------------

export const TRAY_SIZES = { linux: 32, windows: [16, 20, 24, 32, 40, 48], mac: 16 };
export const APP_ICO_SIZES = [16, 24, 32, 48, 64, 128, 256];

/** Every generated file: path relative to the repository → bytes. */
export function renderAll() {
  const files = new Map();
  for (const state of TRAY_STATES) {
    const colour = trayLayers(state, false);
    files.set(`resources/tray/tray-${state}.png`, encodePng(rasterize(colour, TRAY_SIZES.linux, 16), TRAY_SIZES.linux, TRAY_SIZES.linux));
    files.set(`resources/tray/tray-${state}.ico`, encodeIco(TRAY_SIZES.windows.map((size) => ({ size, rgba: rasterize(colour, size, 16) }))));
    const template = trayLayers(state, true);
    const m = TRAY_SIZES.mac;
    files.set(`resources/tray/tray-${state}Template.png`, encodePng(rasterize(template, m, 16), m, m));
    files.set(`resources/tray/tray-${state}Template@2x.png`, encodePng(rasterize(template, m * 2, 16), m * 2, m * 2));
  }
  const app = appLayers();
  const rgbaBySize = new Map();
  const canvas = (size) => {
    if (!rgbaBySize.has(size)) rgbaBySize.set(size, rasterize(app, size, 1024));
    return rgbaBySize.get(size);
  };
  const pngBySize = new Map();
  for (const size of new Set([...Object.values(ICNS_TYPES), 1024])) pngBySize.set(size, encodePng(canvas(size), size, size));
  files.set('resources/icons/icon.png', pngBySize.get(1024));
  files.set('resources/icons/icon.icns', encodeIcns(pngBySize));
  files.set('resources/icons/icon.ico', encodeIco(APP_ICO_SIZES.map((size) => ({ size, rgba: canvas(size) }))));
  return files;
}

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function main(argv) {
  const files = renderAll();
  if (argv.includes('--check')) {
    const stale = [...files].filter(([path, bytes]) => !existsSync(join(root, path)) || !readFileSync(join(root, path)).equals(bytes));
    for (const [path] of stale) console.error(`make-icons: ${path} differs from what the script draws`);
    if (stale.length > 0) process.exit(1);
    console.log(`make-icons: ${files.size} files up to date`);
    return;
  }
  for (const [path, bytes] of files) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), bytes);
  }
  console.log(`make-icons: wrote ${files.size} files`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
