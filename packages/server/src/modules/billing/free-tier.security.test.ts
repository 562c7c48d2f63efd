import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, createTestNode, signUp, type TestApp } from '../../../test/harness.js';
import { payableEarnings } from './service.js';

/**
 * Free-tier laundering (issue 19, point 5): sign-ups that each grant the free tier are limited per
 * client address, a node cannot ask more than the price ceiling, and work paid with free-tier
 * credit never becomes payable operator earnings (docs/billing.md, "Where free-tier credit can go").
 */
describe('free-tier credit cannot be laundered into payable earnings', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_SIGNUP_RATE_LIMIT_BURST: '5', SVC_SIGNUP_RATE_LIMIT_PER_HOUR: '5' } });
  });
  afterAll(() => t.close());

  const signupFrom = (address: string, n: number) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/signup',
      remoteAddress: address,
      payload: { email: `sybil${n}-${address}@laundry.test`, password: 'a long enough password' },
    });
  const count = async (sql: string) => (await t.ctx.db.query<{ n: number }>(sql)).rows[0]?.n;

  it('the 6th sign-up from one address within a minute is 429 with Retry-After and gets no account and no credit', async () => {
    for (let i = 1; i <= 5; i++) expect((await signupFrom('203.0.113.7', i)).statusCode).toBe(201);
    const before = {
      orgs: await count('SELECT count(*)::int AS n FROM organizations'),
      grants: await count("SELECT count(*)::int AS n FROM credit_transactions WHERE tx_type = 'free_tier'"),
    };
    const sixth = await signupFrom('203.0.113.7', 6);
    expect(sixth.statusCode).toBe(429);
    expect(sixth.json()).toMatchObject({ code: 429, error: 'rate_limited' });
    expect(Number(sixth.headers['retry-after'])).toBeGreaterThan(60);
    expect(await count('SELECT count(*)::int AS n FROM organizations')).toBe(before.orgs);
    expect(await count("SELECT count(*)::int AS n FROM credit_transactions WHERE tx_type = 'free_tier'")).toBe(
      before.grants,
    );
    expect(await count("SELECT count(*)::int AS n FROM buyers WHERE email = 'sybil6-203.0.113.7@laundry.test'")).toBe(
      0,
    );
    // Another address is not affected.
    expect((await signupFrom('198.51.100.9', 1)).statusCode).toBe(201);
  });

  it("a node asking more than the ceiling is refused at registration (400 naming the kind's price)", async () => {
    const attacker = await signUp(t.app);
    const key = await createKey(t.app, attacker, ['operator']);
    // Kind 1's catalogue maximum is 1.2 micro-CAD per token; the default ceiling is 10 times that.
    await expect(createTestNode(t.app, key, { price_micro_per_unit: { '1': 1_000 } })).rejects.toThrow(
      /400 .*price_micro_per_unit for kind 1 is 1000 micro-CAD; the most a node may ask is 12/,
    );
    expect((await createTestNode(t.app, key, { price_micro_per_unit: { '1': 12 } })).nodeId).toMatch(/^node_/);
  });

  it("the attack: a sybil funded only by the free tier pays the attacker's own node; the attacker's payable earnings stay 0", async () => {
    const attacker = await signUp(t.app);
    const attackerKey = await createKey(t.app, attacker, ['operator']);
    // Priced at the ceiling, pinned to a country only the attacker serves.
    const node = await createTestNode(t.app, attackerKey, {
      country: 'IS',
      price_micro_per_unit: { '1': 12 },
      models: ['svc-llama-3.2-3b'],
    });
    const sybil = await signUp(t.app);
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(sybil.apiKey),
      payload: {
        kind: 1,
        budget: 5,
        max_price_per_unit: 0.000012,
        currency: 'CAD',
        model: 'svc-llama-3.2-3b',
        inline_text: Array.from({ length: 13 }, (_, i) => `launder me ${i}`).join('\n'),
        strict_jurisdiction: 'IS',
      },
    });
    expect(submit.statusCode).toBe(201);
    const [work] = await node.poll({ waitMs: 2000 });
    if (!work) throw new Error('no work');
    // 420,000 tokens (13 prompts' metering bound is 429,000 and more) at 12 micro-CAD: 5.04 CAD asked, capped by the 5 CAD budget: the whole free tier.
    expect(
      (await node.complete(work, JSON.stringify({ results: [{ index: 0, content: 'x' }] }), 420_000)).statusCode,
    ).toBe(200);
    const job = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs/${submit.json().job_id as string}`,
        headers: bearer(sybil.apiKey),
      })
    ).json();
    expect(job).toMatchObject({ status: 'completed', charged_cents: 500, charged_micro: 5_000_000 });

    const payable = await payableEarnings(t.ctx.db, attacker.orgId);
    expect(payable).toMatchObject({
      earned_micro: 4_250_000,
      non_payable_micro: 4_250_000,
      payable_earned_micro: 0,
      payable_cents: 0,
    });
    const earnings = (
      await t.app.inject({ method: 'GET', url: '/api/v1/nodes/earnings', headers: bearer(attackerKey) })
    ).json();
    expect(earnings).toMatchObject({ total_cents: 425, payable_cents: 0, payable: 0, non_payable_micro: 4_250_000 });

    // Spending the promotional earnings on another sybil job on its own node earns nothing payable either.
    const again = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(attacker.apiKey),
      payload: {
        kind: 1,
        budget: 9,
        max_price_per_unit: 0.000012,
        currency: 'CAD',
        model: 'svc-llama-3.2-3b',
        inline_text: 'round two\n',
        strict_jurisdiction: 'IS',
      },
    });
    expect(again.statusCode).toBe(201);
    const [second] = await node.poll({ waitMs: 2000 });
    if (!second) throw new Error('no work');
    expect(
      (await node.complete(second, JSON.stringify({ results: [{ index: 0, content: 'y' }] }), 30_000)).statusCode,
    ).toBe(200);
    expect(await payableEarnings(t.ctx.db, attacker.orgId)).toMatchObject({
      payable_earned_micro: 0,
      payable_cents: 0,
    });
  });
});
