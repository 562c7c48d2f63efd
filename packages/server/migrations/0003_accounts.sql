-- Accounts: buyers, organizations, memberships, sessions, API keys, invites.
CREATE TABLE organizations (
  id text PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE buyers (
  id text PRIMARY KEY,
  email text NOT NULL UNIQUE,          -- normalised: trimmed, lower-case
  name text NOT NULL DEFAULT '',
  password_hash text NOT NULL,         -- scrypt$N$r$p$salt$hash
  default_org_id text NOT NULL REFERENCES organizations(id),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
  org_id text NOT NULL REFERENCES organizations(id),
  buyer_id text NOT NULL REFERENCES buyers(id),
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, buyer_id)
);
CREATE INDEX memberships_buyer ON memberships (buyer_id);

CREATE TABLE sessions (
  id text PRIMARY KEY,
  buyer_id text NOT NULL REFERENCES buyers(id),
  org_id text NOT NULL REFERENCES organizations(id),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  revoked_at timestamptz
);

CREATE TABLE api_keys (
  id text PRIMARY KEY,                 -- key_id, the middle part of svc_live_<key_id>_<secret>
  org_id text NOT NULL REFERENCES organizations(id),
  buyer_id text NOT NULL REFERENCES buyers(id),
  prefix text NOT NULL UNIQUE,
  hash text NOT NULL,                  -- hex HMAC-SHA256(pepper, full key)
  hash_alg text NOT NULL,
  label text NOT NULL DEFAULT '',
  scopes text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz,
  revoked_reason text
);
CREATE INDEX api_keys_org ON api_keys (org_id, created_at);

CREATE TABLE invites (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  email text NOT NULL,
  role text NOT NULL CHECK (role IN ('admin', 'member')),
  token_hash text NOT NULL UNIQUE,     -- hex SHA-256 of the single-use token
  invited_by text NOT NULL REFERENCES buyers(id),
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  accepted_at timestamptz
);

-- Credits. balance_cents is always the sum of the organization's ledger rows; held_cents is
-- what active holds reserve; available = balance - held, never negative.
CREATE TABLE credit_accounts (
  org_id text PRIMARY KEY REFERENCES organizations(id),
  balance_cents bigint NOT NULL DEFAULT 0 CHECK (balance_cents >= 0),
  held_cents bigint NOT NULL DEFAULT 0 CHECK (held_cents >= 0),
  carry_micro bigint NOT NULL DEFAULT 0 CHECK (carry_micro >= 0 AND carry_micro < 10000),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (held_cents <= balance_cents)
);

CREATE TABLE credit_transactions (
  id text PRIMARY KEY,
  seq bigserial UNIQUE,
  org_id text NOT NULL REFERENCES organizations(id),
  tx_type text NOT NULL,
  amount_cents bigint NOT NULL,
  balance_after bigint NOT NULL,
  description text NOT NULL DEFAULT '',
  ref text,                            -- job id, request id or hold id it belongs to
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credit_transactions_org ON credit_transactions (org_id, seq);

CREATE TABLE credit_holds (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
  ref text,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'settled', 'released')),
  created_at timestamptz NOT NULL DEFAULT now(),
  closed_at timestamptz
);
CREATE INDEX credit_holds_org_active ON credit_holds (org_id) WHERE status = 'active';

ALTER TABLE nodes ADD CONSTRAINT nodes_org FOREIGN KEY (org_id) REFERENCES organizations(id);
