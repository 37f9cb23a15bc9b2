import { describe, expect, it } from 'vitest';
import { parseFlags } from '../fixtures/flags.js';

const OPTIONS = { repeat: { type: 'string' }, json: { type: 'boolean', default: false } } as const;
const parse = (...argv: string[]) => parseFlags('bench:x', 'usage: bench:x [--repeat N] [--json]', OPTIONS, argv);

describe('a script’s flags', () => {
  it('parses known flags with their defaults', () => {
    expect(parse('--repeat', '3')).toEqual({ ok: true, values: { repeat: '3', json: false } });
    expect(parse()).toEqual({ ok: true, values: { json: false } });
  });

  it('answers --help and -h with the usage alone, exit 0', () => {
    expect(parse('--help')).toEqual({ ok: false, exitCode: 0, text: 'usage: bench:x [--repeat N] [--json]' });
    expect(parse('--json', '-h')).toEqual({ ok: false, exitCode: 0, text: 'usage: bench:x [--repeat N] [--json]' });
  });

  it('names an unknown flag, a missing value and a stray word in one line, then the usage, exit 2', () => {
    for (const [argv, first] of [
      [['--repeats', '3'], /^bench:x: Unknown option '--repeats'/],
      [['--repeat'], /^bench:x: Option '--repeat <value>' argument missing$/],
      [['extra'], /^bench:x: Unexpected argument 'extra'/],
    ] as const) {
      const result = parse(...argv);
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      expect(result.exitCode).toBe(2);
      const lines = result.text.split('\n');
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(first);
      expect(lines[1]).toBe('usage: bench:x [--repeat N] [--json]');
    }
  });
});
