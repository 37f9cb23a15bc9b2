/**
 * Models on this machine: the GGUF files other tools already keep, where they keep them, with the
 * names those tools give them. Ollama's store (its manifests name each model's blob), LM Studio's
 * models folder, the Hugging Face hub cache (snapshots whose files link into blobs/), llama.cpp's
 * download cache, ~/models, and the folders the user added.
 *
 * The walk is bounded (depth per place, entries visited, files listed) and reads no file but
 * Ollama's small manifests: only names and stat. A link to a model is followed only to a regular
 * file (stat, never open); links to folders are not walked (no loops, no way out of a place but
 * the files it names). Same file twice (two HF revisions, one Ollama blob under two names with
 * one name each kept) is listed once per name.
 */
import { constants as fsConstants, type Dirent, type Stats } from 'node:fs';
import { open, opendir, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { posix, win32 } from 'node:path';

export const MODEL_SOURCES = ['ollama', 'lm-studio', 'hugging-face', 'llama.cpp', 'models', 'added'] as const;
export type ModelSource = (typeof MODEL_SOURCES)[number];

export interface ModelPlace {
  dir: string;
  source: ModelSource;
  /** How deep the walk goes below `dir`. */
  maxDepth: number;
}

/** Where each tool keeps its models on this OS (the environment variables they honour first). */
export function modelPlaces(platform: NodeJS.Platform, env: NodeJS.ProcessEnv, home: string, added: readonly string[] = []): ModelPlace[] {
  const p = platform === 'win32' ? win32 : posix;
  const cache = platform === 'win32' ? p.join(home, '.cache') : (env['XDG_CACHE_HOME'] ?? p.join(home, '.cache'));
  const places: ModelPlace[] = [];
  const add = (dir: string, source: ModelSource, maxDepth: number): void => {
    if (!places.some((place) => place.dir === dir)) places.push({ dir, source, maxDepth });
  };
  add(env['OLLAMA_MODELS'] ?? p.join(home, '.ollama', 'models'), 'ollama', 4);
  if (platform === 'linux' && env['OLLAMA_MODELS'] === undefined) add('/usr/share/ollama/.ollama/models', 'ollama', 4);
  add(p.join(home, '.lmstudio', 'models'), 'lm-studio', 4);
  add(p.join(home, '.cache', 'lm-studio', 'models'), 'lm-studio', 4);
  const hfHome = env['HF_HOME'] ?? p.join(cache, 'huggingface');
  add(env['HF_HUB_CACHE'] ?? env['HUGGINGFACE_HUB_CACHE'] ?? p.join(hfHome, 'hub'), 'hugging-face', 8);
  const llamaCache = env['LLAMA_CACHE'] ?? (platform === 'darwin' ? p.join(home, 'Library', 'Caches', 'llama.cpp') : platform === 'win32' ? p.join(env['LOCALAPPDATA'] ?? p.join(home, 'AppData', 'Local'), 'llama.cpp') : p.join(cache, 'llama.cpp'));
  add(llamaCache, 'llama.cpp', 6);
  add(p.join(home, 'models'), 'models', 6);
  for (const dir of added) add(dir, 'added', 6);
  return places;
}

export interface ScanLimits {
  /** Directory entries looked at in all (the walk stops there and says so). */
  maxEntries: number;
  /** Model files listed in all. */
  maxFiles: number;
}

export const DEFAULT_SCAN_LIMITS: ScanLimits = { maxEntries: 50_000, maxFiles: 2_000 };
/** An Ollama manifest is a few hundred bytes of JSON. */
const MANIFEST_MAX_BYTES = 64 * 1024;
const OLLAMA_MODEL_LAYER = 'application/vnd.ollama.image.model';
const DIGEST_RE = /^sha256[:-]([0-9a-f]{64})$/;
/** The parts of a split model after the first (llama.cpp loads them through the first). */
const LATER_SPLIT_RE = /-(\d{5})-of-\d{5}\.gguf$/i;

export interface FoundModel {
  /** The name its tool gives it: Ollama's `llama3.2:3b`, `org/repo/file` for Hugging Face and
   *  LM Studio, the path below the folder otherwise (without `.gguf`). */
  name: string;
  source: ModelSource;
  path: string;
  sizeBytes: number;
  mtimeMs: number;
}

export interface PlaceReport {
  dir: string;
  source: ModelSource;
  /** Whether it exists as a folder (a missing one is normal: that tool is not installed). */
  found: boolean;
  models: number;
  /** Why it could not be read, when it exists but could not. */
  problem: string | null;
}

export interface ModelScan {
  models: FoundModel[];
  places: PlaceReport[];
  /** The walk stopped at a limit: some files may be missing from the list. */
  truncated: boolean;
  entriesVisited: number;
}

interface Walk {
  limits: ScanLimits;
  entries: number;
  truncated: boolean;
  /** dev:ino of files listed, per name, so one file under one name is listed once. */
  seen: Set<string>;
  models: FoundModel[];
}

/** Lists the model files in the places, in their order. Never throws for what it finds. */
export async function scanModels(places: readonly ModelPlace[], limits: ScanLimits = DEFAULT_SCAN_LIMITS): Promise<ModelScan> {
  const walk: Walk = { limits, entries: 0, truncated: false, seen: new Set(), models: [] };
  const reports: PlaceReport[] = [];
  for (const place of places) {
    const before = walk.models.length;
    let root: Stats;
    try {
      root = await stat(place.dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      reports.push({ dir: place.dir, source: place.source, found: false, models: 0, problem: code === 'ENOENT' || code === 'ENOTDIR' ? null : `cannot be read (${code ?? 'error'})` });
      continue;
    }
    if (!root.isDirectory()) {
      reports.push({ dir: place.dir, source: place.source, found: false, models: 0, problem: 'not a folder' });
      continue;
    }
    let problem: string | null = null;
    try {
      if (place.source === 'ollama') await walkOllama(place.dir, walk);
      else await walkFolder(place, place.dir, [], 0, walk);
    } catch (error) {
      problem = `cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`;
    }
    reports.push({ dir: place.dir, source: place.source, found: true, models: walk.models.length - before, problem });
  }
  return { models: walk.models, places: reports, truncated: walk.truncated, entriesVisited: walk.entries };
}

/** Reads a directory's entries within the walk's budget (null once it is spent). */
async function entriesOf(dir: string, walk: Walk): Promise<Dirent[] | null> {
  if (walk.truncated) return null;
  const found: Dirent[] = [];
  const handle = await opendir(dir);
  try {
    for await (const entry of handle) {
      if (++walk.entries > walk.limits.maxEntries) {
        walk.truncated = true;
        break;
      }
      found.push(entry);
    }
  } finally {
    // for-await closes it when it runs to the end; a break leaves it to us.
    await handle.close().catch(() => undefined);
  }
  return found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function walkFolder(place: ModelPlace, dir: string, below: string[], depth: number, walk: Walk): Promise<void> {
  const entries = await entriesOf(dir, walk).catch((error: unknown) => {
    // A subfolder we may not read is skipped; the place itself reports its problem.
    if (depth === 0) throw error;
    return null;
  });
  if (entries === null) return;
  const p = pathModule(dir);
  for (const entry of entries) {
    if (walk.truncated || walk.models.length >= walk.limits.maxFiles) {
      walk.truncated = true;
      return;
    }
    const path = p.join(dir, entry.name);
    if (entry.isDirectory()) {
      // Hidden folders are tools' bookkeeping (.locks, .no_exist, .git).
      if (depth + 1 < place.maxDepth && !entry.name.startsWith('.')) await walkFolder(place, path, [...below, entry.name], depth + 1, walk);
      continue;
    }
    if (!entry.isFile() && !entry.isSymbolicLink()) continue; // FIFOs, sockets, devices: never opened
    if (!isModelFileName(entry.name)) continue;
    let facts: Stats;
    try {
      facts = await stat(path); // a link: its target, which must be a regular file
    } catch {
      continue;
    }
    if (!facts.isFile()) continue;
    const name = modelName([...below, entry.name]);
    const identity = `${facts.dev}:${facts.ino}`;
    if (walk.seen.has(identity)) continue;
    walk.seen.add(identity);
    walk.models.push({ name, source: place.source, path, sizeBytes: facts.size, mtimeMs: facts.mtimeMs });
  }
}

/** A path that names a model file: `*.gguf`, or a blob of Ollama's store (`blobs/sha256-<hex>`),
 *  which has no extension. */
export function namesModelFile(path: string): boolean {
  const parts = path.split(/[\\/]/);
  const base = parts.at(-1) ?? '';
  return base.toLowerCase().endsWith('.gguf') || (parts.at(-2) === 'blobs' && DIGEST_RE.test(base));
}

/** A GGUF model's file name: `.gguf`, not a multimodal projector, not a later part of a split. */
export function isModelFileName(name: string): boolean {
  const lower = name.toLowerCase();
  if (!lower.endsWith('.gguf') || lower.startsWith('mmproj')) return false;
  const split = LATER_SPLIT_RE.exec(lower);
  return split === null || Number(split[1]) === 1;
}

/** The name a tool gives a file at `parts` below its folder (the same rule for every folder: the
 *  hub's layout, wherever it is, gets its repository's name). */
export function modelName(parts: readonly string[]): string {
  const stem = (file: string): string => file.replace(/\.gguf$/i, '');
  // The Hugging Face hub's layout, in its cache or in llama.cpp's: models--ORG--REPO/snapshots/REV/...
  const repo = /^models--([^/]+?)--(.+)$/.exec(parts[0] ?? '');
  if (repo !== null && parts[1] === 'snapshots' && parts.length >= 4) return `${repo[1]}/${repo[2]}/${stem(parts.slice(3).join('/'))}`;
  return stem(parts.join('/'));
}

/** Ollama's store: manifests/<host>/<namespace>/<model>/<tag> name the model layer's blob. */
async function walkOllama(root: string, walk: Walk): Promise<void> {
  const p = pathModule(root);
  const manifests = p.join(root, 'manifests');
  const level = async (dir: string): Promise<Dirent[]> => (await entriesOf(dir, walk).catch(() => null)) ?? [];
  for (const host of await level(manifests)) {
    if (!host.isDirectory()) continue;
    for (const namespace of await level(p.join(manifests, host.name))) {
      if (!namespace.isDirectory()) continue;
      for (const model of await level(p.join(manifests, host.name, namespace.name))) {
        if (!model.isDirectory()) continue;
        for (const tag of await level(p.join(manifests, host.name, namespace.name, model.name))) {
          if (walk.models.length >= walk.limits.maxFiles) {
            walk.truncated = true;
            return;
          }
          if (!tag.isFile()) continue; // never a link, never a FIFO
          const digest = await modelLayerDigest(p.join(manifests, host.name, namespace.name, model.name, tag.name));
          if (digest === null) continue;
          const blob = await blobFile(p, root, digest);
          if (blob === null) continue;
          walk.models.push({ name: ollamaName(host.name, namespace.name, model.name, tag.name), source: 'ollama', ...blob });
        }
      }
    }
  }
}

/** Ollama's own name for a manifest: `llama3.2:3b`, `user/model:tag`, `hf.co/org/repo:tag`. */
export function ollamaName(host: string, namespace: string, model: string, tag: string): string {
  if (host === 'registry.ollama.ai') return namespace === 'library' ? `${model}:${tag}` : `${namespace}/${model}:${tag}`;
  return `${host}/${namespace}/${model}:${tag}`;
}

/** The model layer's sha256 (64 hex digits) from a manifest, or null (not a manifest we read). */
async function modelLayerDigest(file: string): Promise<string | null> {
  const text = await readSmallFile(file, MANIFEST_MAX_BYTES);
  if (text === null) return null;
  let manifest: unknown;
  try {
    manifest = JSON.parse(text);
  } catch {
    return null;
  }
  const layers = (manifest as { layers?: unknown }).layers;
  if (!Array.isArray(layers)) return null;
  for (const layer of layers as unknown[]) {
    if (typeof layer !== 'object' || layer === null) continue;
    const { mediaType, digest } = layer as { mediaType?: unknown; digest?: unknown };
    if (mediaType !== OLLAMA_MODEL_LAYER || typeof digest !== 'string') continue;
    // Only a digest's own characters reach a path: nothing else in the manifest is trusted.
    const match = DIGEST_RE.exec(digest);
    return match === null ? null : (match[1] ?? null);
  }
  return null;
}

/** The blob file of a digest (`sha256-<hex>`, or `sha256:<hex>` from older versions), a regular
 *  file, or null. */
async function blobFile(p: typeof posix, root: string, hex: string): Promise<Omit<FoundModel, 'name' | 'source'> | null> {
  for (const name of [`sha256-${hex}`, `sha256:${hex}`]) {
    const path = p.join(root, 'blobs', name);
    try {
      const facts = await stat(path);
      if (facts.isFile()) return { path, sizeBytes: facts.size, mtimeMs: facts.mtimeMs };
    } catch {
      // the other spelling, or none
    }
  }
  return null;
}

/** A small regular file's text: opened without following a link or waiting (a FIFO is refused
 *  by fstat), at most `max` bytes; null otherwise. */
async function readSmallFile(file: string, max: number): Promise<string | null> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, fsConstants.O_RDONLY | (fsConstants.O_NOFOLLOW ?? 0) | (fsConstants.O_NONBLOCK ?? 0));
  } catch {
    return null;
  }
  try {
    const facts = await handle.stat();
    if (!facts.isFile() || facts.size > max) return null;
    const buffer = Buffer.alloc(facts.size);
    const { bytesRead } = await handle.read(buffer, 0, facts.size, 0);
    return buffer.subarray(0, bytesRead).toString('utf8');
  } catch {
    return null;
  } finally {
    await handle.close().catch(() => undefined);
  }
}

