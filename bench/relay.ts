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
 *
 * @example
 * node --import tsx bench/relay.ts gateway
 * node --import tsx bench/relay.ts node http://127.0.0.1:4000 http://127.0.0.1:5000 16
 * node --import tsx bench/relay.ts gateway-ws
 * node --import tsx bench/relay.ts node-ws http://127.0.0.1:4000 http://127.0.0.1:5000 16
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
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

/** The gateway of the WebSocket relay: requests are pushed to the node's socket while it has free slots. */
function gatewayWs(): void {
  let nextId = 0;
  const queued: { id: number; body: string }[] = [];
  const waiting = new Map<number, ServerResponse>();
  let node: { socket: WebSocket; free: number } | undefined;
  const hand = () => {
    while (node && node.free > 0 && queued.length > 0) {
      const work = queued.shift();
      if (!work) break;
      node.free--;
      node.socket.send(JSON.stringify(work));
    }
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
    const connected = { socket, free: 0 };
    node = connected;
    socket.on('message', (data: WebSocket.RawData) => {
      const m = JSON.parse(data.toString()) as { free?: number; id?: number; body?: string };
      if (m.free !== undefined) connected.free += m.free;
      if (m.id !== undefined) {
        const client = waiting.get(m.id);
        waiting.delete(m.id);
        if (client) json(client, 200, m.body ?? '');
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

const [role, ...args] = process.argv.slice(2);
if (role === 'gateway') gateway();
else if (role === 'gateway-ws') gatewayWs();
else if (role === 'node' && args.length === 3) await node(args[0] ?? '', args[1] ?? '', Number(args[2]));
else if (role === 'node-ws' && args.length === 3) await nodeWs(args[0] ?? '', args[1] ?? '', Number(args[2]));
else {
  console.error('usage: relay.ts gateway | gateway-ws | relay.ts node | node-ws <gateway-url> <upstream-url> <loops>');
  process.exit(2);
}
