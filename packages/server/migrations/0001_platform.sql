-- Platform-wide settings and signing keys, shared by every instance on one database.
CREATE TABLE platform_settings (
  name text PRIMARY KEY,
  value text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Ed25519 keys the platform signs evidence and webhooks with. Exactly one row is active
-- (valid_until IS NULL); retired keys stay so that old signatures remain verifiable.
CREATE TABLE platform_keys (
  key_id text PRIMARY KEY,
  public_key_hex text NOT NULL UNIQUE,
  private_seed_hex text NOT NULL,
  valid_from timestamptz NOT NULL DEFAULT now(),
  valid_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX platform_keys_one_active ON platform_keys ((valid_until IS NULL)) WHERE valid_until IS NULL;
