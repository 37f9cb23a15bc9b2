import { describe, expect, it } from 'vitest';
import { decodeAppEvent, SseParser, type SseMessage } from './sse.js';

const parseAll = (chunks: readonly string[]): SseMessage[] => {
  const parser = new SseParser();
  return chunks.flatMap((chunk) => parser.push(chunk));
};

const STREAM = [
  ': keep-alive comment\n',
  'event: state\n',
  'data: {"type":"state",\n',
  'data: "n":1}\n',
  '\n',
  'id: 7\r\n',
  'event: log\r\n',
  'data:no-space\r\n',
  '\r\n',
  'data: plain\r',
  '\r',
  'event: progress\n',
  'data\n',
  '\n',
].join('');

const EXPECTED: SseMessage[] = [
  { event: 'state', data: '{"type":"state",\n"n":1}', lastEventId: null },
  { event: 'log', data: 'no-space', lastEventId: '7' },
  { event: 'message', data: 'plain', lastEventId: '7' },
  { event: 'progress', data: '', lastEventId: '7' },
];

describe('SseParser', () => {
  it('parses events, comments, multi-line data, ids and every line ending', () => {
    expect(parseAll([STREAM])).toEqual(EXPECTED);
  });

  it('gives the same messages whatever the chunk boundaries', () => {
    for (let cut = 0; cut <= STREAM.length; cut++) {
      expect(parseAll([STREAM.slice(0, cut), STREAM.slice(cut)]), `cut at ${cut}`).toEqual(EXPECTED);
    }
    expect(parseAll([...STREAM])).toEqual(EXPECTED);
    let seed = 42;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let round = 0; round < 200; round++) {
      const chunks: string[] = [];
      let at = 0;
      while (at < STREAM.length) {
        const size = 1 + Math.floor(random() * 9);
        chunks.push(STREAM.slice(at, at + size));
        at += size;
      }
      expect(parseAll(chunks)).toEqual(EXPECTED);
    }
  });

  it('treats a CR at the end of a chunk and an LF at the start of the next as one line end', () => {
    const messages = parseAll(['data: a\r', '\ndata: b\r', '\n\r', '\n']);
    expect(messages).toEqual([{ event: 'message', data: 'a\nb', lastEventId: null }]);
  });

  it('holds an incomplete frame until its blank line arrives', () => {
    const parser = new SseParser();
    expect(parser.push('event: plan\ndata: {"x":1}\n')).toEqual([]);
    expect(parser.push('\n')).toEqual([{ event: 'plan', data: '{"x":1}', lastEventId: null }]);
  });

  it('does not dispatch a frame without data, and resets the event type after it', () => {
    expect(parseAll(['event: state\n\n', 'data: x\n\n'])).toEqual([{ event: 'message', data: 'x', lastEventId: null }]);
  });

  it('strips a byte-order mark at the start of the stream only and reads retry', () => {
    const parser = new SseParser();
    expect(parser.push('\uFEFFretry: 1500\ndata: a\n\n')).toEqual([{ event: 'message', data: 'a', lastEventId: null }]);
    expect(parser.retryMs).toBe(1500);
    parser.push('retry: soon\n');
    expect(parser.retryMs).toBe(1500);
  });
});

describe('decodeAppEvent', () => {
  it('returns the event when the payload type is known and matches the frame', () => {
    const event = decodeAppEvent({ event: 'progress', data: '{"type":"progress","engineId":"e1","pct":42}', lastEventId: null });
    expect(event).toEqual({ type: 'progress', engineId: 'e1', pct: 42 });
    expect(decodeAppEvent({ event: 'message', data: '{"type":"aged-out","gpuKey":"k","slot":1,"name":"n","pid":2}', lastEventId: null })?.type).toBe('aged-out');
  });

  it('rejects bad JSON, unknown types and a mismatched event name', () => {
    expect(decodeAppEvent({ event: 'state', data: '{not json', lastEventId: null })).toBeNull();
    expect(decodeAppEvent({ event: 'message', data: '{"type":"reboot"}', lastEventId: null })).toBeNull();
    expect(decodeAppEvent({ event: 'log', data: '{"type":"state","state":{}}', lastEventId: null })).toBeNull();
    expect(decodeAppEvent({ event: 'message', data: '[1,2]', lastEventId: null })).toBeNull();
  });
});
