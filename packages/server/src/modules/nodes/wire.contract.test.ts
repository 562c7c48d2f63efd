import type { Static } from '@sinclair/typebox';
import {
  parseWorkList,
  type FailUpload,
  type HeartbeatRequest as AgentHeartbeat,
  type ReceiptUpload,
  type RegisterInfo,
  type RegisterResponse,
  type ResultUpload,
  type StreamEventLine,
  type WorkItem as AgentWorkItem,
} from '@svc/node-agent';
import { StoredReceiptSchema, type WorkFailRequestSchema, WorkItemSchema, type StreamEventWire } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Receipt as DashboardReceipt } from '../../../../dashboard/src/types.js';
import { bearer, createKey, createTestApp, createTestNode, signUp, type TestApp } from '../../../test/harness.js';
import type { StreamEvent } from '../gateway/hub.js';
import { type NodeReceiptRequest, Receipt, type ResultRequest } from '../receipts/schemas.js';
import { type HeartbeatRequest, type NodeRegisterRequest, type NodeRegisterResponse, WorkItem } from './schemas.js';

/**
 * The node agent, the dashboard and the server read and write the same wire shapes, defined once
 * in packages/protocol. The type-level checks fail `npm run typecheck` when a type and the
 * server's route schema drift apart; the runtime ones send a real work item through the agent's
 * parser.
 */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const same = <T extends true>(): T | undefined => undefined;

same<Equal<AgentWorkItem, Static<typeof WorkItem>>>();
same<Equal<RegisterInfo, Omit<Static<typeof NodeRegisterRequest>, 'pubkey' | 'signature'>>>();
same<Equal<RegisterResponse, Static<typeof NodeRegisterResponse>>>();
same<Equal<AgentHeartbeat, Static<typeof HeartbeatRequest>>>();
same<Equal<ResultUpload, Static<typeof ResultRequest>>>();
// The HTTP body also takes the hash as result_hash_hex alone (the spec's NodeReceiptRequest): what
// the agent sends is accepted, and the two differ only in result_hash being optional.
same<ReceiptUpload extends Static<typeof NodeReceiptRequest> ? true : false>();
same<Equal<Omit<ReceiptUpload, 'result_hash'>, Omit<Static<typeof NodeReceiptRequest>, 'result_hash'>>>();
same<Equal<FailUpload, Static<typeof WorkFailRequestSchema>>>();
same<Equal<StreamEventLine, StreamEventWire>>();
same<Equal<StreamEvent, StreamEventWire>>();
same<Equal<DashboardReceipt, Static<typeof Receipt>>>();

describe('wire shapes: one definition for the server, the node agent and the dashboard', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('the server route schemas are the protocol schemas under their OpenAPI names', () => {
    const json = (schema: unknown): unknown => JSON.parse(JSON.stringify(schema));
    expect(json(WorkItem)).toEqual({
      ...(json(WorkItemSchema) as object),
      $id: 'WorkItem',
      properties: {
        ...(json(WorkItemSchema.properties) as object),
        lease_expires_at: { type: 'string', format: 'date-time' },
      },
    });
    expect(json(Receipt)).toEqual({ ...(json(StoredReceiptSchema) as object), $id: 'Receipt' });
  });

  it('a work item the server hands out reaches the agent whole: parsed, nothing rejected, no field unknown to the protocol', async () => {
    const buyer = await signUp(t.app);
    const operatorKey = await createKey(t.app, await signUp(t.app), ['operator']);
    const node = await createTestNode(t.app, operatorKey, { country: 'IS' });
    const submitted = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 5,
        budget: 0.05,
        max_price_per_unit: 0.0001,
        currency: 'CAD',
        runner_args: ['true'],
        strict_jurisdiction: 'IS',
      },
    });
    expect(submitted.statusCode, submitted.body).toBe(201);
    const res = await node.call('GET', '/api/v1/node/work?wait_ms=2000&max=1');
    expect(res.statusCode).toBe(200);
    const body: unknown = JSON.parse(res.body);
    const { items, rejected } = parseWorkList(body);
    expect(rejected).toEqual([]);
    expect(items).toEqual((body as { work: unknown[] }).work);
    const [item] = items;
    expect(item).toMatchObject({ job_id: submitted.json().job_id, type: 'job', kind: 5, model: null, stream: false });
    // Every field of the protocol but `ticket`, which only gateway work handed over before its opening committed carries.
    expect(Object.keys(item ?? {}).sort()).toEqual(
      Object.keys(WorkItemSchema.properties)
        .filter((k) => k !== 'ticket')
        .sort(),
    );
  });

  it('the agent refuses an item that does not fit the schema instead of guessing its fields', () => {
    const good = {
      work_id: 'wrk_1',
      job_id: 'job_1',
      type: 'job',
      kind: 5,
      model: null,
      payload: {},
      stream: false,
      lease_expires_at: '2026-11-25T00:00:00.000Z',
    };
    const drifted = { ...good, work_id: 'wrk_2', kind: '5' };
    const missing = { ...good, work_id: 'wrk_3', stream: undefined };
    const unsafe = { ...good, work_id: '../etc' };
    const { items, rejected } = parseWorkList({ work: [good, drifted, missing, unsafe] });
    expect(items).toEqual([good]);
    expect(rejected).toEqual([drifted, missing, unsafe]);
  });
});
