import { createHmac, randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { canonicalJson, sha256Hex } from '@svc/protocol';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  watchPolls,
  type TestApp,
  type TestBuyer,
  type TestNode,
  type WorkItem,
} from '../../../test/harness.js';
import type { Queryable } from '../../platform/db/index.js';
import type { WriteKind } from '../../platform/writer.js';
import { reconcileAccount } from '../billing/service.js';
import { checkTicket, issueTicket, TICKET_MAX_AGE_MS, type WorkTicket } from './ticket.js';

const CHAT = { model: 'tinyllama', messages: [{ role: 'user', content: 'dispatched before its opening' }] };
const OUTPUT = JSON.stringify({
  content: 'hi',
  finish_reason: 'stop',
  usage: { prompt_tokens: 3, completion_tokens: 1 },
});

/** What the store holds for a request (read directly, not through the instance). */
async function stored(db: Queryable, id: string) {
  const { rows } = await db.query<{
    requests: number;
    status: string | null;
    rebuilt: boolean | null;
    work: number;
    holds: number;
    receipts: number;
    charges: number;
    run: string | null;
  }>(
    `SELECT (SELECT count(*)::int FROM gateway_requests WHERE id = $1) AS requests,
            (SELECT status FROM gateway_requests WHERE id = $1) AS status,
            (SELECT metadata ? 'rebuilt_from_ticket' FROM gateway_requests WHERE id = $1) AS rebuilt,
            (SELECT count(*)::int FROM work_items WHERE job_id = $1) AS work,
            (SELECT count(*)::int FROM credit_holds WHERE ref = $1) AS holds,
            (SELECT count(*)::int FROM receipts WHERE job_id = $1) AS receipts,
            (SELECT count(*)::int FROM credit_transactions WHERE ref = $1 AND tx_type = 'charge') AS charges,
            (SELECT status FROM evidence_runs WHERE job_id = $1) AS run`,
    [id],
  );
  return rows[0];
}

/** The receipt fields of `OUTPUT`, carried inline as the agent sends gateway work. */
const inline = (ticket?: unknown) => ({
  result_hash: sha256Hex(OUTPUT),
  metering_units: 4,
  result: {
    output: OUTPUT,
    encoding: 'utf8',
    content_type: 'application/json',
    result_hash: sha256Hex(OUTPUT),
    metering_units: 4,
    usage: { prompt_tokens: 3, completion_tokens: 1 },
  },
  ...(ticket === undefined ? {} : { ticket }),
});

/**
 * The opening behind dispatch (docs/decisions.md): gateway work reaches its node before the
 * opening commits, carrying a ticket from which a receipt rebuilds a lost opening, once.
 */
describe('work tickets', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;
  beforeEach(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']), {
      models: ['tinyllama'],
    });
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await t.close();
  });

  it('a lost opening is rebuilt from the ticket with the receipt; the writer opening landing later writes nothing; the receipt sent again is applied once', async () => {
    const polls = watchPolls(t.ctx);
    const polled = node.poll({ waitMs: 20_000 });
    await polls.until(1);
    // The opening's write is held back (as if this instance died before its flush): it lands later.
    const { writer } = t.ctx;
    const enqueueAs = writer.enqueueAs.bind(writer);
    let heldBack: { kind: WriteKind<unknown, unknown>; item: unknown } | undefined;
    let land: (written: Promise<unknown>) => void = () => undefined;
    vi.spyOn(writer, 'enqueueAs').mockImplementation(((kind: WriteKind<unknown, unknown>, item: unknown) => {
      // Only an opening (the gateway's one writer kind also carries its receipts: gateway/flush.ts).
      const opening = kind.name === 'gateway records' && typeof item === 'object' && item !== null && 'opening' in item;
      if (heldBack || !opening) return enqueueAs(kind, item);
      heldBack = { kind, item };
      return new Promise<unknown>((resolve) => (land = resolve));
    }) as typeof writer.enqueueAs);
    const asked = t.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: bearer(buyer.apiKey),
      payload: CHAT,
    });
    const [work] = await polled;
    if (!work?.ticket) throw new Error('the work came without a ticket');
    expect(work.ticket).toMatchObject({
      org_id: buyer.orgId,
      buyer_id: buyer.buyerId,
      request_id: work.job_id,
      work_id: work.work_id,
      node_id: node.nodeId,
      type: 'chat',
      model: 'tinyllama',
    });
    // Handed over with nothing in the store yet.
    expect(await stored(t.ctx.db, work.job_id)).toMatchObject({ requests: 0, work: 0 });

    const receipt = await node.receipt(work, inline(work.ticket));
    expect(receipt.statusCode).toBe(200);
    const answer = await asked;
    expect(answer.statusCode).toBe(200);
    expect(answer.json()).toMatchObject({ id: work.job_id, svc_receipt_id: receipt.json().id });
    const rebuilt = {
      requests: 1,
      status: 'completed',
      rebuilt: true,
      work: 1,
      // No hold: its charge is drawn from the unreserved balance (rebuild.ts).
      holds: 0,
      receipts: 1,
      charges: 1,
      run: 'signed',
    };
    expect(await stored(t.ctx.db, work.job_id)).toEqual(rebuilt);

    // The writer's own opening lands after the rebuild: it finds the request and writes nothing.
    if (!heldBack) throw new Error('no opening was queued');
    const late = enqueueAs(heldBack.kind, heldBack.item);
    land(late);
    await late;
    expect(await stored(t.ctx.db, work.job_id)).toEqual(rebuilt);

    // The node sends its receipt again (it did not hear the answer): applied once.
    const again = await node.receipt(work, inline(work.ticket));
    expect(again.statusCode).toBe(409);
    expect(await stored(t.ctx.db, work.job_id)).toEqual(rebuilt);
    const audit = await reconcileAccount(t.ctx.db, buyer.orgId);
    expect([audit.held_cents, audit.consistent]).toEqual([0, true]);
  }, 60_000);

  it('a receipt for unknown work is refused without a valid ticket: forged, expired, for another node; nothing is written', async () => {
    const other = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']), {
      models: ['tinyllama'],
    });
    let n = 0;
    const ticketFor = (fields: Partial<WorkTicket> = {}) => {
      n++;
      return issueTicket(t.ctx.secrets, {
        org_id: buyer.orgId,
        buyer_id: buyer.buyerId,
        request_id: `chatcmpl-01jd4x8k2m7q9w3e5r6t8y0u${n}a`,
        type: 'chat',
        model: 'tinyllama',
        stream: false,
        max_cost_micro: 40_000,
        jurisdiction: null,
        strict_jurisdiction: null,
        requires_tee: false,
        node_id: node.nodeId,
        work_id: `wrk_01jd4x8k2m7q9w3e5r6t8y0u${n}a`,
        issued_at: new Date().toISOString(),
        ...fields,
      });
    };
    const send = async (ticket: WorkTicket | undefined, as: WorkTicket = ticket ?? ticketFor()) => {
      const work = { work_id: as.work_id, job_id: as.request_id, model: 'tinyllama' } as WorkItem;
      const res = await node.receipt(work, inline(ticket));
      return { status: res.statusCode, body: res.json() as { message?: string }, id: as.request_id };
    };

    const forged = { ...ticketFor(), max_cost_micro: 40_000_000 };
    const expired = ticketFor({ issued_at: new Date(Date.now() - TICKET_MAX_AGE_MS - 60_000).toISOString() });
    const elsewhere = ticketFor({ node_id: other.nodeId });
    const refusals = [
      [await send(forged), 403, 'does not verify'],
      [await send(expired), 403, 'has expired'],
      [await send(elsewhere), 403, 'names another node'],
      [await send(undefined), 404, 'no work for'],
    ] as const;
    for (const [res, status, why] of refusals) {
      expect({ status: res.status, why: res.body.message?.includes(why) }).toEqual({ status, why: true });
      expect(await stored(t.ctx.db, res.id)).toMatchObject({ requests: 0, work: 0, holds: 0, receipts: 0 });
    }
    // The same receipt with a valid ticket is applied: the refusals above are the ticket's.
    const valid = await send(ticketFor());
    expect(valid.status).toBe(200);
    expect(await stored(t.ctx.db, valid.id)).toMatchObject({ requests: 1, status: 'completed', receipts: 1 });
  }, 60_000);
});

