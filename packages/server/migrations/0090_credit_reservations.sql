-- Credit reservations (DESIGN.md sections 4 and 7, docs/billing.md): each server instance sets
-- aside, per organization, part of the available balance, so that it can decide a request's 402
-- in memory. One row per instance and organization, renewed while the instance lives, returned on
-- shutdown, reclaimed by anyone once expired. credit_accounts.reserved_cents is the sum of the
-- organization's rows, and held + reserved never exceeds the balance, so no number of instances
-- can overdraw.
CREATE TABLE credit_reservations (
  org_id text NOT NULL REFERENCES organizations(id),
  instance_id text NOT NULL,
  amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, instance_id)
);
CREATE INDEX credit_reservations_instance ON credit_reservations (instance_id);
CREATE INDEX credit_reservations_expiry ON credit_reservations (expires_at);

ALTER TABLE credit_accounts ADD COLUMN reserved_cents bigint NOT NULL DEFAULT 0 CHECK (reserved_cents >= 0);
ALTER TABLE credit_accounts ADD CONSTRAINT credit_accounts_reserved_within_balance
  CHECK (held_cents + reserved_cents <= balance_cents);
