import { connect } from 'node:net';

/** What came back on the socket: the status (0 when none came), the headers and the body as text. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends a request with `Transfer-Encoding: chunked` whose head and first chunk (`firstChunk`) go
 * out in one write, before the server can do anything with them, and no further chunk: the server
 * must answer on what it has. Resolves once a whole answer has arrived (its Content-Length read),
 * or when the connection closes; after 10 s the socket is given up. For the attacks of issue 40,
 * point 1 (a body past its limit while the server still sets up where it goes).
 *
 * @example
 * const res = await sendChunked(url, { method: 'PUT', path: putPath, firstChunk: Buffer.alloc(65_536) });
 * expect(res.status).toBe(413);
 */
export function sendChunked(
  base: string,
  request: { method: string; path: string; headers?: Record<string, string>; firstChunk: Buffer },
): Promise<RawAnswer> {
  const url = new URL(base);
  const head = Object.entries({ host: url.host, ...request.headers, 'transfer-encoding': 'chunked' })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    let received = Buffer.alloc(0);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      socket.destroy();
      resolve(parseAnswer(received));
    };
    // A reset once the answer is in is the server closing a connection whose body it will not read.
    socket.on('error', finish);
    socket.on('close', finish);
    socket.on('data', (d: Buffer) => {
      received = Buffer.concat([received, d]);
      const answer = parseAnswer(received);
      const length = Number(answer.headers['content-length'] ?? Number.NaN);
      if (answer.status > 0 && Buffer.byteLength(answer.body, 'latin1') >= length) finish();
    });
    socket.once('connect', () => {
      socket.write(
        Buffer.concat([
          Buffer.from(
            `${request.method} ${request.path} HTTP/1.1\r\n${head}\r\n${request.firstChunk.length.toString(16)}\r\n`,
          ),
          request.firstChunk,
          Buffer.from('\r\n'),
        ]),
      );
    });
    setTimeout(finish, 10_000).unref();
  });
}

function parseAnswer(bytes: Buffer): RawAnswer {
  const text = bytes.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  if (end < 0) return { status: 0, headers: {}, body: '' };
  const headers: Record<string, string> = {};
  for (const line of text.slice(0, end).split('\r\n').slice(1)) {
    const at = line.indexOf(':');
    if (at > 0) headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  return { status, headers, body: text.slice(end + 4) };
}