describe('the ticket MAC', () => {
  const fields: Omit<WorkTicket, 'mac'> = {
    org_id: 'org_01jd4x8k2m7q9w3e5r6t8y0u1a',
    buyer_id: 'byr_01jd4x8k2m7q9w3e5r6t8y0u1a',
    request_id: 'chatcmpl-01jd4x8k2m7q9w3e5r6t8y0u1a',
    type: 'chat',
    model: 'tinyllama',
    stream: false,
    max_cost_micro: 40_000,
    jurisdiction: null,
    strict_jurisdiction: 'US',
    requires_tee: false,
    node_id: 'node_01jd4x8k2m7q9w3e5r6t8y0u1a',
    work_id: 'wrk_01jd4x8k2m7q9w3e5r6t8y0u1a',
    issued_at: '2026-11-25T12:00:00.000Z',
  };
  const expect_ = { nodeId: fields.node_id, requestId: fields.request_id, workId: fields.work_id };
  const now = Date.parse(fields.issued_at);
  /** The MAC as specified: HMAC(HMAC(secret, label), JCS(fields)), derived afresh. */
  const reference = (secret: Buffer) =>
    createHmac('sha256', createHmac('sha256', secret).update('svc-work-tickets-v1').digest())
      .update(canonicalJson(fields))
      .digest('hex');
  const refusal = (secrets: { sessionSecret: Buffer }, ticket: WorkTicket) => {
    try {
      checkTicket(secrets, ticket, expect_, now);
      return 'accepted';
    } catch (err) {
      return (err as Error).message;
    }
  };

  it('is the specified HMAC under the current secret: a reloaded or rotated secret signs and checks anew', () => {
    const first = { sessionSecret: randomBytes(32) };
    const ticket = issueTicket(first, fields);
    expect(ticket.mac).toBe(reference(first.sessionSecret));
    expect(issueTicket(first, fields).mac).toBe(ticket.mac);
    expect(refusal(first, ticket)).toBe('accepted');

    // The same bytes loaded again (another instance, a restart) verify the same ticket.
    const reloaded = { sessionSecret: Buffer.from(first.sessionSecret) };
    expect(refusal(reloaded, ticket)).toBe('accepted');

    // A new secret: its own MACs, and the old ticket no longer verifies.
    const rotated = { sessionSecret: randomBytes(32) };
    expect(issueTicket(rotated, fields).mac).toBe(reference(rotated.sessionSecret));
    expect(refusal(rotated, ticket)).toBe('the work ticket does not verify');

    // A secret changed in place is derived again, never served from what its old bytes gave.
    first.sessionSecret.fill(7);
    expect(issueTicket(first, fields).mac).toBe(reference(Buffer.alloc(32, 7)));
    expect(refusal(first, ticket)).toBe('the work ticket does not verify');
  });
});
