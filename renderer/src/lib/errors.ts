/**
 * An action's failure in words: what failed, the code to search for, and what to do. Errors
 * arrive as ApiError from the HTTP bridge and as plain Error objects from IPC (Electron copies
 * only the message across), so the code is read from the object or from the "CODE:" prefix.
 */
import type { ApiErrorCode } from '../../../electron/core/contract.js';

const CODES: readonly ApiErrorCode[] = ['BAD_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'NOT_FOUND', 'CONFLICT', 'TOO_LARGE', 'QUEUE_FULL', 'NOT_ADMITTED', 'INTERNAL'];

const NEXT_STEP: Readonly<Record<ApiErrorCode, string>> = {
  BAD_REQUEST: 'fix the named field and try again',
  UNAUTHORIZED: 'open the dashboard with the URL `gpu-share serve` printed (it carries the token)',
  FORBIDDEN: 'open the dashboard on 127.0.0.1 as printed by `gpu-share serve`',
  NOT_FOUND: 'it is gone: the list refreshes with the next update',
  CONFLICT: 'the state changed meanwhile: check it and try again',
  TOO_LARGE: 'send less',
  QUEUE_FULL: 'the gateway queue is full: try again shortly',
  NOT_ADMITTED: 'see the plan for what is in the way',
  INTERNAL: 'this is a bug in GPU Share: report it with this message',
};

export interface ErrorWords {
  code: ApiErrorCode | null;
  message: string;
  /** `<what> failed — CODE: message (next step)` */
  text: string;
}

export function describeError(what: string, error: unknown): ErrorWords {
  let message = error instanceof Error ? error.message : typeof error === 'string' ? error : 'unknown error';
  let code: ApiErrorCode | null = null;
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' && (CODES as readonly string[]).includes(error.code)) {
    code = error.code as ApiErrorCode;
  } else {
    // Electron's IPC gives "Error invoking remote method 'gpu-share:launch': ApiError: NOT_ADMITTED: …"
    const match = /\b(BAD_REQUEST|UNAUTHORIZED|FORBIDDEN|NOT_FOUND|CONFLICT|TOO_LARGE|QUEUE_FULL|NOT_ADMITTED|INTERNAL)\b:?\s*(.*)$/s.exec(message);
    if (match !== null) {
      code = match[1] as ApiErrorCode;
      message = match[2] === undefined || match[2] === '' ? message : match[2];
    }
  }
  const head = code === null ? message : `${code}: ${message}`;
  const next = code === null ? '' : ` (${NEXT_STEP[code]})`;
  return { code, message, text: `${what} failed — ${head}${next}` };
}
