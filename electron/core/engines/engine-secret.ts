/** The per-engine secret: the supervisor makes one for every engine it starts and the gateway
 *  sends it; the engine's own port refuses requests without it (no side door around the gateway's
 *  tokens, priorities and queue). */
import { randomBytes } from 'node:crypto';

/** The environment variable that hands the built-in engine its secret. */
export const ENGINE_SECRET_ENV = 'GPU_SHARE_ENGINE_KEY';

export function newEngineSecret(): string {
  return randomBytes(24).toString('base64url');
}
