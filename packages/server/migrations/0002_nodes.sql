-- Provider nodes. The marketplace adds scheduling columns in later migrations.
CREATE TABLE nodes (
  id text PRIMARY KEY,
  org_id text,
  pubkey text NOT NULL UNIQUE,
  device_type text,
  device_class text NOT NULL DEFAULT 'cpu',
  gpu_model text,
  cpu_cores integer NOT NULL DEFAULT 0,
  ram_bytes bigint NOT NULL DEFAULT 0,
  vram_bytes bigint NOT NULL DEFAULT 0,
  bandwidth_mbps integer,
  country text,
  region text,
  models text[] NOT NULL DEFAULT '{}',
  attestation_method integer NOT NULL DEFAULT 0,
  attestation_verified boolean NOT NULL DEFAULT false,
  load real NOT NULL DEFAULT 0,
  last_seen timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX nodes_last_seen ON nodes (last_seen);
