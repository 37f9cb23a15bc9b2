/**
 * How every document from outside is checked: API bodies and IPC arguments (contract.ts), profiles
 * (engines/profile-schema.ts) and settings (settings.ts) each have one valibot schema, and their
 * TypeScript types are inferred from it, so a field is declared once.
 *
 * Why valibot and not TypeBox on ajv: the schemas live beside the contract, which the renderer and
 * the preload import too, and the dashboard's content security policy (`script-src 'self'`, no
 * 'unsafe-eval') forbids the `new Function` that ajv (and TypeBox's compiler) build validators
 * with; valibot runs plain functions, has no Node imports and bundles for the browser in a few KB.
 * It also keeps the rules JSON Schema cannot state (a name's limit in UTF-8 bytes, unique ids,
 * well-formed Unicode, cross-field rules) inside the schema with their own messages, where ajv
 * needed a second, hand-written validator beside it.
 *
 * A problem is reported as the first issue: its path (keys from the document's root) and a message
 * saying why. Each API turns that into its own error shape (contract.ts: `{error:{code,message,
 * field}}`, which the gateway maps to OpenAI's); profiles and settings into their file errors.
 */
import * as v from 'valibot';

export type PathKey = string | number;

export interface SchemaProblem {
  /** Keys from the root to the offending value; empty for the root itself. */
  keys: PathKey[];
  /** Why, e.g. `must be a whole number from 1 to 10000000, got 0`. */
  message: string;
}

export type Checked<T> = { ok: true; value: T } | { ok: false; problem: SchemaProblem };

/** The value the schema makes of `value` (defaults filled), or its first problem. */
export function examine<TSchema extends v.GenericSchema>(schema: TSchema, value: unknown): Checked<v.InferOutput<TSchema>> {
  const result = v.safeParse(schema, value, { abortEarly: true });
  if (result.success) return { ok: true, value: result.output };
  const issue = result.issues[0];
  const keys = (issue.path ?? []).map((item): PathKey => (typeof item.key === 'number' ? item.key : String(item.key)));
  return { ok: false, problem: { keys, message: issue.message } };
}

const IDENTIFIER_RE = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** A JSON path as messages show it: `profiles[2].env["A-B"]`; `root` when there are no keys. */
export function pathText(root: string, keys: readonly PathKey[]): string {
  let path = root;
  for (const key of keys) {
    const step = typeof key === 'number' ? `[${key}]` : IDENTIFIER_RE.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
    path = path === '' ? step.replace(/^\./, '') : `${path}${step}`;
  }
  return path;
}

/** A value as an error message shows it: `"text"`, 42, null, nothing, `["a"]` (JSON, shortened). */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** A message that ends with the value it got: `must be true or false, got "yes"`. */
export const got =
  (text: string) =>
  (issue: v.BaseIssue<unknown>): string =>
    `${text}, got ${describeValue(issue.input)}`;

/** A whole number in a range (`max` null: no upper bound); the message is `must be <what>, got …`. */
export function wholeNumber(min: number, max: number | null, what: string) {
  const message = got(`must be ${what}`);
  const number = v.pipe(v.number(message), v.safeInteger(message), v.minValue(min, message));
  return max === null ? number : v.pipe(number, v.maxValue(max, message));
}

export const TRUE_OR_FALSE = v.boolean(got('must be true or false'));

export const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

type Entries = v.ObjectEntries;

/** The message a field's own schema gives for a missing value (`…, got nothing`). */
function missingMessage(entries: Entries, key: string): string {
  const schema = entries[key];
  const checked = schema === undefined ? null : examine(schema, undefined);
  return checked !== null && !checked.ok ? checked.problem.message : 'is required';
}

/**
 * An object with exactly these fields: anything but a plain object is `must be an object`
 * (`what` says what kind), a missing field gets its own schema's message, an unknown one
 * `unknownField` (given the key).
 */
export function strictRecord<const TEntries extends Entries>(entries: TEntries, what: string, unknownField: (key: string) => string) {
  return v.pipe(
    v.custom<Record<string, unknown>>(isRecord, got(`must be ${what}`)),
    v.strictObject(entries, (issue) => {
      const key = String(issue.path?.[issue.path.length - 1]?.key ?? '');
      return issue.expected === 'never' ? unknownField(key) : missingMessage(entries, key);
    }),
  );
}

/** The same fields, each optional: a patch, or a file whose missing keys take their defaults. */
export function optionalEntries<const TEntries extends Entries>(entries: TEntries): { [K in keyof TEntries]: v.OptionalSchema<TEntries[K], undefined> } {
  return Object.fromEntries(Object.entries(entries).map(([name, schema]) => [name, v.optional(schema)])) as { [K in keyof TEntries]: v.OptionalSchema<TEntries[K], undefined> };
}

/** An object with these fields that keeps any others as they are (a file a newer version wrote). */
export function openRecord<const TEntries extends Entries>(entries: TEntries, what: string) {
  return v.pipe(
    v.custom<Record<string, unknown>>(isRecord, got(`must be ${what}`)),
    v.looseObject(entries, (issue) => missingMessage(entries, String(issue.path?.[issue.path.length - 1]?.key ?? ''))),
  );
}

/**
 * A string-keyed map checked key by key and value by value. Unlike valibot's `record`, which drops
 * `__proto__`, every own key stays an ordinary entry (an environment variable may be called that).
 */
export function ownRecord<TValue extends v.GenericSchema<unknown, string>>(keyCheck: (key: string) => boolean, badKey: string, value: TValue, notRecord: string) {
  return v.pipe(
    v.custom<Record<string, unknown>>(isRecord, got(notRecord)),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      const input = dataset.value;
      const output: Record<string, v.InferOutput<TValue>> = {};
      for (const [key, item] of Object.entries(input)) {
        const pathItem = { type: 'object' as const, origin: 'value' as const, input, key, value: item };
        if (!keyCheck(key)) {
          addIssue({ message: badKey, input: key, path: [pathItem] });
          return NEVER;
        }
        const checked = examine(value, item);
        if (!checked.ok) {
          addIssue({ message: checked.problem.message, input: item, path: [pathItem] });
          return NEVER;
        }
        // defineProperty, not assignment: a key called __proto__ must stay a plain entry.
        Object.defineProperty(output, key, { value: checked.value, enumerable: true, writable: true, configurable: true });
      }
      return output;
    }),
  );
}
