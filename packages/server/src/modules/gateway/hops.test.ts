import { HOP_CHANNEL, hop } from '@svc/protocol';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';

/**
 * The marks `bench/hops.ts` reads (bench/README.md, "Hop by hop"): a chat request through the
 * gateway and a node on the channel passes each point in order, published on the `svc:hop`
 * diagnostics channel; nothing is published when nobody listens.
 */
describe('the svc:hop marks of a request', () => {
  let f: GatewayFixture;
  beforeAll(async () => {
    f = await startGatewayFixture();
    await f.addNode({ country: 'CA', region: 'ca-central' });
  });
  afterAll(() => f.close());

  it('are passed in order, gateway and node', async () => {
    const client = f.openai();
    const ask = { model: 'tinyllama', messages: [{ role: 'user' as const, content: 'mark my way' }], max_tokens: 8 };
    await client.chat.completions.create(ask); // the node's slots granted, its first work pushed
    const seen: string[] = [];
    const listen = (label: unknown) => seen.push(String(label));
    subscribe(HOP_CHANNEL, listen);
    try {
      await client.chat.completions.create(ask);
    } finally {
      unsubscribe(HOP_CHANNEL, listen);
    }
    const way = [
      'gateway.handler',
      'gateway.pushed',
      'node.work',
      'node.sent',
      'work.received',
      'work.receipt',
      'gateway.answer',
    ];
    // Each in order (other channel messages, acks and grants, add marks of their own between).
    let at = -1;
    for (const label of way) {
      const next = seen.indexOf(label, at + 1);
      expect(next, `${label} after ${seen.slice(0, at + 1).join(', ')}`).toBeGreaterThan(at);
      at = next;
    }
  }, 30_000);

  it('publish nothing when nobody listens, and each label when someone does', () => {
    const seen: unknown[] = [];
    hop('gateway.handler');
    const listen = (label: unknown) => seen.push(label);
    subscribe(HOP_CHANNEL, listen);
    hop('gateway.answer');
    unsubscribe(HOP_CHANNEL, listen);
    hop('gateway.pushed');
    expect(seen).toEqual(['gateway.answer']);
  });
});
