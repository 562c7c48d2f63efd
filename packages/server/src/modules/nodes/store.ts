import type { Queryable } from '../../platform/db/index.js';

export interface NodeRow {
  id: string;
  org_id: string;
  pubkey: string;
  name: string;
  device_type: string | null;
  device_class: string;
  gpu_model: string | null;
  cpu_cores: number;
  ram_bytes: number;
  vram_bytes: number;
  country: string | null;
  region: string | null;
  models: string[];
  /** Per chat model, the request fields beyond the plain ones its engine honours (null: none declared). */
  chat_fields?: Record<string, string[]> | null;
  capabilities: string[];
  max_concurrency: number;
  active_work: number;
  price_micro_per_unit: Record<string, number>;
  green: boolean;
  reputation: number;
  attestation_method: number;
  attestation_verified: boolean;
  /** When the node's verification lapses (null: never verified, or a failed attempt since). */
  attestation_expires_at: Date | null;
  load: number;
  last_seen: Date | null;
}

export type NodeFields = Omit<
  NodeRow,
  'id' | 'org_id' | 'pubkey' | 'active_work' | 'reputation' | 'load' | 'last_seen' | 'attestation_expires_at'
> & {
  attestation_expires_at?: Date | null;
  bandwidth_mbps: number | null;
  geohash_bucket: number | null;
  sensors: string | null;
};

/**
 * Inserts the node, or updates it when the same key registers again under the same organization.
 * Returns undefined when the key belongs to another organization.
 */
export async function upsertNode(
  db: Queryable,
  node: { id: string; orgId: string; pubkey: string; fields: NodeFields },
): Promise<NodeRow | undefined> {
  const f = node.fields;
  const { rows } = await db.query<NodeRow>(
    `INSERT INTO nodes (id, org_id, pubkey, name, device_type, device_class, gpu_model, cpu_cores, ram_bytes, vram_bytes,
        country, region, models, capabilities, max_concurrency, price_micro_per_unit, green, attestation_method,
        attestation_verified, bandwidth_mbps, geohash_bucket, sensors, attestation_expires_at, chat_fields, last_seen)
     VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24, now())
     ON CONFLICT (pubkey) DO UPDATE SET name = EXCLUDED.name, device_type = EXCLUDED.device_type,
        device_class = EXCLUDED.device_class, gpu_model = EXCLUDED.gpu_model, cpu_cores = EXCLUDED.cpu_cores,
        ram_bytes = EXCLUDED.ram_bytes, vram_bytes = EXCLUDED.vram_bytes, country = EXCLUDED.country,
        region = EXCLUDED.region, models = EXCLUDED.models, capabilities = EXCLUDED.capabilities,
        max_concurrency = EXCLUDED.max_concurrency, price_micro_per_unit = EXCLUDED.price_micro_per_unit,
        green = EXCLUDED.green, attestation_method = EXCLUDED.attestation_method,
        attestation_verified = EXCLUDED.attestation_verified, attestation_expires_at = EXCLUDED.attestation_expires_at, bandwidth_mbps = EXCLUDED.bandwidth_mbps,
        geohash_bucket = EXCLUDED.geohash_bucket, sensors = EXCLUDED.sensors, chat_fields = EXCLUDED.chat_fields,
        last_seen = now(), updated_at = now()
      WHERE nodes.org_id = EXCLUDED.org_id
     RETURNING *`,
    [
      node.id,
      node.orgId,
      node.pubkey,
      f.name,
      f.device_type,
      f.device_class,
      f.gpu_model,
      f.cpu_cores,
      f.ram_bytes,
      f.vram_bytes,
      f.country,
      f.region,
      f.models,
      f.capabilities,
      f.max_concurrency,
      JSON.stringify(f.price_micro_per_unit),
      f.green,
      f.attestation_method,
      f.attestation_verified,
      f.bandwidth_mbps,
      f.geohash_bucket,
      f.sensors,
      f.attestation_expires_at ?? null,
      f.chat_fields ? JSON.stringify(f.chat_fields) : null,
    ],
  );
  return rows[0];
}

/** In the sovereign pool now: verified, and the verification has not lapsed (SVC_TEE_REATTEST_HOURS). */
export function isAttested(
  node: Pick<NodeRow, 'attestation_verified' | 'attestation_expires_at'>,
  now = Date.now(),
): boolean {
  return (
    node.attestation_verified && node.attestation_expires_at !== null && node.attestation_expires_at.getTime() > now
  );
}

