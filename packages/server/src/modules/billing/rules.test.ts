import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../platform/errors.js';
import {
  applyRefund,
  applyUsage,
  availableCents,
  cashCents,
  clampPromo,
  confirmPosting,
  debtRepayment,
  earningReversal,
  freePart,
  insufficientCredits,
  operatorEarning,
  payableCents,
  payoutPosting,
  requireAmount,
  requireTxType,
  type AccountFigures,
} from './rules.js';

describe('applyUsage (the carry arithmetic)', () => {
  it('posts whole cents and carries the remainder', () => {
    expect(applyUsage(1_234_567, 0)).toEqual({ cents: 123, carryMicro: 4_567, capped: false });
    expect(applyUsage(5_433, 4_567)).toEqual({ cents: 1, carryMicro: 0, capped: false });
    expect(applyUsage(0, 9_999)).toEqual({ cents: 0, carryMicro: 9_999, capped: false });
  });

  it('three charges of 3,333 µ post nothing, the fourth posts the cent the carry reached', () => {
    let carry = 0;
    const posted = [3_333, 3_333, 3_333, 3_333].map((usage) => {
      const p = applyUsage(usage, carry);
      carry = p.carryMicro;
      return p.cents;
    });
    expect(posted).toEqual([0, 0, 0, 1]);
    expect(carry).toBe(3_332);
  });

  it('caps at the hold and resets the carry when the cap bites', () => {
    expect(applyUsage(1_234_567, 5_000, 100)).toEqual({ cents: 100, carryMicro: 0, capped: true });
    // Exactly the cap plus a sub-cent remainder is not "over": the remainder is carried.
    expect(applyUsage(1_005_000, 0, 100)).toEqual({ cents: 100, carryMicro: 5_000, capped: false });
    expect(applyUsage(0, 0, 0)).toEqual({ cents: 0, carryMicro: 0, capped: false });
  });

  it('never drifts from exact usage by a cent or more (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5_000_000 }), { maxLength: 200 }), (usages) => {
        let carry = 0;
        let cents = 0;
        for (const usage of usages) {
          const p = applyUsage(usage, carry);
          expect(p.carryMicro).toBeGreaterThanOrEqual(0);
          expect(p.carryMicro).toBeLessThan(10_000);
          cents += p.cents;
          carry = p.carryMicro;
        }
        const exact = usages.reduce((a, b) => a + b, 0);
        expect(cents * 10_000 + carry).toBe(exact);
        expect(Math.abs(cents * 10_000 - exact)).toBeLessThan(10_000);
      }),
      { numRuns: 500 },
    );
  });
});

describe('reversals (a charge proven false, docs/billing.md "Reversals")', () => {
  it('a refund puts balance and carry back where the charge found them (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5_000_000 }), fc.integer({ min: 0, max: 9_999 }), (usage, carry) => {
        const charged = applyUsage(usage, carry);
        expect(applyRefund(usage, charged.carryMicro)).toEqual({ cents: charged.cents, carryMicro: carry });
      }),
      { numRuns: 500 },
    );
    expect(applyRefund(3_333, 9_999)).toEqual({ cents: 0, carryMicro: 6_666 });
    // A capped charge (carry reset to 0) is refunded the cap.
    expect(applyRefund(1_000_000, 0)).toEqual({ cents: 100, carryMicro: 0 });
  });

  it("takes an earning back as far as the operator's balance holds it free; the rest is owed as debt", () => {
    const account = { balance_cents: 508, held_cents: 0, carry_micro: 0, promo_micro: 5_000_000, debt_cents: 0 };
    expect(earningReversal(account, { cents: 8, freeMicro: 0 })).toEqual({
      cents: 8,
      owedCents: 0,
      account: { ...account, balance_cents: 500 },
    });
    // Most of the balance held by a job: what is free is taken, the rest is owed.
    expect(earningReversal({ ...account, balance_cents: 505, held_cents: 500 }, { cents: 8, freeMicro: 0 })).toEqual({
      cents: 5,
      owedCents: 3,
      account: { balance_cents: 500, held_cents: 500, carry_micro: 0, promo_micro: 5_000_000, debt_cents: 3 },
    });
    // A debt already owed is not available: the whole earning is owed on top of it.
    expect(earningReversal({ ...account, balance_cents: 8, debt_cents: 8 }, { cents: 8, freeMicro: 0 })).toMatchObject({
      cents: 0,
      owedCents: 8,
      account: { balance_cents: 8, debt_cents: 16 },
    });
    // A promotional earning leaves the promotional balance.
    const promo = { balance_cents: 508, held_cents: 0, carry_micro: 0, promo_micro: 5_085_000 };
    expect(earningReversal(promo, { cents: 8, freeMicro: 85_000 }).account.promo_micro).toBe(5_000_000);
  });
});