function pathModule(dir: string): typeof posix {
  return /^[A-Za-z]:[\\/]/.test(dir) || dir.startsWith('\\\\') ? (win32 as unknown as typeof posix) : posix;
}

/** The places of this machine, with the folders the user added. */
export function machineModelPlaces(added: readonly string[]): ModelPlace[] {
  return modelPlaces(process.platform, process.env, homedir(), added);
}

/** llama.h's `llama_ftype`: a model file's `general.file_type` as llama.cpp names it. */
const FILE_TYPES: Readonly<Record<number, string>> = {
  0: 'F32',
  1: 'F16',
  2: 'Q4_0',
  3: 'Q4_1',
  7: 'Q8_0',
  8: 'Q5_0',
  9: 'Q5_1',
  10: 'Q2_K',
  11: 'Q3_K_S',
  12: 'Q3_K_M',
  13: 'Q3_K_L',
  14: 'Q4_K_S',
  15: 'Q4_K_M',
  16: 'Q5_K_S',
  17: 'Q5_K_M',
  18: 'Q6_K',
  19: 'IQ2_XXS',
  20: 'IQ2_XS',
  21: 'Q2_K_S',
  22: 'IQ3_XS',
  23: 'IQ3_XXS',
  24: 'IQ1_S',
  25: 'IQ4_NL',
  26: 'IQ3_S',
  27: 'IQ3_M',
  28: 'IQ2_S',
  29: 'IQ2_M',
  30: 'IQ4_XS',
  31: 'IQ1_M',
  32: 'BF16',
  36: 'TQ1_0',
  37: 'TQ2_0',
  38: 'MXFP4_MOE',
};

/** The quantization a header's file type names; null when it names none we know. */
export function quantizationName(fileType: number | null): string | null {
  return fileType === null ? null : (FILE_TYPES[fileType] ?? null);
}
