import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import { sha256Hex, signSvc1 } from '@svc/protocol';
import { ConfigError, loadConfig } from '../../platform/config.js';

/**
 * Issue 42 point 2: a job may be granted network egress (`network`), only nodes whose operator
 * allows it (`network:egress`) take such a job; `default_runner_image` comes from the config.
 */
describe("the oci runner's job fields: network, and the platform's default_runner_image", () => {
  let t: TestApp;
  let buyer: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_DEFAULT_RUNNER_IMAGE: 'localhost/svc-runner:1' } });
    buyer = await signUp(t.app, { email: 'runner-fields@test.example' });
  });
  afterAll(async () => t.close());

  const submit = (fields: Record<string, unknown>) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: { kind: 5, budget: 0.5, max_price_per_unit: 0.0001, currency: 'CAD', runner_args: ['true'], ...fields },
    });

  it('ConfigResponse names SVC_DEFAULT_RUNNER_IMAGE; unset it is process; a bad reference stops the server', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/config', headers: bearer(buyer.apiKey) });
    expect(res.json().default_runner_image).toBe('localhost/svc-runner:1');
    expect(loadConfig({}, {}).defaultRunnerImage).toBe('process');
    expect(() => loadConfig({}, { SVC_DEFAULT_RUNNER_IMAGE: 'Not An Image' })).toThrow(ConfigError);
  });

  it('refuses a network other than none or egress, and network on work that runs no buyer code (400, nothing held)', async () => {
    const bad = await submit({ network: 'host' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toContain('network');
    const engine = await submit({
      kind: 1,
      runner_args: undefined,
      inline_text: 'hi',
      model: 'tinyllama',
      network: 'egress',
    });
    expect(engine.statusCode).toBe(400);
    expect(engine.json().details).toEqual([
      { path: '/network', message: 'is used by jobs running buyer code (kinds 5, 6, 7, 8 and 10), not llm_inference' },
    ]);
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/marketplace/jobs', headers: bearer(buyer.apiKey) });
    expect(list.json().total).toBe(0);
  });

  it('a job granted egress goes only to a node declaring network:egress, with network in its payload', async () => {
    const operator = await createKey(t.app, buyer, ['operator'], 'runner fields');
    const closed = await createTestNode(t.app, operator, { capabilities: ['cpu', 'runner:oci'] });
    const open = await createTestNode(t.app, operator, { capabilities: ['cpu', 'runner:oci', 'network:egress'] });
    const granted = await submit({ network: 'egress' });
    expect(granted.statusCode, granted.body).toBe(201);
    expect(await closed.poll()).toEqual([]);
    const [work] = await open.poll();
    expect(work?.job_id).toBe(granted.json().job_id);
    expect(work?.payload).toMatchObject({ runner_args: ['true'], network: 'egress' });
    const plain = await submit({});
    const [other] = await closed.poll();
    expect(other?.job_id).toBe(plain.json().job_id);
    expect(other?.payload).not.toHaveProperty('network');
  });

  it("the job's evidence names the runner and image the receipt claims, labelled the node's claim", async () => {
    const operator = await createKey(t.app, buyer, ['operator'], 'provenance');
    const node = await createTestNode(t.app, operator, {
      capabilities: ['cpu', 'runner:oci', 'image:localhost/svc-runner:1'],
    });
    const submitted = await submit({ image: 'localhost/svc-runner:1' });
    const jobId = String(submitted.json().job_id);
    const [work] = await node.poll();
    if (!work) throw new Error('no work');
    const output = JSON.stringify({ stdout: 'done\n', runner: 'oci', image: 'localhost/svc-runner:1' });
    expect((await node.deliver(work, output, 1)).statusCode).toBe(200);
    const result_hash = sha256Hex(output);
    const signature = signSvc1(
      { job_id: jobId, node_public_key_hex: node.pubkey, result_hash_hex: result_hash, metering_units: 1 },
      node.privateKey,
    );
    const receipt = await node.call('POST', '/api/v1/node/receipt', {
      job_id: jobId,
      pubkey: node.pubkey,
      result_hash,
      metering_units: 1,
      signature,
      metadata: { engine: 'oci', runner: 'oci', image: 'localhost/svc-runner:1' },
    });
    expect(receipt.statusCode, receipt.body).toBe(200);
    const evidence = await t.app.inject({
      method: 'GET',
      url: `/api/v1/jobs/${jobId}/evidence`,
      headers: bearer(buyer.apiKey),
    });
    const events = evidence.json().events as {
      event_type: string;
      summary: string;
      metadata: Record<string, unknown>;
    }[];
    const submittedEvent = events.find((e) => e.event_type === 'receipt.submitted');
    expect(submittedEvent?.metadata.execution).toEqual({
      runner: 'oci',
      image: 'localhost/svc-runner:1',
      source: 'node_claim',
    });
    expect(submittedEvent?.summary).toContain("ran in the oci runner, image localhost/svc-runner:1: the node's claim");
  });

  // Last: the jobs it leaves pending would be polled by the nodes of the tests above.
  it("takes work running no buyer code without network, or with the default 'none' (201)", async () => {
    const job = { kind: 1, runner_args: undefined, inline_text: 'hi', model: 'tinyllama' };
    // The schema's default fills in 'none' when the field is absent: that is not a request for a network.
    const absent = await submit(job);
    expect(absent.statusCode, absent.body).toBe(201);
    const none = await submit({ ...job, network: 'none' });
    expect(none.statusCode, none.body).toBe(201);
  });
});
