-- The ledger shows every movement exactly (DESIGN.md section 7, docs/billing.md):
-- every hold, charge, release and earning is its own row referencing its job or request, with the
-- exact amount in micro-CAD beside the whole cents it moved after the sub-cent carry.
--   amount_micro  exact amount (negative for charges); back-filled as amount_cents * 10000
--   free_micro    the part of amount_micro paid with (charges) or earned from (earnings)
--                 promotional free-tier credit; never payable to an operator
--   hold_cents    what the row changed the account's held amount by: + for a hold, - when it closes
ALTER TABLE credit_transactions
  ADD COLUMN amount_micro bigint,
  ADD COLUMN free_micro bigint NOT NULL DEFAULT 0,
  ADD COLUMN hold_cents bigint NOT NULL DEFAULT 0;
UPDATE credit_transactions SET amount_micro = amount_cents * 10000;
ALTER TABLE credit_transactions ALTER COLUMN amount_micro SET NOT NULL;
CREATE INDEX credit_transactions_ref ON credit_transactions (ref, seq);

-- The promotional part of the balance (free-tier grants and earnings from free-tier work), in
-- micro-CAD, spent before paid credit. Back-filled with the free tier left after the charges so far
-- (charges consumed it first), never more than the balance.
ALTER TABLE credit_accounts ADD COLUMN promo_micro bigint NOT NULL DEFAULT 0 CHECK (promo_micro >= 0);
UPDATE credit_accounts a SET promo_micro = GREATEST(0, LEAST(
  a.balance_cents * 10000 - a.carry_micro,
  10000 * (SELECT COALESCE(sum(t.amount_cents) FILTER (WHERE t.tx_type = 'free_tier'), 0)
                + COALESCE(sum(t.amount_cents) FILTER (WHERE t.tx_type = 'charge'), 0)
             FROM credit_transactions t WHERE t.org_id = a.org_id)));

-- The exact charge of a job and of a gateway request, beside charged_cents.
ALTER TABLE jobs ADD COLUMN charged_micro bigint;
UPDATE jobs SET charged_micro = charged_cents * 10000 WHERE charged_cents IS NOT NULL;
ALTER TABLE gateway_requests ADD COLUMN charged_micro bigint;
UPDATE gateway_requests SET charged_micro = charged_cents * 10000 WHERE charged_cents IS NOT NULL;
