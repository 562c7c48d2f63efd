import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { createLedger, reconcileAccount, type Ledger } from './service.js';

/** One step of a random workload: a direct charge, or a hold that is settled or released. */
type Step =
  | { kind: 'charge'; usage: number }
  | { kind: 'settle'; usage: number; slackCents: number }
  | { kind: 'release'; cents: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('charge' as const), usage: fc.integer({ min: 0, max: 3_000_000 }) }),
  fc.record({
    kind: fc.constant('settle' as const),
    usage: fc.integer({ min: 0, max: 3_000_000 }),
    slackCents: fc.integer({ min: 1, max: 50 }),
  }),
  fc.record({ kind: fc.constant('release' as const), cents: fc.integer({ min: 0, max: 300 }) }),
);

describe('ledger: properties over random workloads (on the store)', () => {
  let t: TestApp;
  let ledger: Ledger;
  let org: string;
  beforeAll(async () => {
    t = await createTestApp();
    ledger = createLedger(t.ctx.db);
    org = (await signUp(t.app)).orgId;
    await ledger.credit(org, 100_000_000, { txType: 'topup', description: 'room for every run' });
  });
  afterAll(() => t.close());

  it('charges never differ from exact usage by a cent, and the balance is the sum of the ledger', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const before = await ledger.balance(org);
        let charged = 0;
        let usage = 0;
        for (const s of steps) {
          if (s.kind === 'charge') {
            charged += (await ledger.charge(org, s.usage)).charged_cents;
            usage += s.usage;
          } else if (s.kind === 'settle') {
            // A hold one cent above the usage plus slack: the cap never bites, so the carry rule is exact.
            const { holdId } = await ledger.hold(org, Math.floor(s.usage / 10_000) + s.slackCents);
            const settled = await ledger.settle(holdId, s.usage);
            expect(settled.charged_cents + settled.released_cents).toBe(Math.floor(s.usage / 10_000) + s.slackCents);
            charged += settled.charged_cents;
            usage += s.usage;
          } else {
            const { holdId } = await ledger.hold(org, s.cents);
            expect(await ledger.release(holdId)).toEqual({ released_cents: s.cents });
          }
        }
        const after = await ledger.balance(org);
        expect(Math.abs(charged * 10_000 - usage)).toBeLessThan(10_000);
        expect(charged * 10_000 + after.carry_micro - before.carry_micro).toBe(usage);
        expect(after.balance_cents).toBe(before.balance_cents - charged);
        expect(after.held_cents).toBe(0);
        const audit = await reconcileAccount(t.ctx.db, org);
        expect(audit.balance_cents).toBe(audit.ledger_sum_cents);
        expect(audit.consistent).toBe(true);
      }),
      { numRuns: 40 },
    );
  });
});