describe('debts (a reversed earning the balance no longer held)', () => {
  const account = { balance_cents: 300, held_cents: 100, carry_micro: 0, promo_micro: 0, debt_cents: 350 };

  it('takes what is free of the balance (not its holds or reservations), paid credit before promotional', () => {
    expect(debtRepayment(account)).toEqual({
      cents: 200,
      account: { ...account, balance_cents: 100, debt_cents: 150 },
    });
    expect(debtRepayment({ ...account, reserved_cents: 150 }).cents).toBe(50);
    expect(debtRepayment({ ...account, debt_cents: 120 }).account).toMatchObject({ balance_cents: 180, debt_cents: 0 });
    // 100 cents of the 300 are promotional: the 200 repaid are the paid ones, the promotional part stays.
    const mixed = { ...account, held_cents: 0, promo_micro: 1_000_000, debt_cents: 200 };
    expect(debtRepayment(mixed).account).toMatchObject({ balance_cents: 100, promo_micro: 1_000_000, debt_cents: 0 });
    expect(debtRepayment({ ...account, debt_cents: 0 })).toEqual({ cents: 0, account: { ...account, debt_cents: 0 } });
  });

  it('is neither available nor paid credit', () => {
    expect(availableCents({ balance_cents: 500, held_cents: 120, debt_cents: 80 })).toBe(300);
    expect(availableCents({ balance_cents: 500, held_cents: 120, debt_cents: 800 })).toBe(0);
    expect(cashCents({ balance_cents: 500, held_cents: 0, carry_micro: 0, promo_micro: 0, debt_cents: 80 })).toBe(420);
  });
});

describe('guards', () => {
  it('available is balance minus holds, never negative', () => {
    expect(availableCents({ balance_cents: 500, held_cents: 120 })).toBe(380);
    expect(availableCents({ balance_cents: 5, held_cents: 9 })).toBe(0);
  });

  it('the 402 says what is available and what is needed', () => {
    const err = insufficientCredits(380, 500);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(402);
    expect(err.code).toBe('insufficient_credits');
    expect(err.message).toBe('insufficient credits: 380 cents available, 500 cents needed; top up or lower the budget');
  });

  it('amounts must be safe integers in range', () => {
    expect(() => requireAmount(0, 'cents')).not.toThrow();
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => requireAmount(bad, 'cents')).toThrow(/cents must be an integer from 0 to/);
    }
    expect(() => requireAmount(0, 'cents', { min: 1 })).toThrow(
      'cents must be an integer from 1 to 9007199254740991, got 0',
    );
    expect(() => requireAmount('5' as unknown as number, 'cents')).toThrow(ApiError);
  });

  it('tx_type is a short snake_case word', () => {
    for (const ok of ['charge', 'topup', 'free_tier', 'refund2']) expect(() => requireTxType(ok)).not.toThrow();
    for (const bad of ['', 'Top-up', 'a b', '9x', 'x'.repeat(33)])
      expect(() => requireTxType(bad)).toThrow(/tx_type must match/);
  });
});

