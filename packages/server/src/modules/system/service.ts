import { modelsOfType } from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import { JOB_SPEC_VERSION, SERVICE_VERSION } from '../../platform/version.js';
import { logVerifierKeys } from '../log/service.js';
import { countNodes, pingStore } from './store.js';

/** A node counts as live for routing when it made a signed call within this many seconds. */
export const NODE_LIVE_SECONDS = 30;

/** `3h07m12s`-style text for a duration in whole seconds. */
export function formatUptime(totalSeconds: number): string {
  const days = Math.floor(totalSeconds / 86_400);
  const hours = Math.floor((totalSeconds % 86_400) / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (days > 0) return `${days}d${pad(hours)}h${pad(minutes)}m${pad(seconds)}s`;
  if (hours > 0) return `${hours}h${pad(minutes)}m${pad(seconds)}s`;
  if (minutes > 0) return `${minutes}m${pad(seconds)}s`;
  return `${seconds}s`;
}

/**
 * A deliberate cache: the store's answer to a ping, reused for one second so that a load balancer
 * polling health at high rate costs the store one query a second, not one per poll.
 */
const storePings = new WeakMap<ServiceContext, { at: number; ok: Promise<boolean> }>();
const PING_TTL_MS = 1000;

function storeAlive(ctx: ServiceContext): Promise<boolean> {
  const cached = storePings.get(ctx);
  if (cached && Date.now() - cached.at < PING_TTL_MS) return cached.ok;
  const ok = pingStore(ctx.db);
  storePings.set(ctx, { at: Date.now(), ok });
  return ok;
}

export async function health(ctx: ServiceContext) {
  const uptimeSeconds = Math.floor((Date.now() - ctx.startedAt.getTime()) / 1000);
  return {
    ok: await storeAlive(ctx),
    uptime: formatUptime(uptimeSeconds),
    uptime_seconds: uptimeSeconds,
    version: SERVICE_VERSION,
    store: ctx.db.kind,
  };
}

export function publicConfig(ctx: ServiceContext) {
  return {
    default_runner_image: ctx.config.defaultRunnerImage,
    dev_mode: ctx.config.devMode,
    job_spec_version: JOB_SPEC_VERSION,
    currency: 'CAD' as const,
    execution_pools: ['public', 'sovereign'],
    max_request_body_bytes: ctx.config.bodyLimitBytes,
    public_url: ctx.config.publicUrl,
  };
}

export async function inferenceHealth(ctx: ServiceContext) {
  const chatModels = modelsOfType('chat').map((m) => m.id);
  const counts = await countNodes(ctx.db, NODE_LIVE_SECONDS);
  const live = new Set(counts.chatModelsLive);
  return {
    chat_models_in_catalog: chatModels.length,
    chat_models_with_capacity: chatModels.filter((id) => live.has(id)).length,
    online_nodes_heartbeat_5m: counts.online5m,
    registered_nodes: counts.registered,
  };
}

/**
 * GET /api/v1/keys/platform: every platform key with its validity window, and the transparency
 * log's note verifier keys (`log`: one per name the log used and key that ever signed).
 */
export async function platformKeys(ctx: ServiceContext) {
  const [keys, log] = await Promise.all([ctx.secrets.listKeys(), logVerifierKeys(ctx)]);
  return {
    log,
    keys: keys.map((k) => ({
      key_id: k.key_id,
      algorithm: 'ed25519' as const,
      public_key_hex: k.public_key_hex,
      valid_from: k.valid_from.toISOString(),
      valid_until: k.valid_until ? k.valid_until.toISOString() : null,
      active: k.valid_until === null,
    })),
  };
}
