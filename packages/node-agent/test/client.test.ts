import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  canonicalJson,
  generateEd25519,
  NODE_HEADERS,
  publicKeyHex,
  registerMessage,
  requestMessage,
  sha256Hex,
  verifyHex,
} from '@svc/protocol';
import { ControlPlaneError, createNodeClient, loadOrCreateIdentity, type NodeIdentity } from '../src/index.js';
import { startFakeControlPlane, type FakeControlPlane } from './fake-control-plane.js';
import { followersOf } from './helpers.js';

describe('node protocol client', () => {
  let cp: FakeControlPlane;
  let dir: string;
  let identity: NodeIdentity;
  beforeAll(async () => {
    cp = await startFakeControlPlane();
    dir = await mkdtemp(join(tmpdir(), 'svc-node-client-'));
    identity = await loadOrCreateIdentity(dir);
  });
  afterAll(async () => {
    await cp.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('registers with the operator key and a body signature that verifies over JCS', async () => {
    const client = createNodeClient({ server: cp.url, apiKey: cp.apiKey, identity });
    const answer = await client.register({ country: 'CA', models: ['tinyllama'], cpu_cores: 4, name: undefined });
    expect(answer.node_id).toMatch(/^node_/);
    expect(client.nodeId).toBe(answer.node_id);
    const [request] = cp.calls('register');
    expect(request?.headers.authorization).toBe(`Bearer ${cp.apiKey}`);
    const body = JSON.parse(request?.body.toString() ?? '') as Record<string, unknown>;
    expect(body).not.toHaveProperty('name');
    expect(body.pubkey).toBe(identity.publicKeyHex);
    const { signature, ...unsigned } = body;
    const message = `SVC-NODE-REGISTER-v1\n${identity.publicKeyHex}\n${sha256Hex(canonicalJson(unsigned))}`;
    expect(registerMessage(identity.publicKeyHex, body).toString()).toBe(message);
    expect(verifyHex(Buffer.from(message), String(signature), identity.publicKeyHex)).toBe(true);
    // Registering again keeps the node id.
    expect((await client.register({ country: 'CA' })).node_id).toBe(answer.node_id);
  });

  it('refuses a wrong operator key with a typed error from the {code, error, message} body', async () => {
    const client = createNodeClient({ server: cp.url, apiKey: 'svc_wrong', identity });
    const err = await client.register({}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ControlPlaneError);
    expect(err).toMatchObject({
      status: 401,
      error: 'unauthorized',
      message: 'operator API key required',
      retryable: false,
    });
  });

  it('signs GET with its query and POST with its exact body bytes', async () => {
    const client = createNodeClient({ server: cp.url, apiKey: cp.apiKey, identity });
    const { node_id } = await client.register({});
    const before = cp.requests.length;
    expect(await client.pollWork({ waitMs: 0, max: 3 })).toEqual({ items: [], rejected: [] });
    expect(await client.heartbeat({ load: 0.5, active_work: [], models: ['phi-4'] })).toEqual({
      cancel: [],
      lease_expires_at: expect.any(String),
    });
    const [get, post] = cp.requests.slice(before);
    expect(get?.status).toBe(200);
    expect(post?.status).toBe(200);
    expect(get?.path).toBe('/api/v1/node/work?wait_ms=0&max=3');
    for (const r of [get, post]) {
      if (r === undefined) throw new Error('missing request');
      expect(r.headers['x-svc-node']).toBe(node_id);
      const timestamp = String(r.headers['x-svc-timestamp']);
      expect(Math.abs(Number(timestamp) - Date.now())).toBeLessThan(5_000);
      const message = requestMessage({ method: r.method, pathWithQuery: r.path, timestamp, body: r.body });
      expect(verifyHex(message, String(r.headers['x-svc-signature']), identity.publicKeyHex)).toBe(true);
    }
    expect(get?.body.length).toBe(0);
    expect(post?.body.toString()).toBe('{"load":0.5,"active_work":[],"models":["phi-4"]}');
  });

  it('is refused (401) when the signature is not by the registered key', async () => {
    const good = createNodeClient({ server: cp.url, apiKey: cp.apiKey, identity });
    const { node_id } = await good.register({});
    const { privateKey } = generateEd25519();
    const forger = createNodeClient({
      server: cp.url,
      apiKey: cp.apiKey,
      identity: { privateKey, publicKeyHex: publicKeyHex(privateKey) },
      nodeId: node_id,
    });
    await expect(forger.heartbeat({ load: 0, active_work: [] })).rejects.toMatchObject({
      status: 401,
      message: 'bad signature',
    });
    const skewed = createNodeClient({
      server: cp.url,
      apiKey: cp.apiKey,
      identity,
      nodeId: node_id,
      now: () => Date.now() - 61_000,
    });
    await expect(skewed.heartbeat({ load: 0, active_work: [] })).rejects.toMatchObject({
      status: 401,
      message: 'clock skew',
    });
  });

  it('turns timeouts, unreachable servers and non-JSON errors into ControlPlaneErrors', async () => {
    const hanging: typeof fetch = (_url, init) =>
      new Promise((_resolve, reject) =>
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason as Error)),
      );
    const slow = createNodeClient({
      server: cp.url,
      apiKey: 'k',
      identity,
      nodeId: 'node_x',
      fetch: hanging,
      timeoutMs: 50,
    });
    await expect(slow.heartbeat({ load: 0, active_work: [] })).rejects.toMatchObject({
      status: 0,
      error: 'timeout',
      retryable: true,
    });

    const down = createNodeClient({ server: 'http://127.0.0.1:9', apiKey: 'k', identity, nodeId: 'node_x' });
    await expect(down.heartbeat({ load: 0, active_work: [] })).rejects.toMatchObject({
      status: 0,
      error: 'network_error',
      retryable: true,
    });

    const proxy: typeof fetch = async () =>
      new Response('<html>bad gateway</html>', { status: 502, headers: { 'retry-after': '2' } });
    const behindProxy = createNodeClient({ server: cp.url, apiKey: 'k', identity, nodeId: 'node_x', fetch: proxy });
    await expect(behindProxy.heartbeat({ load: 0, active_work: [] })).rejects.toMatchObject({
      status: 502,
      error: 'http_502',
      message: '<html>bad gateway</html>',
      retryAfterMs: 2_000,
      retryable: true,
    });

    const controller = new AbortController();
    const aborting = createNodeClient({ server: cp.url, apiKey: 'k', identity, nodeId: 'node_x', fetch: hanging });
    const call = aborting.heartbeat({ load: 0, active_work: [] }, { signal: controller.signal });
    controller.abort(new Error('stopping'));
    await expect(call).rejects.toThrow('stopping');
  });

  it('signs identical calls made in one millisecond with distinct timestamps: none is refused as a replay', async () => {
    // The signature covers method, path, timestamp and body: two identical calls in the same
    // millisecond would carry the same one, which the server refuses as replayed.
    const at = Date.now();
    const client = createNodeClient({ server: cp.url, apiKey: cp.apiKey, identity, now: () => at });
    await client.register({ country: 'CA' });
    const before = cp.calls('heartbeat').length;
    for (let i = 0; i < 3; i++) await client.heartbeat({ load: 0, active_work: [] });
    const stamps = cp
      .calls('heartbeat')
      .slice(before)
      .map((c) => Number(c.headers[NODE_HEADERS.timestamp]));
    expect(stamps).toEqual([at, at + 1, at + 2]);
  });

  it('keeps nothing of a finished call on the signal every call follows (the agent stop)', async () => {
    const client = createNodeClient({ server: cp.url, apiKey: cp.apiKey, identity });
    await client.register({ country: 'CA' });
    const stop = new AbortController();
    for (let i = 0; i < 40; i++) await client.heartbeat({ load: 0, active_work: [] }, { signal: stop.signal });
    // Node 20's AbortSignal.any kept one composite a call in the stop signal for the agent's life.
    expect(followersOf(stop.signal)).toBeLessThanOrEqual(1);
  });

  it('keeps a base path prefix in what it signs and sends', async () => {
    const seen: string[] = [];
    const recording: typeof fetch = async (url) => {
      seen.push(String(url));
      return new Response('{"cancel":[]}', { status: 200 });
    };
    const client = createNodeClient({
      server: 'http://svc.example/prefix/',
      apiKey: 'k',
      identity,
      nodeId: 'node_x',
      fetch: recording,
    });
    await client.uploadResult('wrk_a:1', {
      output: '',
      encoding: 'utf8',
      content_type: 'text/plain',
      result_hash: sha256Hex(''),
      metering_units: 0,
      usage: {},
    });
    expect(seen).toEqual(['http://svc.example/prefix/api/v1/node/work/wrk_a%3A1/result']);
    expect(() => createNodeClient({ server: 'ftp://x', apiKey: 'k', identity })).toThrow(/http/);
  });
});
