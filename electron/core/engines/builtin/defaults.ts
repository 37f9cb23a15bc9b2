/**
 * The built-in engine's defaults where neither its profile nor a flag says: how many threads it
 * decodes with, whether it uses flash attention, and whether it decodes with a team of CPU
 * threads (which the gate asks of a window's last step). Pure.
 *
 * Threads.
 *
 * node-llama-cpp's prebuilt CPU backends are built without OpenMP and attach no ggml threadpool, so
 * every graph computation (every token) creates and joins `threads − 1` helper threads, and they
 * meet at a barrier after each of the graph's operations by spinning, never sleeping. When one of
 * them is off its core (the engine's own JavaScript thread streams each token, another engine or
 * any other process runs), every other thread spins until it comes back: on a 2-core machine
 * node-llama-cpp's default (`cpuMathCores`, 2 there) decoded 3–141 tok/s where one thread decoded
 * 377–1342 (pacer NOTES.md, "The built-in engine's default threads"). So with those binaries the
 * default leaves one physical core to the engine's JavaScript thread and to the other engines on
 * the device.
 *
 * A binding built on the machine (`npm run llama-binding:build`) uses OpenMP, whose thread team
 * lives on between computations: with every decode coming from one thread (the host runs with one
 * libuv pool thread, builtinHostEnv) two threads decoded a token in 0.46–0.73 ms against
 * 0.89–0.99 ms for one (pacer NOTES.md, "A binding built for the machine"). With it the default is
 * every physical core, as llama-server's.
 *
 * An engine whose layers all run on a GPU keeps one thread: its CPU part of a token is a row
 * lookup and the graph's bookkeeping, which more threads would only slow down with their
 * start-ups and barriers.
 *
 * Flash attention. node-llama-cpp lets llama.cpp decide ("auto"), which turns it on for the CPU
 * too, and the prebuilt CPU backends' flash-attention kernel is slow: on a Zen 4 core, with the
 * same llama.cpp commit, `ggml_compute_forward_flash_attn_ext` took 0.78 ms of each token against
 * 0.33 ms in a llama-server built for the machine, while every other kernel took the same time
 * (perf, 1,200 tokens of E256/L4 q8_0 each). Without it, the same model decodes in 0.57–0.88 ms
 * a token against 1.25–1.42 ms with it (pacer NOTES.md, "Where the built-in engine's time went").
 * So it is off while any layer (and so its attention) runs on the CPU, and llama.cpp's choice
 * where every layer is on a GPU, whose kernels are the reason to have it.
 */

export interface ThreadFacts {
  /** Physical cores worth decoding on (node-llama-cpp's `cpuMathCores`; at least 1). */
  mathCores: number;
  /** The binding keeps its decode threads between tokens (an OpenMP build: bindingKeepsThreads). */
  keepsThreads: boolean;
  /** Layers on a GPU, of the model's total (0 on the CPU). */
  offloadedLayers: number;
  totalLayers: number;
}

const allOnGpu = (facts: Pick<ThreadFacts, 'offloadedLayers' | 'totalLayers'>): boolean => facts.totalLayers > 0 && facts.offloadedLayers >= facts.totalLayers;

export function defaultThreads(facts: ThreadFacts): number {
  if (allOnGpu(facts)) return 1;
  const cores = Math.max(1, Math.floor(facts.mathCores));
  return facts.keepsThreads ? cores : Math.max(1, cores - 1);
}

/** Whether the engine decodes with a team of CPU threads (the gate's `cpuTeam`): more than one
 *  thread with layers on the CPU, whose steps run past a window's end at the cost of both teams'
 *  barriers. Not with one thread, nor with every layer on a GPU (the threads only feed it). Pure. */
export function decodesWithCpuTeam(facts: Pick<ThreadFacts, 'offloadedLayers' | 'totalLayers'> & { threads: number }): boolean {
  return facts.threads > 1 && !allOnGpu(facts);
}

/** Whether a binding keeps its thread team between computations, from llama.cpp's system info
 *  (node-llama-cpp's `llama.systemInfo`: "CPU : SSE3 = 1 | … | OPENMP = 1 | …"). */
export function bindingKeepsThreads(systemInfo: string): boolean {
  return /(^|\|)\s*OPENMP = 1\s*(\||$)/.test(systemInfo);
}

