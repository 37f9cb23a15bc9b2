/**
 * An action's failure in words: what failed, the code to search for, and what to do. Errors
 * arrive as ApiError from the HTTP bridge and as the flat `{name:'ApiError',code,…}` object the
 * Electron preload rejects with (the contract's apiErrorFrom reads both); a message that only
 * carries "CODE: …" in its text is read too.
 */
import { API_ERROR_CODES, apiErrorFrom, type ApiErrorCode } from '../../../electron/core/contract.js';

const NEXT_STEP: Readonly<Record<ApiErrorCode, string>> = {
  BAD_REQUEST: 'fix the named field and try again',
  UNAUTHORIZED: 'open the dashboard with the URL `gpu-share serve` printed (it carries the token)',
  FORBIDDEN: 'open the dashboard on 127.0.0.1 as printed by `gpu-share serve`',
  NOT_FOUND: 'it is gone: the list refreshes with the next update',
  CONFLICT: 'the state changed meanwhile: check it and try again',
  TOO_LARGE: 'send less',
  QUEUE_FULL: 'the gateway queue is full: try again shortly',
  NOT_ADMITTED: 'see the plan for what is in the way',
  ENGINE_GONE: 'the engine stopped meanwhile: try again',
  INTERNAL: 'this is a bug in GPU Share: report it with this message',
};

export interface ErrorWords {
  code: ApiErrorCode | null;
  message: string;
  /** `<what> failed — CODE: message (next step)` */
  text: string;
}

const CODE_IN_TEXT = new RegExp(`\\b(${API_ERROR_CODES.join('|')})\\b:?\\s*(.*)$`, 's');

export function describeError(what: string, error: unknown): ErrorWords {
  const api = apiErrorFrom(error);
  let code: ApiErrorCode | null = api?.code ?? null;
  let message = api?.message ?? (error instanceof Error ? error.message : typeof error === 'string' ? error : 'unknown error');
  if (api === null) {
    // e.g. "Error invoking remote method 'gpu-share:launch': ApiError: NOT_ADMITTED: …"
    const match = CODE_IN_TEXT.exec(message);
    if (match !== null) {
      code = match[1] as ApiErrorCode;
      message = match[2] === undefined || match[2] === '' ? message : match[2];
    }
  }
  const head = code === null ? message : `${code}: ${message}`;
  const next = code === null ? '' : ` (${NEXT_STEP[code]})`;
  return { code, message, text: `${what} failed — ${head}${next}` };
}