/** Records the outcome of an attestation on the node: verified until `expiresAt`, or not verified. */
export async function setNodeAttestation(
  db: Queryable,
  nodeId: string,
  a: { method: number; verified: boolean; expiresAt: Date | null },
): Promise<void> {
  await db.query(
    'UPDATE nodes SET attestation_method = $2, attestation_verified = $3, attestation_expires_at = $4, updated_at = now() WHERE id = $1',
    [nodeId, a.method, a.verified, a.expiresAt],
  );
}

/** Verified nodes whose verification lapsed leave the pool; returns their ids. */
export async function expireAttestations(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    'UPDATE nodes SET attestation_verified = false WHERE attestation_verified AND (attestation_expires_at IS NULL OR attestation_expires_at <= now()) RETURNING id',
  );
  return rows.map((r) => r.id);
}

/** Live nodes in the sovereign pool now (verified, not lapsed): whom a sovereign job could go to. */
export async function liveAttestedNodes(db: Queryable, liveSeconds: number): Promise<NodeRow[]> {
  const { rows } = await db.query<NodeRow>(
    'SELECT * FROM nodes WHERE attestation_verified AND attestation_expires_at > now() AND last_seen > now() - make_interval(secs => $1)',
    [liveSeconds],
  );
  return rows;
}

export async function findNode(db: Queryable, nodeId: string): Promise<NodeRow | undefined> {
  const { rows } = await db.query<NodeRow>('SELECT * FROM nodes WHERE id = $1', [nodeId]);
  return rows[0];
}

/**
 * Reputation points a node loses for each receipt refused over its work's metering bound, and for
 * each work order whose report the server proves false (work-orders/false-report.ts).
 */
export const REFUSED_RECEIPT_PENALTY = 10;

/**
 * Lowers the node's reputation (0 to 100; jobs' `min_reputation` matches on it) by `points`, never
 * below 0: it signed a receipt the server could show to be false. Returns the new reputation.
 */
export async function lowerReputation(db: Queryable, nodeId: string, points: number): Promise<number | undefined> {
  const { rows } = await db.query<{ reputation: number }>(
    'UPDATE nodes SET reputation = GREATEST(0, reputation - $2) WHERE id = $1 RETURNING reputation',
    [nodeId, points],
  );
  return rows[0]?.reputation;
}

/**
 * The node is gone until its next signed call (its channel dropped): `last_seen` moves back past
 * the liveness window (`liveSeconds`), which the store announces (migrations/0160) so that every
 * instance's directory stops routing to it. Not when the store recorded a call of the node within
 * the last `quietSeconds` (it is alive, heard elsewhere); never moves a `last_seen` forward. True
 * when the node was marked.
 */