/**
 * The built-in engine host's environment, for a binding built with OpenMP (GCC's libgomp):
 * - One libuv pool thread. node-llama-cpp runs each decode on a pool thread, and OpenMP gives each
 *   calling thread its own team: with four pool threads the teams of the last few decodes spun on
 *   the cores the next one needed (2.0–3.4 ms a token at two threads, 0.46–0.73 with one).
 * - A short spin before an idle OpenMP thread sleeps (libgomp's default is 300,000 turns of the
 *   `pause` instruction; 10,000 take ~0.27 ms here). Long enough to bridge the gap between two
 *   tokens, short enough that a paced engine's threads are asleep soon after its window ends
 *   instead of spinning into the next engine's: two engines at 2:1 through `serve` went from 58–75 %
 *   of solo together at 2.43–2.53 : 1 to 89–92 % at 2.20–2.22 : 1, alone unchanged (pacer NOTES.md).
 * - Linux, at the default threads (one per physical core): each decode thread bound to a core of
 *   its own (OMP_PROC_BIND=close over OMP_PLACES=cores). Unbound, a window's first decode often
 *   found its team stacked on one core while the other idled: the scheduler wakes a sleeping
 *   thread on its waker's core when the machine is busy, and a team whose threads take turns there
 *   looks like one task to the load balancer. Each of the decode's barriers then cost a whole spin
 *   (~50 a token: 13–73 ms instead of 0.7), and the weight-1 engine, which starts a window twice as
 *   often per token, lost a third of its window time (`perf sched`, pacer NOTES.md "Two decode
 *   threads on one core"). Fewer threads than cores, set by a profile, stay unbound: every such
 *   engine would be bound to the same first cores, and engines on different devices (not paced
 *   against each other) would then share those while the rest idled. libgomp also binds the thread
 *   that loads it; the host gives its JavaScript thread its CPUs back (keepingThreadCpus).
 * Neither changes anything with node-llama-cpp's prebuilt binaries (no OpenMP, threads per token).
 */
const HOST_ENV: Readonly<Record<string, string>> = { UV_THREADPOOL_SIZE: '1', GOMP_SPINCOUNT: '10000' };
const HOST_ENV_BOUND: Readonly<Record<string, string>> = { ...HOST_ENV, OMP_PROC_BIND: 'close', OMP_PLACES: 'cores' };

/**
 * Node's flags for the built-in engine host: V8's young generation kept at 1 MB. Every token
 * allocates (its text, its event, the promises of its step) in the young generation, which V8
 * grows up to 16 MB for a process that allocates that fast: the engine's JavaScript then works on
 * memory that no cache holds when a paced window starts, after the other engine's window has
 * streamed its weights through the caches, and the engine with the shorter window pays that more
 * often per token. Through `serve` at 2:1, alternated with the flag and without (load 1.9–3.0):
 * 1.999 / 1.966 / 1.999 / 1.963 / 2.095 : 1 against 2.232 / 2.055 / 1.997 / 2.068, solo and
 * together unchanged within the runs' spread (pacer NOTES.md, "The young generation").
 */
export const BUILTIN_HOST_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=1'];

/**
 * glibc's tunable that has its malloc ask for transparent huge pages (madvise MADV_HUGEPAGE) for
 * the memory it maps: llama.cpp's CPU buffers (the KV cache, the graph's work buffers) come from
 * it. Most distributions leave transparent huge pages to `madvise`, which nothing else here asks
 * for, so without it every 4 KB page of those buffers is a TLB entry the other engine's window
 * has evicted when ours starts. Through `serve` at 2:1, alternated, one run each (load 1.0–1.5):
 * 2.022 / 2.091 / 2.061 / 1.962 / 2.040 / 2.086 / 2.150 : 1 against 2.148 / 2.045 / 2.136 /
 * 2.090 / 2.078 / 2.184 / 2.145, closer to 2 in five of the seven pairs, means 2.059 against
 * 2.118 (pacer NOTES.md, "Huge pages"). A glibc without the tunable (before 2.35), or another C
 * library, ignores it.
 */
export const HUGE_PAGE_TUNABLE = 'glibc.malloc.hugetlb=1';

/** GLIBC_TUNABLES for the host given what it would inherit: ours appended (tunables are `:`
 *  separated); the inherited value as it is when it already says how malloc uses huge pages. Pure. */
export function hostTunables(inherited: string | undefined): string {
  if (inherited === undefined || inherited.trim() === '') return HUGE_PAGE_TUNABLE;
  if (inherited.split(':').some((tunable) => tunable.trim().startsWith('glibc.malloc.hugetlb='))) return inherited;
  return `${inherited}:${HUGE_PAGE_TUNABLE}`;
}

/** The host's environment for an engine of `threads` decode threads (null: its default) on
 *  `platform`, under the environment it would otherwise inherit. One thread has no team to keep
 *  together: there the pool stays libuv's, which measured 2.04–2.08 : 1 in the pinned 2:1
 *  benchmark against 2.07–2.14 with one pool thread, alternated, same session. */
export function builtinHostEnv(threads: number | null, platform: NodeJS.Platform = process.platform, inherited: NodeJS.ProcessEnv = process.env): Readonly<Record<string, string>> {
  const pages: Record<string, string> = platform === 'linux' ? { GLIBC_TUNABLES: hostTunables(inherited['GLIBC_TUNABLES']) } : {};
  if (threads === 1) return pages;
  return { ...(threads === null && platform === 'linux' ? HOST_ENV_BOUND : HOST_ENV), ...pages };
}

/** node-llama-cpp's `flashAttention` for a context: false (off) while attention runs on the CPU,
 *  undefined (llama.cpp decides) with every layer on a GPU. */
export function defaultFlashAttention(facts: Pick<ThreadFacts, 'offloadedLayers' | 'totalLayers'>): false | undefined {
  return allOnGpu(facts) ? undefined : false;
}
