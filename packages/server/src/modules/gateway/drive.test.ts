import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import type { Principal } from '../../platform/principal.js';
import { chatOutput, prepareChat } from './chat.js';
import { driveRequest, type DriveSink, type Finished } from './service.js';

/** A sink that records what the drive loop told it, in order. */
function recordingSink(stream: boolean) {
  const told: string[] = [];
  const sink: DriveSink<Finished | undefined> = {
    stream,
    started: false,
    write(attempt, content) {
      told.push(`write ${attempt.node.id} ${JSON.stringify(content)}`);
    },
    complete(finished, state) {
      told.push(`complete ${JSON.stringify(state.delivered)}`);
      return finished;
    },
    close(ending) {
      told.push(`close ${ending.answer}`);
      return undefined;
    },
    fail(error) {
      told.push(`fail ${error.message}`);
      return undefined;
    },
  };
  return { sink, told };
}

/**
 * One drive loop for every transport (issue 44, STYLE.md "One loop, the variation as a
 * parameter"): plain and streamed requests are both `driveRequest`, the JSON answer and the SSE
 * stream are sinks it is given.
 */
describe('driveRequest', () => {
  let f: GatewayFixture;
  let principal: Principal;
  let nodeId: string;
  beforeAll(async () => {
    f = await startGatewayFixture();
    nodeId = (await f.addNode({ models: ['tinyllama'] })).nodeId;
    principal = { kind: 'key', orgId: f.buyer.orgId, buyerId: f.buyer.buyerId, role: 'owner', scopes: ['buyer'] };
  });
  afterAll(() => f.close());

  it('streamed: tells the sink each delta on the attempt, then the completion', async () => {
    const { sink, told } = recordingSink(true);
    const call = prepareChat({ model: 'tinyllama', messages: [{ role: 'user', content: 'one two' }], stream: true });
    const finished = await driveRequest(f.server.ctx, principal, call, sink);

    const writes = told.filter((t) => t.startsWith('write '));
    expect(writes.length).toBeGreaterThan(0);
    expect(writes.every((t) => t.startsWith(`write ${nodeId} `))).toBe(true);
    const streamed = writes.map((t) => JSON.parse(t.slice(`write ${nodeId} `.length)) as string).join('');
    expect(streamed).toBe('You said: one two');
    expect(told.at(-1)).toBe(`complete ${JSON.stringify('You said: one two')}`);
    expect(finished?.attempt.node.id).toBe(nodeId);
    expect(finished?.receiptId).toMatch(/^rcpt_/);
    expect(finished?.request.id).toBe(call.id);
  });

  it('plain: no delta reaches the sink, the completion is its answer', async () => {
    const { sink, told } = recordingSink(false);
    const call = prepareChat({ model: 'tinyllama', messages: [{ role: 'user', content: 'three' }] });
    const finished = await driveRequest(f.server.ctx, principal, call, sink);

    expect(told).toEqual([`complete ""`]);
    expect(finished && chatOutput(finished.output).content).toBe('You said: three');
    expect(finished?.receiptId).toMatch(/^rcpt_/);
  });

  it('no node for the model: 503 thrown before anything is dispatched, the sink told nothing', async () => {
    const { sink, told } = recordingSink(true);
    const call = prepareChat({ model: 'phi-4', messages: [{ role: 'user', content: 'x' }], stream: true });
    await expect(driveRequest(f.server.ctx, principal, call, sink)).rejects.toMatchObject({ code: 'no_capacity' });
    expect(told).toEqual([]);
  });
});