describe('payouts take paid credit only (issue 40, point 3)', () => {
  // The probe's operator: the sign-up grant (500) and free-tier earnings (850) are promotional,
  // 1,000 cents were earned from paid work.
  const probe: AccountFigures = { balance_cents: 2_350, held_cents: 0, carry_micro: 0, promo_micro: 13_500_000 };

  it('the paid credit is the balance less the promotional part, the carry owed, holds and reservations', () => {
    expect(cashCents(probe)).toBe(1_000);
    expect(cashCents({ ...probe, carry_micro: 1 })).toBe(999);
    expect(cashCents({ ...probe, held_cents: 300, reserved_cents: 200 })).toBe(500);
    expect(cashCents({ ...probe, promo_micro: 13_500_001 })).toBe(999);
    expect(cashCents({ ...probe, promo_micro: 30_000_000 })).toBe(0);
  });

  it('a payout leaves the promotional part as it was, and never takes more than the paid credit', () => {
    expect(payoutPosting(probe, 1_000)).toEqual({ ...probe, balance_cents: 1_350 });
    expect(cashCents(payoutPosting(probe, 1_000))).toBe(0);
    expect(() => payoutPosting(probe, 1_001)).toThrow(
      expect.objectContaining({
        code: 'conflict',
        message: 'a payout of 1001 cents exceeds the 1000 cents of paid credit available',
      }),
    );
  });

  it('payable is the unpaid payable earnings, capped by the paid credit', () => {
    expect(payableCents({ payableEarnedMicro: 10_004_500, paidOutCents: 0, cashCents: cashCents(probe) })).toBe(1_000);
    expect(payableCents({ payableEarnedMicro: 10_004_500, paidOutCents: 1_000, cashCents: 1_350 })).toBe(0);
    expect(payableCents({ payableEarnedMicro: 50_000_000, paidOutCents: 0, cashCents: 700 })).toBe(700);
  });

  it('confirming credit turns at most its amount of promotional credit into paid credit', () => {
    expect(confirmPosting(15_000_000, 1_000)).toEqual({ promoMicro: 5_000_000, confirmedMicro: 10_000_000 });
    expect(confirmPosting(4_000_000, 1_000)).toEqual({ promoMicro: 0, confirmedMicro: 4_000_000 });
    expect(confirmPosting(0, 1_000)).toEqual({ promoMicro: 0, confirmedMicro: 0 });
  });

  /** One step of an operator organization's life, on the ledger rules alone. */
  type Step =
    | { kind: 'grant' | 'free_earning' | 'cash_earning' | 'spend_own' | 'spend_elsewhere'; cents: number }
    | { kind: 'payout' };
  const step: fc.Arbitrary<Step> = fc.oneof(
    fc.record({
      kind: fc.constantFrom('grant', 'free_earning', 'cash_earning', 'spend_own', 'spend_elsewhere'),
      cents: fc.integer({ min: 1, max: 5_000 }),
    }),
    fc.record({ kind: fc.constant('payout' as const) }),
  );

  it('whatever the order of grants, earnings, spending on its own node and payouts, payouts never exceed paid earnings from others (property)', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        let account: AccountFigures = { balance_cents: 0, held_cents: 0, carry_micro: 0, promo_micro: 0 };
        let payableEarnedMicro = 0;
        let paidOut = 0;
        let cashFromOthers = 0;
        const credit = (cents: number, freeMicro: number) => {
          const next = { ...account, balance_cents: account.balance_cents + cents };
          account = { ...next, promo_micro: clampPromo(account.promo_micro + freeMicro, next) };
        };
        const charge = (cents: number) => {
          const spend = Math.min(cents, account.balance_cents);
          const free = freePart(spend * 10_000, account.promo_micro);
          const next = { ...account, balance_cents: account.balance_cents - spend };
          account = { ...next, promo_micro: clampPromo(account.promo_micro - free, next) };
          return { micro: spend * 10_000, freeMicro: free, cents: spend };
        };
        for (const s of steps) {
          if (s.kind === 'grant' || s.kind === 'free_earning') credit(s.cents, s.cents * 10_000);
          else if (s.kind === 'cash_earning') {
            credit(s.cents, 0);
            payableEarnedMicro += s.cents * 10_000;
            cashFromOthers += s.cents;
          } else if (s.kind === 'spend_elsewhere') charge(s.cents);
          else if (s.kind === 'spend_own') {
            const earning = operatorEarning(charge(s.cents));
            credit(earning.cents, earning.freeMicro);
            payableEarnedMicro += earning.payableMicro;
          } else {
            const cents = payableCents({ payableEarnedMicro, paidOutCents: paidOut, cashCents: cashCents(account) });
            const next = payoutPosting(account, cents);
            expect(next.promo_micro).toBe(account.promo_micro);
            account = next;
            paidOut += cents;
          }
          expect(paidOut).toBeLessThanOrEqual(cashFromOthers);
          expect(account.promo_micro).toBeLessThanOrEqual(account.balance_cents * 10_000);
        }
      }),
      { numRuns: 500 },
    );
  });
});
