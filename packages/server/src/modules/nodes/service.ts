import {
  NODE_CHANNEL_PATH,
  ed25519PublicKeyHexProblem,
  findJobKind,
  findModel,
  registerMessage,
  verifyHex,
} from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import { ATTESTATION_METHODS } from '../../platform/attestation.js';
import { NODE_LIVE_SECONDS } from '../system/service.js';
import { countryFromSensors } from './sensors.js';
import { earningsByNode, isAttested, listNodes, upsertNode, type NodeRow } from './store.js';
import { payableEarnings } from '../billing/service.js';

export const POLL_INTERVAL_MS = 25_000;

export interface RegisterInput {
  pubkey: string;
  signature: string;
  [field: string]: unknown;
}

/**
 * Registers (or updates) a node for the operator's organization after checking it holds its key.
 * Unknown catalogue models and bad attestation claims are refused with a field path.
 */
/**
 * The most a node may ask per unit of job kind `kind`: `multiple` times the catalogue's published
 * maximum for the kind (`GET /api/v1/marketplace/pricing`), so that no node can price a job far
 * above the market (docs/billing.md, "Where free-tier credit can go").
 *
 * @example
 * priceCeilingMicro(1, 10); // 12: 1,200 micro-CAD per 1,000 tokens at most, times 10
 */
export function priceCeilingMicro(kind: number, multiple: number): number {
  const price = findJobKind(kind)?.price;
  return price ? (price.max_micro_cad / price.per_units) * multiple : 0;
}

/** The asking prices, each within its kind's ceiling; one above it is 400 naming the kind. */
export function cappedPrices(prices: Record<string, number>, multiple: number): Record<string, number> {
  for (const [kind, price] of Object.entries(prices)) {
    const ceiling = priceCeilingMicro(Number(kind), multiple);
    if (price > ceiling) {
      throw new ApiError(
        'invalid_request',
        `price_micro_per_unit for kind ${kind} is ${price} micro-CAD; the most a node may ask is ${ceiling} (SVC_MAX_PRICE_MULTIPLE x the catalogue maximum)`,
        [{ path: `/price_micro_per_unit/${kind}`, message: `must be at most ${ceiling}` }],
      );
    }
  }
  return prices;
}

export async function registerNode(
  ctx: ServiceContext,
  principal: Principal,
  body: RegisterInput & Record<string, unknown>,
) {
  const { signature, ...unsigned } = body;
  // node:crypto would verify signatures under a small-order key, which anyone can forge.
  const keyProblem = ed25519PublicKeyHexProblem(body.pubkey);
  if (keyProblem)
    throw new ApiError('invalid_request', `pubkey ${keyProblem}`, [{ path: '/pubkey', message: keyProblem }]);
  if (!verifyHex(registerMessage(body.pubkey, unsigned), signature, body.pubkey)) {
    throw new ApiError(
      'unauthorized',
      'registration signature does not verify: sign "SVC-NODE-REGISTER-v1\\n" + pubkey + "\\n" + sha256hex(JCS(body without signature))',
    );
  }
  const models = (body.models as string[] | undefined) ?? [];
  const unknown = models.filter((m) => !findModel(m));
  if (unknown.length) {
    throw new ApiError(
      'invalid_request',
      `unknown catalogue model ${unknown.map((m) => `'${m}'`).join(', ')}`,
      unknown.map((m) => ({ path: `/models/${models.indexOf(m)}`, message: 'not in the catalogue' })),
    );
  }
  const attestationMethod = (body.attestation_method as number | undefined) ?? 0;
  if (!(attestationMethod in ATTESTATION_METHODS))
    throw new ApiError('invalid_request', `attestation_method ${attestationMethod} is not one of 0-3`, [
      { path: '/attestation_method', message: 'must be 0, 1, 2 or 3' },
    ]);
  // Parsed whether or not `country` is sent: `sensors` is declared JSON, and malformed JSON is a 400.
  const sensorsCountry = countryFromSensors(body.sensors as string | undefined);
  const nodeId = newId('node');
  const verified =
    attestationMethod !== 0 &&
    (await ctx.attestation.verify({
      nodeId,
      method: attestationMethod,
      evidence: body.attestation_evidence as string | undefined,
    }));
  const gpuModel = (body.gpu_model as string | undefined) ?? null;
  const row = await upsertNode(ctx.db, {
    id: nodeId,
    orgId: principal.orgId,
    pubkey: body.pubkey,
    fields: {
      name: (body.name as string | undefined) ?? '',
      device_type: (body.device_type as string | undefined) ?? null,
      device_class: gpuModel ? 'gpu' : 'cpu',
      gpu_model: gpuModel,
      cpu_cores: (body.cpu_cores as number | undefined) ?? 0,
      ram_bytes: (body.ram_bytes as number | undefined) ?? 0,
      vram_bytes: (body.vram_bytes as number | undefined) ?? 0,
      country: (body.country as string | undefined) ?? sensorsCountry ?? null,
      region: (body.region as string | undefined) ?? null,
      models,
      chat_fields: (body.chat_fields as Record<string, string[]> | undefined) ?? null,
      capabilities: [...new Set([...((body.capabilities as string[] | undefined) ?? []), gpuModel ? 'gpu' : 'cpu'])],
      max_concurrency: (body.max_concurrency as number | undefined) ?? 1,
      price_micro_per_unit: cappedPrices(
        (body.price_micro_per_unit as Record<string, number> | undefined) ?? {},
        ctx.config.maxPriceMultiple,
      ),
      green: (body.green as boolean | undefined) ?? false,
      attestation_method: attestationMethod,
      attestation_verified: verified,
      attestation_expires_at: verified ? new Date(Date.now() + ctx.config.tee.reattestHours * 3_600_000) : null,
      bandwidth_mbps: (body.bandwidth_mbps as number | undefined) ?? null,
      geohash_bucket: (body.geohash_bucket as number | undefined) ?? null,
      sensors: (body.sensors as string | undefined) ?? null,
    },
  });
  if (!row) throw new ApiError('conflict', 'this node key is registered to another organization');
  ctx.nodeDirectory.put(row);
  ctx.log.info(
    { node_id: row.id, org_id: principal.orgId, country: row.country, models: row.models },
    'node registered',
  );
  await ctx.bus.publish('nodes', row.id);
  return {
    node_id: row.id,
    status: 'online',
    poll_interval_ms: POLL_INTERVAL_MS,
    server_public_key: ctx.secrets.active.public_key_hex,
    lease_seconds: ctx.config.leaseSeconds,
    channel: NODE_CHANNEL_PATH,
  };
}

