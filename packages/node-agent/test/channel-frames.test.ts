import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NODE_CHANNEL_PATH } from '@svc/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { createNodeChannel, type NodeChannel } from '../src/channel.js';
import { loadOrCreateIdentity } from '../src/identity.js';

/** A stand-in server: says hello (grants on), records what the node sends, lets the test answer. */
async function fakeChannelServer() {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const received: Record<string, unknown>[] = [];
  let peer: WebSocket | undefined;
  let seq = 0;
  wss.on('connection', (ws) => {
    peer = ws;
    ws.on('message', (data: Buffer) => received.push(JSON.parse(data.toString()) as Record<string, unknown>));
    ws.send(JSON.stringify({ type: 'hello', seq: ++seq, node_id: 'node_frames', lease_seconds: 60, grants: true }));
  });
  return {
    url: `http://127.0.0.1:${(wss.address() as AddressInfo).port}`,
    received,
    send: (message: Record<string, unknown>) => peer?.send(JSON.stringify({ ...message, seq: ++seq })),
    close: () => new Promise<void>((resolve) => wss.close(() => resolve())),
  };
}

const receipt = (workId: string) =>
  ({
    type: 'receipt',
    work_id: workId,
    receipt: {
      job_id: `chatcmpl-${workId}`,
      pubkey: '00'.repeat(32),
      result_hash: '11'.repeat(32),
      signature: '22'.repeat(64),
      metering_units: 1,
      metadata: {},
    },
  }) as Parameters<NodeChannel['receipt']>[0];

describe('the node channel, frame by frame', () => {
  let server: Awaited<ReturnType<typeof fakeChannelServer>>;
  let channel: NodeChannel;
  let dataDir: string;
  beforeEach(async () => {
    server = await fakeChannelServer();
    dataDir = await mkdtemp(join(tmpdir(), 'svc-node-frames-'));
    const identity = await loadOrCreateIdentity(dataDir);
    channel = createNodeChannel({ server: server.url, path: NODE_CHANNEL_PATH, identity, nodeId: () => 'node_frames' });
    expect(await channel.ready()).toBe(true);
  });
  afterEach(async () => {
    await channel.close();
    await server.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('settles every receipt an ack names, also several in one ack without `re`', async () => {
    const a = channel.receipt(receipt('wrk_a'), { timeoutMs: 5_000 });
    const b = channel.receipt(receipt('wrk_b'), { timeoutMs: 5_000 });
    const c = channel.receipt(receipt('wrk_c'), { timeoutMs: 5_000 });
    await expect.poll(() => server.received.length).toBe(3);
    // One ack for two receipts (as a server acknowledging a whole commit would send), one by `re`.
    server.send({ type: 'ack', work_ids: ['wrk_a', 'wrk_c'] });
    server.send({ type: 'ack', re: server.received[1]?.seq, work_ids: ['wrk_b'] });
    await expect(Promise.all([a, b, c])).resolves.toEqual([undefined, undefined, undefined]);
  });

  it('writes the frames sent in one tick (a receipt and the grant of the slot it freed) to the socket at once', async () => {
    // Writes reaching the client's TCP socket: net.Socket's _write/_writev, one per batch of buffers.
    const writes: number[] = [];
    const proto = Socket.prototype as unknown as Record<'_write' | '_writev', (...args: unknown[]) => unknown>;
    const original = { _write: proto._write, _writev: proto._writev };
    const port = Number(new URL(server.url).port);
    for (const name of ['_write', '_writev'] as const)
      proto[name] = function (this: Socket, ...args: unknown[]) {
        if (this.remotePort === port) writes.push(Array.isArray(args[0]) ? args[0].length : 1);
        return original[name].apply(this, args);
      };
    try {
      void channel.receipt(receipt('wrk_d'), { timeoutMs: 5_000 }).catch(() => undefined);
      expect(channel.grant(1)).toBe(true);
      await expect.poll(() => server.received.map((m) => m.type)).toEqual(['receipt', 'grant']);
    } finally {
      Object.assign(proto, original);
    }
    expect(writes).toHaveLength(1);
  });
});
