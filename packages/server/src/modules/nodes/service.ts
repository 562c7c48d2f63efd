import { NODE_CHANNEL_PATH, findModel, registerMessage, verifyHex } from '@svc/protocol';
import type { ServiceContext } from '../../context.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import { ATTESTATION_METHODS } from '../../platform/attestation.js';
import { NODE_LIVE_SECONDS } from '../system/service.js';
import { earningsByNode, listNodes, upsertNode, type NodeRow } from './store.js';

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
export async function registerNode(ctx: ServiceContext, principal: Principal, body: RegisterInput & Record<string, unknown>) {
  const { signature, ...unsigned } = body;
  if (!verifyHex(registerMessage(body.pubkey, unsigned), signature, body.pubkey)) {
    throw new ApiError('unauthorized', 'registration signature does not verify: sign "SVC-NODE-REGISTER-v1\\n" + pubkey + "\\n" + sha256hex(JCS(body without signature))');
  }
  const models = (body.models as string[] | undefined) ?? [];
  const unknown = models.filter((m) => !findModel(m));
  if (unknown.length) {
    throw new ApiError('invalid_request', `unknown catalogue model ${unknown.map((m) => `'${m}'`).join(', ')}`, unknown.map((m) => ({ path: `/models/${models.indexOf(m)}`, message: 'not in the catalogue' })));
  }
  const attestationMethod = (body.attestation_method as number | undefined) ?? 0;
  if (!(attestationMethod in ATTESTATION_METHODS)) throw new ApiError('invalid_request', `attestation_method ${attestationMethod} is not one of 0-3`, [{ path: '/attestation_method', message: 'must be 0, 1, 2 or 3' }]);
  const nodeId = newId('node');
  const verified = attestationMethod !== 0 && (await ctx.attestation.verify({ nodeId, method: attestationMethod, evidence: body.attestation_evidence as string | undefined }));
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
      country: (body.country as string | undefined) ?? null,
      region: (body.region as string | undefined) ?? null,
      models,
      capabilities: [...new Set([...((body.capabilities as string[] | undefined) ?? []), gpuModel ? 'gpu' : 'cpu'])],
      max_concurrency: (body.max_concurrency as number | undefined) ?? 1,
      price_micro_per_unit: (body.price_micro_per_unit as Record<string, number> | undefined) ?? {},
      green: (body.green as boolean | undefined) ?? false,
      attestation_method: attestationMethod,
      attestation_verified: verified,
      bandwidth_mbps: (body.bandwidth_mbps as number | undefined) ?? null,
      geohash_bucket: (body.geohash_bucket as number | undefined) ?? null,
      sensors: (body.sensors as string | undefined) ?? null,
    },
  });
  if (!row) throw new ApiError('conflict', 'this node key is registered to another organization');
  ctx.log.info({ node_id: row.id, org_id: principal.orgId, country: row.country, models: row.models }, 'node registered');
  await ctx.bus.publish('nodes', row.id);
  return { node_id: row.id, status: 'online', poll_interval_ms: POLL_INTERVAL_MS, server_public_key: ctx.secrets.active.public_key_hex, lease_seconds: ctx.config.leaseSeconds, channel: NODE_CHANNEL_PATH };
}

export function isLive(node: Pick<NodeRow, 'last_seen'>, now = Date.now()): boolean {
  return node.last_seen !== null && now - node.last_seen.getTime() <= NODE_LIVE_SECONDS * 1000;
}

export function nodeSummary(node: NodeRow) {
  const method = ATTESTATION_METHODS[node.attestation_method] ?? 'unknown';
  return {
    node_id: node.id,
    pubkey: node.pubkey,
    name: node.name,
    status: isLive(node) ? 'online' : 'offline',
    availability: node.active_work >= node.max_concurrency || node.load >= 0.95 ? 'busy' : 'available',
    device_class: node.device_class,
    gpu_model: node.gpu_model ?? '',
    gpu_ready: node.gpu_model !== null && node.models.length > 0,
    managed_oci_gpu_ready: false,
    cpu_cores: node.cpu_cores,
    ram_gb: Math.round((node.ram_bytes / 2 ** 30) * 10) / 10,
    vram_gb: Math.round((node.vram_bytes / 2 ** 30) * 10) / 10,
    region: node.region ?? '',
    country: node.country ?? '',
    models: node.models,
    attestation: node.attestation_method === 0 ? 'none' : `${method}:${node.attestation_verified ? 'verified' : 'unverified'}`,
    load: node.load,
    last_seen: node.last_seen ? Math.floor(node.last_seen.getTime() / 1000) : 0,
  };
}

export async function listNodeSummaries(
  ctx: ServiceContext,
  principal: Principal,
  query: { limit?: number; offset?: number; status?: 'online' | 'offline'; country?: string; model?: string; scope?: 'mine' | 'all' },
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
  return { nodes: rows.map(nodeSummary), total };
}

/** `GET /api/v1/nodes/earnings`: what the organization's nodes earned, per node, after the platform fee. */
export async function nodeEarnings(ctx: ServiceContext, principal: Principal) {
  const nodes = await earningsByNode(ctx.db, principal.orgId);
  return { currency: 'CAD' as const, total_cents: nodes.reduce((sum, n) => sum + n.earned_cents, 0), nodes };
}
