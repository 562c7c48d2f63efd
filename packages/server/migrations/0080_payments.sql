-- Payments (DESIGN.md section 7, docs/payouts.md): operators' payout accounts at a payment
-- provider, payouts of their payable earnings, buyers' top-ups, and the provider events already
-- applied (so a replayed webhook changes nothing).

CREATE TABLE payout_accounts (
  org_id text PRIMARY KEY REFERENCES organizations(id),
  provider text NOT NULL,                       -- 'stripe' | 'local'
  account_id text NOT NULL UNIQUE,              -- the provider's id (Stripe: acct_...)
  email text NOT NULL,
  country text NOT NULL,
  onboarded boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE payouts (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  account_id text NOT NULL,
  provider text NOT NULL,
  amount_cents bigint NOT NULL CHECK (amount_cents > 0),
  currency text NOT NULL DEFAULT 'CAD',
  -- pending: debited from the balance, the transfer not yet confirmed; paid; failed: reversed.
  status text NOT NULL CHECK (status IN ('pending', 'paid', 'failed')),
  period_start timestamptz NOT NULL,
  period_end timestamptz NOT NULL,
  provider_ref text,
  failure_reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payouts_org ON payouts (org_id, created_at DESC);
CREATE INDEX payouts_pending ON payouts (created_at) WHERE status = 'pending';

CREATE TABLE topups (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  provider text NOT NULL,
  amount_cents bigint NOT NULL CHECK (amount_cents > 0),
  currency text NOT NULL DEFAULT 'CAD',
  status text NOT NULL CHECK (status IN ('pending', 'paid', 'failed')),
  provider_ref text,                            -- the provider's checkout session id
  checkout_url text NOT NULL DEFAULT '',
  failure_reason text,
  created_by text REFERENCES buyers(id),
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE INDEX topups_org ON topups (org_id, created_at DESC);

CREATE TABLE payment_events (
  provider text NOT NULL,
  event_id text NOT NULL,
  event_type text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, event_id)
);
