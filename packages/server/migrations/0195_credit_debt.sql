-- A reversed earning that the operator's balance no longer held (paid out or spent) becomes a debt
-- (DESIGN.md section 7, docs/billing.md "Reversals"): the reversal takes the whole earning back, the
-- part the balance held as cents, the rest as debt. The debt is not spendable (available and paid
-- credit are less by it) and the organization's next credits pay it first.
--   credit_accounts.debt_cents      what the organization owes the platform, in cents
--   credit_transactions.debt_cents  what the row changed the debt by: + for an earning_reversal
--                                   that found too little, - for a debt_repayment
-- The sum of the rows' debt_cents is the account's debt, as the sum of amount_cents is its balance.
ALTER TABLE credit_accounts ADD COLUMN debt_cents bigint NOT NULL DEFAULT 0 CHECK (debt_cents >= 0);
ALTER TABLE credit_transactions ADD COLUMN debt_cents bigint NOT NULL DEFAULT 0;

-- Reversals written before this migration left their owed cents on the balance: they are debts now
-- (the earning's cents less what its reversal took).
UPDATE credit_transactions r SET debt_cents = e.amount_cents + r.amount_cents
  FROM credit_transactions e
 WHERE r.tx_type = 'earning_reversal' AND e.tx_type = 'earning' AND e.org_id = r.org_id AND e.ref = r.ref
   AND e.amount_cents + r.amount_cents > 0;
UPDATE credit_accounts a SET debt_cents = d.owed
  FROM (SELECT org_id, sum(debt_cents)::bigint AS owed FROM credit_transactions
         WHERE tx_type = 'earning_reversal' AND debt_cents > 0 GROUP BY org_id) d
 WHERE a.org_id = d.org_id;