export function isLive(node: Pick<NodeRow, 'last_seen'>, now = Date.now()): boolean {
  return node.last_seen !== null && now - node.last_seen.getTime() <= NODE_LIVE_SECONDS * 1000;
}

/** NodeSummary `attestation`: `none`, or `<method>:verified|unverified|expired`. */
export function attestationLabel(
  node: Pick<NodeRow, 'attestation_method' | 'attestation_verified' | 'attestation_expires_at'>,
  now = Date.now(),
): string {
  if (node.attestation_method === 0) return 'none';
  const method = ATTESTATION_METHODS[node.attestation_method] ?? 'unknown';
  if (isAttested(node, now)) return `${method}:verified`;
  return `${method}:${node.attestation_expires_at !== null && node.attestation_expires_at.getTime() <= now ? 'expired' : 'unverified'}`;
}

export function nodeSummary(node: NodeRow) {
  return {
    node_id: node.id,
    pubkey: node.pubkey,
    name: node.name,
    status: isLive(node) ? 'online' : 'offline',
    availability: node.active_work >= node.max_concurrency || node.load >= 0.95 ? 'busy' : 'available',
    device_class: node.device_class,
    gpu_model: node.gpu_model ?? '',
    gpu_ready: node.gpu_model !== null && node.models.length > 0,
    managed_oci_gpu_ready: node.capabilities.includes('oci-gpu'),
    cpu_cores: node.cpu_cores,
    ram_gb: Math.round((node.ram_bytes / 2 ** 30) * 10) / 10,
    vram_gb: Math.round((node.vram_bytes / 2 ** 30) * 10) / 10,
    region: node.region ?? '',
    country: node.country ?? '',
    models: node.models,
    attestation: attestationLabel(node),
    reputation: node.reputation,
    load: node.load,
    last_seen: node.last_seen ? Math.floor(node.last_seen.getTime() / 1000) : 0,
  };
}

export async function listNodeSummaries(
  ctx: ServiceContext,
  principal: Principal,
  query: {
    limit?: number;
    offset?: number;
    status?: 'online' | 'offline';
    country?: string;
    model?: string;
    scope?: 'mine' | 'all';
  },
) {
  const all = query.scope === 'all';
  const { rows, total } = await listNodes(ctx.db, {
    orgId: all ? undefined : principal.orgId,
    online: all ? true : query.status === undefined ? undefined : query.status === 'online',
    country: query.country,
    model: query.model,
    limit: query.limit ?? 50,
    offset: query.offset ?? 0,
    liveSeconds: NODE_LIVE_SECONDS,
  });
  // The public capacity names no operator: another organization's node shows no name.
  return {
    nodes: rows.map((n) => (n.org_id === principal.orgId ? nodeSummary(n) : { ...nodeSummary(n), name: '' })),
    total,
  };
}

/**
 * `GET /api/v1/nodes/earnings`: what the organization's nodes earned, per node, after the platform
 * fee, and what payouts may pay of it (`payable_cents`: earnings from free-tier credit excluded).
 */
export async function nodeEarnings(ctx: ServiceContext, principal: Principal) {
  const [nodes, payable] = await Promise.all([
    earningsByNode(ctx.db, principal.orgId),
    payableEarnings(ctx.db, principal.orgId),
  ]);
  return {
    currency: 'CAD' as const,
    total_cents: nodes.reduce((sum, n) => sum + n.earned_cents, 0),
    payable_cents: payable.payable_cents,
    payable: payable.payable,
    non_payable_micro: payable.non_payable_micro,
    nodes,
  };
}