export async function markNodeUnreachable(
  db: Queryable,
  nodeId: string,
  window: { liveSeconds: number; quietSeconds: number },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE nodes SET last_seen = LEAST(last_seen, now() - make_interval(secs => $2))
      WHERE id = $1 AND (last_seen IS NULL OR last_seen <= now() - make_interval(secs => $3))`,
    [nodeId, window.liveSeconds, window.quietSeconds],
  );
  return rowCount > 0;
}

/** Records a signed call: the node is live. */
export async function touchNode(
  db: Queryable,
  nodeId: string,
  heartbeat?: { load?: number; models?: string[]; freeVram?: number; activeWork?: number },
): Promise<void> {
  if (!heartbeat) {
    await db.query('UPDATE nodes SET last_seen = now() WHERE id = $1', [nodeId]);
    return;
  }
  await db.query(
    `UPDATE nodes SET last_seen = now(), load = COALESCE($2, load), models = COALESCE($3, models),
       free_vram_bytes = COALESCE($4, free_vram_bytes), active_work = COALESCE($5, active_work) WHERE id = $1`,
    // `load` is a `real`: a denormal double (2e-237) is out of its range, so keep six decimals.
    [
      nodeId,
      heartbeat.load === undefined ? null : Math.round(heartbeat.load * 1e6) / 1e6,
      heartbeat.models ?? null,
      heartbeat.freeVram ?? null,
      heartbeat.activeWork ?? null,
    ],
  );
}

/** Remembers a request signature; false when it was already seen (a replay). */
export async function rememberSignature(db: Queryable, signature: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'INSERT INTO node_request_nonces (signature) VALUES ($1) ON CONFLICT DO NOTHING',
    [signature],
  );
  return rowCount === 1;
}

/**
 * Records a verified signature and reads the node's row, in one statement: `fresh` is false when
 * the signature was seen before (a replay); `node` is undefined when there is no such node.
 */
export async function rememberSignatureAndRead(
  db: Queryable,
  nodeId: string,
  signature: string,
): Promise<{ node: NodeRow | undefined; fresh: boolean }> {
  const { rows } = await db.query<NodeRow & { seen_first: boolean }>(
    `WITH seen AS (INSERT INTO node_request_nonces (signature) VALUES ($2) ON CONFLICT DO NOTHING RETURNING 1)
     SELECT n.*, EXISTS (SELECT 1 FROM seen) AS seen_first FROM nodes n WHERE n.id = $1`,
    [nodeId, signature],
  );
  const row = rows[0];
  if (!row) return { node: undefined, fresh: true };
  const { seen_first: fresh, ...node } = row;
  return { node, fresh };
}

export async function forgetOldSignatures(db: Queryable): Promise<void> {
  await db.query("DELETE FROM node_request_nonces WHERE seen_at < now() - interval '3 minutes'");
}

export async function listNodes(
  db: Queryable,
  filter: {
    orgId?: string;
    online?: boolean;
    country?: string;
    model?: string;
    limit: number;
    offset: number;
    liveSeconds: number;
  },
): Promise<{ rows: NodeRow[]; total: number }> {
  const where = `($1::text IS NULL OR org_id = $1) AND ($2::text IS NULL OR country = $2) AND ($3::text IS NULL OR $3 = ANY(models))
    AND ($4::boolean IS NULL OR (last_seen > now() - make_interval(secs => $5)) = $4)`;
  const params = [
    filter.orgId ?? null,
    filter.country ?? null,
    filter.model ?? null,
    filter.online ?? null,
    filter.liveSeconds,
  ];
  const { rows } = await db.query<NodeRow>(
    `SELECT * FROM nodes WHERE ${where} ORDER BY created_at, id LIMIT $6 OFFSET $7`,
    [...params, filter.limit, filter.offset],
  );
  const count = await db.query<{ total: number }>(`SELECT count(*)::int AS total FROM nodes WHERE ${where}`, params);
  return { rows, total: count.rows[0]?.total ?? 0 };
}

/**
 * An organization's `earning` ledger rows, less their `earning_reversal` rows (the whole earning:
 * the cents taken from the balance and the debt, `debt_cents`, for the rest), summed per node:
 * each row's `ref` is the job or the gateway request it paid for, and that names the node that did
 * the work. `work_items` counts the earnings.
 */
export async function earningsByNode(
  db: Queryable,
  orgId: string,
): Promise<{ node_id: string; earned_cents: number; work_items: number }[]> {
  const { rows } = await db.query<{ node_id: string; earned_cents: number; work_items: number }>(
    `SELECT COALESCE(j.node_id, g.node_id) AS node_id, sum(t.amount_cents - t.debt_cents)::bigint AS earned_cents,
            count(*) FILTER (WHERE t.tx_type = 'earning')::int AS work_items
       FROM credit_transactions t
       LEFT JOIN jobs j ON j.id = t.ref
       LEFT JOIN gateway_requests g ON g.id = t.ref
      WHERE t.org_id = $1 AND t.tx_type IN ('earning', 'earning_reversal') AND COALESCE(j.node_id, g.node_id) IS NOT NULL
      GROUP BY 1 ORDER BY 2 DESC`,
    [orgId],
  );
  return rows;
}

/** What routing reads of a node (nodes/directory.ts). */
export type RoutingNodeRow = Pick<
  NodeRow,
  | 'id'
  | 'org_id'
  | 'country'
  | 'region'
  | 'gpu_model'
  | 'models'
  | 'chat_fields'
  | 'attestation_verified'
  | 'attestation_expires_at'
  | 'last_seen'
>;

const ROUTING_COLUMNS =
  'id, org_id, country, region, gpu_model, models, chat_fields, attestation_verified, attestation_expires_at, last_seen';

/** Nodes with a signed call within `liveSeconds`, as routing reads them. */
export async function liveRoutingNodes(db: Queryable, liveSeconds: number): Promise<RoutingNodeRow[]> {
  const { rows } = await db.query<RoutingNodeRow>(
    `SELECT ${ROUTING_COLUMNS} FROM nodes WHERE last_seen > now() - make_interval(secs => $1)`,
    [liveSeconds],
  );
  return rows;
}

/** One node as routing reads it; undefined when there is no such node (any more). */
export async function findRoutingNode(db: Queryable, nodeId: string): Promise<RoutingNodeRow | undefined> {
  const { rows } = await db.query<RoutingNodeRow>(`SELECT ${ROUTING_COLUMNS} FROM nodes WHERE id = $1`, [nodeId]);
  return rows[0];
}

/** Nodes whose last signed call was recorded within `seconds`, with that time: liveness news. */
export async function recentlySeenNodes(db: Queryable, seconds: number): Promise<{ id: string; last_seen: Date }[]> {
  const { rows } = await db.query<{ id: string; last_seen: Date }>(
    'SELECT id, last_seen FROM nodes WHERE last_seen > now() - make_interval(secs => $1)',
    [seconds],
  );
  return rows;
}
