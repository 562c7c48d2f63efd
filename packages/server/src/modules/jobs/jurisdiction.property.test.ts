import fc from 'fast-check';
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
import { unmetConstraint, type MatchJob, type MatchNode } from './matching.js';

const COUNTRIES = ['CA', 'US', 'FR', 'DE'] as const;

const nodeArb = fc.record({
  country: fc.constantFrom(...COUNTRIES),
  attested: fc.boolean(),
  green: fc.boolean(),
  price: fc.constantFrom(0.05, 0.5, 5),
});
const jobArb = fc.record({
  pin: fc.option(fc.constantFrom(...COUNTRIES), { nil: undefined }),
  tee: fc.boolean(),
  green: fc.boolean(),
});

describe('jurisdiction pins are never violated', () => {
  it('holds for the matching rule over random nodes and jobs', () => {
    fc.assert(
      fc.property(nodeArb, jobArb, fc.double({ min: 0.01, max: 10, noNaN: true }), (n, j, maxPrice) => {
        const node: MatchNode = {
          country: n.country,
          region: null,
          attestation_verified: n.attested,
          green: n.green,
          reputation: 100,
          capabilities: ['cpu'],
          gpu_model: null,
          cpu_cores: 4,
          ram_bytes: 0,
          vram_bytes: 0,
          models: ['tinyllama'],
          price_micro_per_unit: { '1': n.price },
        };
        const job: MatchJob = {
          kind: 1,
          execution_pool: j.tee ? 'sovereign' : 'public',
          model: 'tinyllama',
          strict_jurisdiction: j.pin ?? null,
          region: null,
          green_only: j.green,
          min_reputation: null,
          required_capabilities: [],
          max_price_micro_per_unit: maxPrice,
        };
        const eligible = unmetConstraint(job, node) === undefined;
        if (eligible && j.pin) expect(node.country).toBe(j.pin);
        if (eligible && j.tee) expect(node.attestation_verified).toBe(true);
        if (eligible) expect(n.price).toBeLessThanOrEqual(maxPrice);
        // And the converse for the pin: a node in the pinned country with nothing else against it matches.
        if (j.pin && node.country === j.pin && !j.tee && !j.green && n.price <= maxPrice) expect(eligible).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  describe('through the real scheduler and store', () => {
    let t: TestApp;
    let buyer: TestBuyer;
    let operatorKey: string;
    beforeAll(async () => {
      t = await createTestApp({ env: { SVC_RATE_LIMIT_BURST: '1000000', SVC_ORG_RATE_LIMIT_BURST: '1000000' } });
      buyer = await signUp(t.app);
      await t.ctx.ledger.credit(buyer.orgId, 1_000_000, { txType: 'topup', description: 'test credits' });
      operatorKey = await createKey(t.app, await signUp(t.app), ['operator']);
    });
    afterAll(() => t.close());

    it('assigns no job outside its pinned country, over random node fleets and job mixes', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.constantFrom(...COUNTRIES), { minLength: 1, maxLength: 4 }),
          fc.array(fc.option(fc.constantFrom(...COUNTRIES), { nil: undefined }), { minLength: 1, maxLength: 6 }),
          async (fleet, pins) => {
            const nodes = await Promise.all(
              fleet.map((country) => createTestNode(t.app, operatorKey, { country, max_concurrency: 8 })),
            );
            for (const pin of pins) {
              const res = await t.app.inject({
                method: 'POST',
                url: '/api/v1/marketplace/jobs',
                headers: bearer(buyer.apiKey),
                payload: {
                  kind: 1,
                  budget: 0.01,
                  max_price_per_unit: 0.00001,
                  currency: 'CAD',
                  inline_text: 'x',
                  ...(pin ? { strict_jurisdiction: pin } : {}),
                },
              });
              expect(res.statusCode).toBe(201);
            }
            await Promise.all(nodes.map((n) => n.poll({ max: 8 })));
          },
        ),
        { numRuns: 12 },
      );
      const { rows } = await t.ctx.db.query<{ pin: string | null; country: string }>(
        "SELECT j.spec->>'strict_jurisdiction' AS pin, n.country FROM work_items w JOIN jobs j ON j.id = w.job_id JOIN nodes n ON n.id = w.node_id",
      );
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.filter((r) => r.pin !== null && r.pin !== r.country)).toEqual([]);
    });
  });
});
