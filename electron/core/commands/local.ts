/**
 * `gpu-share executables` and `gpu-share models`: what this machine has. Adding an executable is
 * something only the local user does (never over HTTP): once added, the dashboard may offer it to
 * a llama-server or llamafile profile.
 */
import { resolve } from 'node:path';
import { formatBytes } from '../planner/describe.js';
import { inspectModelFile } from '../planner/model-file.js';
import { executableView, fileProblem, ExecutableCatalog } from '../engines/executables.js';
import { LocalAdditionsError, LocalAdditionsStore } from '../engines/local-additions.js';
import { machineModelPlaces } from '../models/local-models.js';
import { ModelCatalog } from '../models/model-catalog.js';
import type { CommandIo } from './io.js';

export interface ExecutablesOptions {
  dataDir: string;
  json: boolean;
  add?: string | undefined;
  remove?: string | undefined;
}

/** Lists the engine executables found and added (with versions); `add`/`remove` change the added
 *  ones first. Exit 1 with one line for a path that cannot be added. */
export async function runExecutables(options: ExecutablesOptions, io: CommandIo): Promise<number> {
  const store = new LocalAdditionsStore(options.dataDir);
  try {
    if (options.add !== undefined) {
      const path = resolve(options.add);
      const problem = fileProblem(path);
      if (problem !== null) {
        io.err(`gpu-share: ${path}: ${problem === 'MISSING' ? 'no such file' : problem === 'NOT_A_FILE' ? 'not a regular file' : 'not executable by this user'}`);
        return 1;
      }
      io.err(store.add('executables', path) ? `added ${path}` : `${path} was added already`);
    }
    if (options.remove !== undefined) {
      const path = resolve(options.remove);
      io.err(store.remove('executables', path) ? `removed ${path}` : `${path} was not added (only added executables can be removed)`);
    }
  } catch (error) {
    if (!(error instanceof LocalAdditionsError)) throw error;
    io.err(`gpu-share: ${error.message}`);
    return 1;
  }
  if (store.loadProblem !== null) io.err(`gpu-share: ${store.loadProblem}`);
  const list = await new ExecutableCatalog({ added: () => store.get().executables }).list();
  if (options.json) {
    io.out(JSON.stringify(list.map(executableView)));
    return 0;
  }
  if (list.length === 0) io.out('no engine executables found (llama-server, llamafile, ollama); add one with gpu-share executables --add PATH');
  for (const entry of list) io.out(`${(entry.kind ?? 'added').padEnd(12)} ${entry.path}  ${entry.version ?? '(no version printed)'}  [${entry.source}]`);
  return 0;
}

export interface ModelsOptions {
  dataDir: string;
  json: boolean;
  addFolder?: string | undefined;
  removeFolder?: string | undefined;
}

/** Lists the models other tools keep on this machine, with what their headers say. */
export async function runModels(options: ModelsOptions, io: CommandIo): Promise<number> {
  const store = new LocalAdditionsStore(options.dataDir);
  try {
    if (options.addFolder !== undefined) io.err(store.add('modelFolders', resolve(options.addFolder)) ? `added ${resolve(options.addFolder)}` : `${resolve(options.addFolder)} was added already`);
    if (options.removeFolder !== undefined) io.err(store.remove('modelFolders', resolve(options.removeFolder)) ? `removed ${resolve(options.removeFolder)}` : `${resolve(options.removeFolder)} was not added`);
  } catch (error) {
    if (!(error instanceof LocalAdditionsError)) throw error;
    io.err(`gpu-share: ${error.message}`);
    return 1;
  }
  if (store.loadProblem !== null) io.err(`gpu-share: ${store.loadProblem}`);
  const catalog = new ModelCatalog({
    places: () => machineModelPlaces(store.get().modelFolders),
    inspect: (path) => inspectModelFile(path),
    nowMs: () => performance.now(),
    // A command may take the time it needs: every header is read.
    budgetMs: Number.POSITIVE_INFINITY,
  });
  const list = await catalog.list();
  if (options.json) {
    io.out(JSON.stringify(list));
    return 0;
  }
  for (const model of list.models) {
    const facts = model.problem ?? `${model.quantization ?? '—'} · trained ctx ${model.trainContextSize ?? '—'}`;
    io.out(`${model.name}  ${formatBytes(model.sizeBytes)}  ${facts}  [${model.source}] ${model.path}`);
  }
  for (const place of list.places) if (place.problem !== null) io.err(`${place.dir}: ${place.problem}`);
  io.err(`${list.models.length} model${list.models.length === 1 ? '' : 's'} in ${list.places.filter((p) => p.found).length} of ${list.places.length} places${list.truncated ? ' (the walk stopped at its limits: some are not listed)' : ''}`);
  return 0;
}
