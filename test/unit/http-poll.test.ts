/** The /metrics poller: its HTTP/1.1 response reader (pure), and one keep-alive connection for
 *  many polls against a real loopback server, closed by stop(). */
import { createServer, type Server } from 'node:http';
import { describe, expect, it } from 'vitest';
import { MAX_BODY_BYTES, parseHttpResponse, startPoller } from '../../electron/core/pacer/http-poll.js';

const b = (text: string): Buffer => Buffer.from(text, 'latin1');

describe('parseHttpResponse', () => {
  it('reads a Content-Length body and says how much of the buffer it took', () => {
    const parsed = parseHttpResponse(b('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello'));
    expect(parsed).toMatchObject({ kind: 'done', status: 200, consumed: 69, close: false });
    expect(parsed.kind === 'done' && parsed.body.toString()).toBe('hello');
  });

  it('reads a chunked body, with or without trailers', () => {
    const parsed = parseHttpResponse(b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n'));
    expect(parsed.kind === 'done' && parsed.body.toString()).toBe('abcde');
    const trailer = parseHttpResponse(b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\nX-T: 1\r\n\r\n'));
    expect(trailer.kind === 'done' && trailer.body.toString()).toBe('z');
  });

  it('waits for the rest of a response cut anywhere', () => {
    const whole = 'HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 4\r\n\r\nnope';
    for (let cut = 0; cut < whole.length; cut++) expect(parseHttpResponse(b(whole.slice(0, cut))).kind).toBe('incomplete');
    expect(parseHttpResponse(b(whole))).toMatchObject({ kind: 'done', status: 401, close: true });
  });

  it('names what is wrong with a response it cannot read', () => {
    expect(parseHttpResponse(b('SSH-2.0-OpenSSH\r\n\r\n'))).toMatchObject({ kind: 'bad', why: 'no status line' });
    expect(parseHttpResponse(b('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'))).toMatchObject({ kind: 'bad', why: 'Content-Length is not a number' });
    expect(parseHttpResponse(b(`HTTP/1.1 200 OK\r\nContent-Length: ${MAX_BODY_BYTES + 1}\r\n\r\n`))).toMatchObject({ kind: 'bad' });
    expect(parseHttpResponse(b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'))).toMatchObject({ kind: 'bad', why: 'a chunk size is not hex' });
    expect(parseHttpResponse(b('HTTP/1.1 200 OK\r\n\r\n'))).toMatchObject({ kind: 'bad', why: 'neither Content-Length nor chunked' });
    expect(parseHttpResponse(Buffer.alloc(20_000, 0x41))).toMatchObject({ kind: 'bad', why: 'headers over 16 KiB' });
  });
});

describe('startPoller', () => {
  it('polls over one keep-alive connection, sends the key, and closes it on stop', async () => {
    let connections = 0;
    const auth: (string | undefined)[] = [];
    const server: Server = createServer((req, res) => {
      auth.push(req.headers.authorization);
      res.end('llamacpp:requests_processing 0\n');
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const bodies: (string | null)[] = [];
    const poller = startPoller(`http://127.0.0.1:${port}/metrics`, 'k', 20, (body) => bodies.push(body));
    const deadline = Date.now() + 10_000;
    while (bodies.length < 5 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    poller.stop();
    expect(bodies.slice(0, 5)).toEqual(Array(5).fill('llamacpp:requests_processing 0\n'));
    expect(connections).toBe(1);
    expect(auth.every((a) => a === 'Bearer k')).toBe(true);
    // Stopped: the server closes at once (it would wait for a busy connection).
    const closed = await Promise.race([new Promise<boolean>((resolve) => server.close(() => resolve(true))), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 3_000))]);
    expect(closed).toBe(true);
  });
});
