/** What a profile's engine arguments say about its KV cache, for the estimate. Pure (the dashboard
 *  reads it too, to ask for a model card's figures as a launch would plan them). */
import { KV_CACHE_TYPES, type KvCacheType } from '../contract.js';

/** The KV cache type a profile's arguments ask llama.cpp for (`-ctk`/`--cache-type-k`); the
 *  key's type stands for both (a mixed pair is rare). undefined: llama.cpp's default, f16. */
export function kvCacheTypeOf(args: readonly string[]): KvCacheType | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    const [flag, inline] = arg.split('=', 2);
    if (flag !== '-ctk' && flag !== '--cache-type-k') continue;
    const value = (inline ?? args[i + 1] ?? '').toLowerCase();
    if ((KV_CACHE_TYPES as readonly string[]).includes(value)) return value as KvCacheType;
  }
  return undefined;
}
