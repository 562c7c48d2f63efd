import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { createLedger, type Ledger } from './service.js';

describe('billing routes', () => {
  let t: TestApp;
  let ledger: Ledger;
  let buyer: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp();
    ledger = createLedger(t.ctx.db);
    buyer = await signUp(t.app);
  });
  afterAll(() => t.close());

  const get = (url: string, who: TestBuyer = buyer) =>
    t.app.inject({ method: 'GET', url, headers: bearer(who.apiKey) });

  it('balance after sign-up shows the 500-cent free tier, in cents and CAD', async () => {
    const fresh = await signUp(t.app);
    const res = await get('/api/v1/billing/balance', fresh);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      currency: 'CAD',
      balance_cents: 500,
      balance: 5,
      held_cents: 0,
      held: 0,
      available_cents: 500,
      available: 5,
      debt_cents: 0,
      debt: 0,
      free_tier_granted_cents: 500,
    });
  });

  it('balance reflects holds and charges', async () => {
    const fresh = await signUp(t.app);
    await ledger.hold(fresh.orgId, 125);
    await ledger.charge(fresh.orgId, 1_005_000);
    const body = (await get('/api/v1/billing/balance', fresh)).json();
    expect(body).toMatchObject({
      balance_cents: 400,
      balance: 4,
      held_cents: 125,
      held: 1.25,
      available_cents: 275,
      available: 2.75,
      free_tier_granted_cents: 500,
    });
  });

  it('lists transactions newest first, paged with limit, offset and total', async () => {
    const fresh = await signUp(t.app);
    for (let i = 1; i <= 5; i++)
      await ledger.credit(fresh.orgId, i, { txType: 'topup', description: `top-up ${i}`, ref: `pay_${i}` });
    const all = (await get('/api/v1/billing/transactions', fresh)).json();
    expect(all).toMatchObject({ total: 6, limit: 50, offset: 0 });
    expect(all.transactions.map((x: { amount_cents: number }) => x.amount_cents)).toEqual([5, 4, 3, 2, 1, 500]);
    expect(all.transactions[0]).toEqual({
      id: expect.stringMatching(/^tx_/),
      tx_type: 'topup',
      amount_cents: 5,
      amount_micro: 50_000,
      amount: 0.05,
      free_micro: 0,
      hold_cents: 0,
      debt_cents: 0,
      balance_after: 515,
      description: 'top-up 5',
      ref: 'pay_5',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(all.transactions[5]).toMatchObject({
      tx_type: 'free_tier',
      amount_cents: 500,
      amount_micro: 5_000_000,
      free_micro: 5_000_000,
      balance_after: 500,
      ref: null,
    });

    const page = (await get('/api/v1/billing/transactions?limit=2&offset=1', fresh)).json();
    expect(page).toMatchObject({ total: 6, limit: 2, offset: 1 });
    expect(page.transactions.map((x: { description: string }) => x.description)).toEqual(['top-up 4', 'top-up 3']);
    const past = (await get('/api/v1/billing/transactions?limit=2&offset=6', fresh)).json();
    expect(past).toEqual({ transactions: [], total: 6, limit: 2, offset: 6 });
  });

  it('refuses limits outside 1..200 and unknown parameters with 400', async () => {
    for (const query of ['limit=0', 'limit=201', 'limit=abc', 'offset=-1', 'format=xml', 'page=2']) {
      const res = await get(`/api/v1/billing/transactions?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json().error).toBe('invalid_request');
    }
    expect((await get('/api/v1/billing/transactions?limit=200')).statusCode).toBe(200);
  });

  it('format=csv returns the same page as RFC 4180 CSV', async () => {
    const fresh = await signUp(t.app);
    const tricky = await ledger.credit(fresh.orgId, 250, {
      txType: 'refund',
      description: 'refund for "job, 7"\nsee ticket',
      ref: 'job_7',
    });
    const res = await get('/api/v1/billing/transactions?format=csv&limit=1', fresh);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8; header=present');
    expect(res.headers['content-disposition']).toBe('attachment; filename="transactions-0-1.csv"');
    expect(res.body).toBe(
      'id,created_at,tx_type,amount_cents,balance_after,description,ref\r\n' +
        `${tricky.id},${tricky.created_at.toISOString()},refund,250,750,"refund for ""job, 7""\nsee ticket",job_7\r\n`,
    );
    const full = await get('/api/v1/billing/transactions?format=csv', fresh);
    const lines = full.body.split('\r\n');
    expect(lines).toHaveLength(4); // header, two rows, the empty string after the last CRLF
    expect(lines[2]).toMatch(/^tx_\w+,[^,]+,free_tier,500,500,Free tier: one-time grant for a new organization,$/);
    expect(lines[3]).toBe('');
  });

  it('spend gives one entry per UTC day of the window, today last, with charges and credits', async () => {
    const fresh = await signUp(t.app);
    await ledger.charge(fresh.orgId, 1_230_000); // 123 cents
    await ledger.charge(fresh.orgId, 70_000); // 7 cents
    const res = await get('/api/v1/billing/spend?days=7', fresh);
    expect(res.statusCode).toBe(200);
    const body = res.json() as {
      days: number;
      since: string;
      series: { date: string; spend_cents: number; credit_cents: number }[];
      total_spend_cents: number;
      total_credit_cents: number;
    };
    expect(body.days).toBe(7);
    expect(body.series).toHaveLength(7);
    const today = new Date().toISOString().slice(0, 10);
    expect(body.series.at(-1)).toEqual({ date: today, spend_cents: 130, credit_cents: 500 });
    expect(body.series.slice(0, 6).every((d) => d.spend_cents === 0 && d.credit_cents === 0)).toBe(true);
    expect(body).toMatchObject({ currency: 'CAD', total_spend_cents: 130, total_credit_cents: 500 });
    expect(body.since).toBe(`${body.series[0]?.date}T00:00:00.000Z`);
    // Another organization's ledger is not counted.
    expect((await get('/api/v1/billing/spend?days=1', buyer)).json().series[0].spend_cents).not.toBe(130);
    expect((await get('/api/v1/billing/spend?days=0', fresh)).statusCode).toBe(400);
    expect((await get('/api/v1/billing/spend?days=367', fresh)).statusCode).toBe(400);
    expect((await get('/api/v1/billing/spend', fresh)).json().series).toHaveLength(30);
  });
});
