import {
  generateEd25519,
  publicKeyHex,
  registerMessage,
  requestMessage,
  sha256Hex,
  signHex,
  signSvc1,
  NODE_HEADERS,
  type WorkItemWire,
} from '@svc/protocol';
import type { KeyObject } from 'node:crypto';
import type { Response } from 'light-my-request';
import type { App } from '../src/app.js';

/**
 * A provider node speaking the real node protocol (docs/node-protocol.md) over `app.inject`:
 * real Ed25519 keys, real signatures. For server tests that need nodes without processes.
 */
export interface TestNode {
  nodeId: string;
  pubkey: string;
  privateKey: KeyObject;
  /** A signed request; `body` is sent as exact JSON bytes. */
  call(
    method: 'GET' | 'POST',
    url: string,
    body?: unknown,
    options?: { timestamp?: number; signature?: string },
  ): Promise<Response>;
  poll(options?: { waitMs?: number; max?: number }): Promise<WorkItem[]>;
  heartbeat(activeWork: string[]): Promise<{ cancel: string[] }>;
  /** Uploads `output` as the result and submits a valid SVC1 receipt for it. */
  complete(work: WorkItem, output: string, units: number): Promise<Response>;
  deliver(work: WorkItem, output: string, units: number): Promise<Response>;
  /** `result`: the result upload carried inline (one call, as the agent sends gateway work). */
  receipt(
    work: WorkItem,
    fields: {
      result_hash: string;
      metering_units: number;
      signature?: string;
      job_id?: string;
      pubkey?: string;
      result?: Record<string, unknown>;
      /** The work ticket returned with the receipt (default: none). */
      ticket?: unknown;
    },
  ): Promise<Response>;
}

/** A work item as the node receives it: the protocol's one shape. */
export type WorkItem = WorkItemWire;

export async function createTestNode(
  app: App,
  operatorKey: string,
  info: Record<string, unknown> = {},
): Promise<TestNode> {
  const { privateKey } = generateEd25519();
  const pubkey = publicKeyHex(privateKey);
  const unsigned = {
    pubkey,
    country: 'CA',
    region: 'ca-central',
    models: ['tinyllama', 'all-MiniLM-L6-v2'],
    capabilities: ['cpu', 'process'],
    cpu_cores: 8,
    ram_bytes: 16 * 2 ** 30,
    max_concurrency: 4,
    ...info,
  };
  const signature = signHex(registerMessage(pubkey, unsigned), privateKey);
  const reg = await app.inject({
    method: 'POST',
    url: '/api/v1/node/register',
    headers: { authorization: `Bearer ${operatorKey}` },
    payload: { ...unsigned, signature },
  });
  if (reg.statusCode !== 200) throw new Error(`node registration failed: ${reg.statusCode} ${reg.body}`);
  const nodeId = (reg.json() as { node_id: string }).node_id;

  const call: TestNode['call'] = async (method, url, body, options = {}) => {
    const bytes = body === undefined ? '' : JSON.stringify(body);
    const timestamp = options.timestamp ?? Date.now();
    const sig =
      options.signature ?? signHex(requestMessage({ method, pathWithQuery: url, timestamp, body: bytes }), privateKey);
    const headers: Record<string, string> = {
      [NODE_HEADERS.node]: nodeId,
      [NODE_HEADERS.timestamp]: String(timestamp),
      [NODE_HEADERS.signature]: sig,
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return app.inject({ method, url, headers, payload: body === undefined ? undefined : bytes });
  };
  const node: TestNode = {
    nodeId,
    pubkey,
    privateKey,
    call,
    async poll({ waitMs = 0, max = 1 } = {}) {
      const res = await call('GET', `/api/v1/node/work?wait_ms=${waitMs}&max=${max}`);
      if (res.statusCode !== 200) throw new Error(`poll failed: ${res.statusCode} ${res.body}`);
      return (res.json() as { work: WorkItem[] }).work;
    },
    async heartbeat(activeWork) {
      const res = await call('POST', '/api/v1/node/heartbeat', { load: 0.1, active_work: activeWork });
      if (res.statusCode !== 200) throw new Error(`heartbeat failed: ${res.statusCode} ${res.body}`);
      return res.json() as { cancel: string[] };
    },
    deliver(work, output, units) {
      return call('POST', `/api/v1/node/work/${work.work_id}/result`, {
        output,
        encoding: 'utf8',
        content_type: 'application/json',
        result_hash: sha256Hex(output),
        metering_units: units,
      });
    },
    receipt(work, fields) {
      const jobId = fields.job_id ?? work.job_id;
      const signature =
        fields.signature ??
        signSvc1(
          {
            job_id: jobId,
            node_public_key_hex: pubkey,
            result_hash_hex: fields.result_hash,
            metering_units: fields.metering_units,
          },
          privateKey,
        );
      const inline = fields.result === undefined ? {} : { result: fields.result };
      return call('POST', '/api/v1/node/receipt', {
        job_id: jobId,
        pubkey: fields.pubkey ?? pubkey,
        result_hash: fields.result_hash,
        metering_units: fields.metering_units,
        signature,
        metadata: { model: work.model, engine: 'test' },
        ...inline,
        ...(fields.ticket === undefined ? {} : { ticket: fields.ticket }),
      });
    },
    async complete(work, output, units) {
      const delivered = await node.deliver(work, output, units);
      if (delivered.statusCode !== 200) return delivered;
      return node.receipt(work, { result_hash: sha256Hex(output), metering_units: units });
    },
  };
  return node;
}
