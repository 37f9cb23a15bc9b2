/**
 * "Use it": how a program talks to the models GPU Share runs. The gateway speaks the OpenAI API at
 * `http://127.0.0.1:<port>/v1`; `model` names a profile by its name (its own model id) or one of
 * its capabilities (the gateway loads the model on demand); the bearer token is the dashboard's
 * (or a gateway token from the settings). Pure: the lines to show (token masked) and the lines to
 * copy (token in clear) come from the same function.
 */
import { modelIdsOf, type Profile } from '../../../electron/core/contract.js';

/** The gateway's OpenAI base URL for an API port. */
export const baseUrlFor = (port: number): string => `http://127.0.0.1:${port}/v1`;

export const MASK = '••••••••';

export interface UseItLines {
  baseUrl: string;
  model: string;
  curl: string;
  /** The OpenAI Python client, configured. */
  python: string;
  /** The OpenAI JavaScript client, configured. */
  javascript: string;
}

/** Single quotes for a POSIX shell: 'it'\''s'. */
const shellQuote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`;

/**
 * The lines for a model id, with the token as given (pass MASK to show them, the token to copy
 * them). A JSON string literal is valid Python and JavaScript, so names are quoted with it.
 */
export function useItLines(port: number, model: string, token: string): UseItLines {
  const baseUrl = baseUrlFor(port);
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello in five words.' }], max_tokens: 32 });
  const curl = `curl -sS ${baseUrl}/chat/completions -H ${shellQuote(`Authorization: Bearer ${token}`)} -H 'Content-Type: application/json' -d ${shellQuote(body)}`;
  const python = [
    'from openai import OpenAI',
    '',
    `client = OpenAI(base_url=${JSON.stringify(baseUrl)}, api_key=${JSON.stringify(token)})`,
    `reply = client.chat.completions.create(model=${JSON.stringify(model)}, messages=[{"role": "user", "content": "Hello"}])`,
    'print(reply.choices[0].message.content)',
  ].join('\n');
  const javascript = [
    "import OpenAI from 'openai';",
    '',
    `const client = new OpenAI({ baseURL: ${JSON.stringify(baseUrl)}, apiKey: ${JSON.stringify(token)} });`,
    `const reply = await client.chat.completions.create({ model: ${JSON.stringify(model)}, messages: [{ role: 'user', content: 'Hello' }] });`,
    'console.log(reply.choices[0].message.content);',
  ].join('\n');
  return { baseUrl, model, curl, python, javascript };
}

/** The model ids the gateway takes, as `/v1/models` lists them: each profile's name, then the
 *  capabilities no name shadows (the contract's modelIdsOf). */
export function modelIds(profiles: readonly Pick<Profile, 'id' | 'name' | 'capabilities'>[]): string[] {
  return modelIdsOf(profiles).map((m) => m.id);
}
