/**
 * A registry whose file shrank under its mapping (RegistryError BROKEN, see segment.ts) is said
 * once, and once more when it is valid again; in between, whoever paces with it runs unpaced.
 */
import { RegistryError } from '../../../native/helper.js';

export function isBrokenRegistry(error: unknown): error is RegistryError {
  return error instanceof RegistryError && error.code === 'BROKEN';
}

export class BrokenRegistryNotice {
  private reason: string | null = null;

  /** @param say one line each: `broken` when it breaks, `valid again` when it heals */
  constructor(private readonly say: (line: string, state: 'broken' | 'valid-again') => void) {}

  /** Why the registry is broken now; null while it is valid. */
  get brokenReason(): string | null {
    return this.reason;
  }

  /** Judge a failure: true (said once) when it is a broken registry, false for anything else. */
  failed(error: unknown): boolean {
    if (!isBrokenRegistry(error)) return false;
    if (this.reason === null) this.say(error.message, 'broken');
    this.reason = error.message;
    return true;
  }

  /** `read()`, or `whenBroken` (said once) when the registry is broken; anything else throws. */
  read<T>(read: () => T, whenBroken: T): T {
    try {
      const value = read();
      this.succeeded();
      return value;
    } catch (error) {
      if (this.failed(error)) return whenBroken;
      throw error;
    }
  }

  /** A read or write went through: said once if it was broken. */
  succeeded(): void {
    if (this.reason === null) return;
    this.reason = null;
    this.say('the registry is valid again', 'valid-again');
  }
}
