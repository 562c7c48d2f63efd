/**
 * The transport floor of the gateway's topology, for `bench/gateway.ts`: a bare relay built of
 * the same hops as `svc serve` + `svc node` and nothing else. No store, no signatures, no
 * validation, no routing, no billing: what three processes on loopback HTTP cost by themselves.
 *
 * - `gateway`: a node:http server. `POST /v1/chat/completions` is queued and handed to a waiting
 *   `GET /poll` (a long-poll, as the node agent's); `POST /result/<id>` answers the waiting client.
 * - `node <gateway> <upstream> <loops>`: `loops` long-poll loops, each calling the upstream with
 *   `fetch` (as the agent does) and posting the answer back.
 * - `gateway-ws` and `node-ws <gateway> <upstream> <slots>`: the same over one WebSocket (the node
 *   channel's topology): the node says how many slots it has free, the gateway pushes a request
 *   down the socket as soon as one is queued and a slot is free, the node answers on the socket.
 * - `gateway-ws-receipts` and `node-ws-receipts <gateway> <upstream> <slots>`: the WebSocket relay
 *   plus the work DESIGN.md's rules put between the engine's answer and the buyer's, done with
 *   svc's own functions and nothing else: the node hashes the result and signs its SVC1 receipt
 *   (section 9), appends it to a journal file until the gateway acknowledges it (section 4, as the
 *   agent's outbox journal: one line, no fsync; a tombstone line on the acknowledgement); the
 *   gateway recomputes the result's hash, verifies the signature against the node's key (section
 *   9) and only then answers, the receipt named in the answer's headers (section 10); the
 *   receipts checked in one tick are acknowledged in one frame. The floor of
 *   an answer's latency under those rules, whatever svc's own code costs.
 *
 * @example
 * node --import tsx bench/relay.ts gateway
 * node --import tsx bench/relay.ts node http://127.0.0.1:4000 http://127.0.0.1:5000 16
 * node --import tsx bench/relay.ts gateway-ws
 * node --import tsx bench/relay.ts node-ws http://127.0.0.1:4000 http://127.0.0.1:5000 16
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { publicKeyHex, sha256Hex, signSvc1, verifySvc1 } from '@svc/protocol';
import WebSocket, { WebSocketServer } from 'ws';

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (part: Buffer) => parts.push(part));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function json(res: ServerResponse, status: number, body: Buffer | string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

function gateway(): void {
  let nextId = 0;
  const queued: { id: number; body: Buffer }[] = [];
  const polls: ServerResponse[] = [];
  const waiting = new Map<number, ServerResponse>();
  const hand = () => {
    while (queued.length > 0 && polls.length > 0) {
      const work = queued.shift();
      const poll = polls.shift();
      if (work && poll && !poll.destroyed) json(poll, 200, JSON.stringify({ id: work.id, body: work.body.toString() }));
      else if (work) queued.unshift(work);
    }
  };
  const server = createServer((req, res) => {
    void (async () => {
      const url = req.url ?? '';
      if (req.method === 'POST' && url === '/v1/chat/completions') {
        const id = ++nextId;
        waiting.set(id, res);
        queued.push({ id, body: await readBody(req) });
        return hand();
      }
      if (req.method === 'GET' && url === '/poll') {
        polls.push(res);
        res.on('close', () => {
          const i = polls.indexOf(res);
          if (i >= 0) polls.splice(i, 1);
        });
        return hand();
      }
      const result = /^\/result\/(\d+)$/.exec(url);
      if (req.method === 'POST' && result) {
        const body = await readBody(req);
        const client = waiting.get(Number(result[1]));
        waiting.delete(Number(result[1]));
        if (client) json(client, 200, body);
        return void res.writeHead(204).end();
      }
      res.writeHead(404).end();
    })();
  });
  listen(server);
}

function listen(server: Server): void {
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    console.log(`listening on http://127.0.0.1:${port}`);
  });
  process.on('SIGTERM', () => process.exit(0));
}

/** The node of the WebSocket relay: `slots` requests at once, each answered on the socket. */
async function nodeWs(gatewayUrl: string, upstream: string, slots: number): Promise<void> {
  process.on('SIGTERM', () => process.exit(0));
  const socket = new WebSocket(`${gatewayUrl.replace(/^http/, 'ws')}/channel`);
  socket.on('message', (data: WebSocket.RawData) => {
    const work = JSON.parse(data.toString()) as { id: number; body: string };
    void (async () => {
      const answer = await fetch(`${upstream}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: work.body,
      });
      socket.send(JSON.stringify({ id: work.id, body: await answer.text() }));
    })();
  });
  await new Promise((resolve) => socket.once('open', resolve));
  socket.send(JSON.stringify({ free: slots }));
  console.log('connected');
}

async function node(gatewayUrl: string, upstream: string, loops: number): Promise<void> {
  process.on('SIGTERM', () => process.exit(0));
  const loop = async () => {
    for (;;) {
      const poll = await fetch(`${gatewayUrl}/poll`);
      if (poll.status !== 200) continue;
      const work = (await poll.json()) as { id: number; body: string };
      const answer = await fetch(`${upstream}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: work.body,
      });
      const text = await answer.text();
      await (
        await fetch(`${gatewayUrl}/result/${work.id}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: text,
        })
      ).arrayBuffer();
    }
  };
  console.log('polling');
  await Promise.all(Array.from({ length: loops }, loop));
}

/** A signed result on the wire of the receipts relay (the fields the SVC1 signature covers). */
interface SignedAnswer {
  id: number;
  body: string;
  receipt: { result_hash: string; metering_units: number; signature: string };
}

/**
 * The gateway of the WebSocket relay: requests are pushed to the node's socket while it has free
 * slots. With `receipts`, before answering a buyer it checks the node's answer as svc's gateway
 * does (the hash recomputed, the SVC1 signature verified against the key the node said hello
 * with), names the receipt in the answer's headers, and acknowledges the receipts checked in one
 * tick in one frame (the least the node's journal needs).
 */
function gatewayWs(receipts: boolean): void {
  let nextId = 0;
  const queued: { id: number; body: string }[] = [];
  const waiting = new Map<number, ServerResponse>();
  let node: { socket: WebSocket; free: number; key: string } | undefined;
  let acks: number[] = [];
  const acknowledge = (socket: WebSocket, id: number) => {
    if (acks.length === 0)
      setImmediate(() => {
        socket.send(JSON.stringify({ acks }));
        acks = [];
      });
    acks.push(id);
  };
  const hand = () => {
    while (node && node.free > 0 && queued.length > 0) {
      const work = queued.shift();
      if (!work) break;
      node.free--;
      node.socket.send(JSON.stringify(work));
    }
  };
  const answer = (client: ServerResponse, m: Partial<SignedAnswer>, key: string) => {
    if (!receipts || !m.receipt) return json(client, 200, m.body ?? '');
    const { result_hash, metering_units, signature } = m.receipt;
    const fields = { job_id: `work_${m.id}`, node_public_key_hex: key, result_hash_hex: result_hash, metering_units };
    const body = m.body ?? '';
    if (sha256Hex(Buffer.from(body, 'utf8')) !== result_hash || !verifySvc1(fields, signature))
      return json(client, 502, '{"error":"bad receipt"}');
    client
      .writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'x-svc-receipt': `rcpt_${m.id}`,
      })
      .end(body);
  };
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method === 'POST' && req.url === '/v1/chat/completions') {
        const id = ++nextId;
        waiting.set(id, res);
        queued.push({ id, body: (await readBody(req)).toString() });
        return hand();
      }
      res.writeHead(404).end();
    })();
  });
  const wss = new WebSocketServer({ server, path: '/channel' });
  wss.on('connection', (socket) => {
    const connected = { socket, free: 0, key: '' };
    node = connected;
    socket.on('message', (data: WebSocket.RawData) => {
      const m = JSON.parse(data.toString()) as Partial<SignedAnswer> & { free?: number; key?: string };
      if (m.key !== undefined) connected.key = m.key;
      if (m.free !== undefined) connected.free += m.free;
      if (m.id !== undefined) {
        const client = waiting.get(m.id);
        waiting.delete(m.id);
        if (client) answer(client, m, connected.key);
        if (receipts) acknowledge(socket, m.id);
        connected.free++;
      }
      hand();
    });
    socket.on('close', () => {
      if (node === connected) node = undefined;
    });
  });
  listen(server);
}

/**
 * The node of the receipts relay: `node-ws`, and each answer hashed, signed (SVC1) and journaled
 * (a line appended; one tombstone line for each acknowledgement frame) before it is sent.
 */
async function nodeWsReceipts(gatewayUrl: string, upstream: string, slots: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-journal-'));
  const journal = openSync(join(dir, 'journal.ndjson'), 'a', 0o600);
  process.on('SIGTERM', () => {
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  });
  const { privateKey } = generateKeyPairSync('ed25519');
  const key = publicKeyHex(privateKey);
  const socket = new WebSocket(`${gatewayUrl.replace(/^http/, 'ws')}/channel`);
  socket.on('message', (data: WebSocket.RawData) => {
    const work = JSON.parse(data.toString()) as { id: number; body: string; acks?: undefined } | { acks: number[] };
    if (work.acks !== undefined) return void writeSync(journal, `${JSON.stringify({ removed: work.acks })}\n`);
    void (async () => {
      const answer = await fetch(`${upstream}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: work.body,
      });
      const body = await answer.text();
      const result_hash = sha256Hex(Buffer.from(body, 'utf8'));
      const metering_units = body.length;
      const signature = signSvc1(
        { job_id: `work_${work.id}`, node_public_key_hex: key, result_hash_hex: result_hash, metering_units },
        privateKey,
      );
      const signed: SignedAnswer = { id: work.id, body, receipt: { result_hash, metering_units, signature } };
      const line = JSON.stringify(signed);
      writeSync(journal, `${line}\n`);
      socket.send(line);
    })();
  });
  await new Promise((resolve) => socket.once('open', resolve));
  socket.send(JSON.stringify({ free: slots, key }));
  console.log('connected');
}

const [role, ...args] = process.argv.slice(2);
if (role === 'gateway') gateway();
else if (role === 'gateway-ws') gatewayWs(false);
else if (role === 'node' && args.length === 3) await node(args[0] ?? '', args[1] ?? '', Number(args[2]));
else if (role === 'node-ws' && args.length === 3) await nodeWs(args[0] ?? '', args[1] ?? '', Number(args[2]));
else if (role === 'gateway-ws-receipts') gatewayWs(true);
else if (role === 'node-ws-receipts' && args.length === 3)
  await nodeWsReceipts(args[0] ?? '', args[1] ?? '', Number(args[2]));
else {
  console.error(
    'usage: relay.ts gateway | gateway-ws | gateway-ws-receipts | relay.ts node | node-ws | node-ws-receipts <gateway-url> <upstream-url> <loops>',
  );
  process.exit(2);
}
