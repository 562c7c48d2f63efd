import { randomUUID, sign } from 'node:crypto';
import type { PlatformServices } from '../../platform/services.js';
import type { Queryable } from '../../platform/db/index.js';
import { newId } from '../../platform/ids.js';
import type { JobRow } from './store.js';
import { addJobEvent } from './store.js';

/** Retries stop after this long (DESIGN.md section 12). */
export const WEBHOOK_RETRY_WINDOW_MS = 24 * 3600 * 1000;

/** Seconds before attempt n+1: 10 s, 20 s, 40 s, ... capped at one hour. */
export function webhookBackoffSeconds(attempts: number): number {
  return Math.min(3600, 10 * 2 ** Math.max(0, attempts - 1));
}

/** Queues the terminal-state webhook of a job, in the caller's transaction (so it is never lost). */
export async function enqueueTerminalWebhook(db: Queryable, job: JobRow): Promise<void> {
  const url = job.spec.delivery_webhook_url;
  if (!url) return;
  const type = `job.${job.status}`;
  const payload = {
    type,
    timestamp: new Date().toISOString(),
    data: {
      job_id: job.id,
      status: job.status,
      result_hash: job.result_hash,
      charged_cents: job.charged_cents,
      failure_reason: job.failure_reason,
    },
  };
  await db.query(
    'INSERT INTO webhook_deliveries (id, job_id, org_id, url, event_type, payload) VALUES ($1, $2, $3, $4, $5, $6)',
    [newId('whd'), job.id, job.org_id, url, type, JSON.stringify(payload)],
  );
}

/**
 * Standard Webhooks headers, signed with the platform key (`v1a`, Ed25519 over
 * `<webhook-id>.<webhook-timestamp>.<body>`), so the receiver checks them with the key
 * published at GET /api/v1/keys/platform.
 */
export function webhookHeaders(
  ctx: PlatformServices,
  id: string,
  body: string,
  now = Date.now(),
): Record<string, string> {
  const timestamp = String(Math.floor(now / 1000));
  const signature = sign(null, Buffer.from(`${id}.${timestamp}.${body}`), ctx.secrets.active.privateKey).toString(
    'base64',
  );
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': timestamp,
    'webhook-signature': `v1a,${signature}`,
    'user-agent': 'svc-webhooks/1',
  };
}

interface DeliveryRow {
  id: string;
  job_id: string;
  url: string;
  event_type: string;
  payload: unknown;
  attempts: number;
  created_at: Date;
}

/** Sends the webhooks that are due (each instance may run this; rows are claimed with SKIP LOCKED). */
export async function sendDueWebhooks(ctx: PlatformServices): Promise<number> {
  const due = await ctx.db.transaction(async (tx) => {
    const { rows } = await tx.query<DeliveryRow>(
      `SELECT id, job_id, url, event_type, payload, attempts, created_at FROM webhook_deliveries
        WHERE status = 'pending' AND next_attempt_at <= now() ORDER BY next_attempt_at LIMIT 20 FOR UPDATE SKIP LOCKED`,
    );
    // Claim them for a minute so another instance does not send them at the same time.
    for (const row of rows)
      await tx.query("UPDATE webhook_deliveries SET next_attempt_at = now() + interval '60 seconds' WHERE id = $1", [
        row.id,
      ]);
    return rows;
  });
  for (const row of due) await attempt(ctx, row);
  return due.length;
}

async function attempt(ctx: PlatformServices, row: DeliveryRow): Promise<void> {
  const body = JSON.stringify(row.payload);
  const attempts = row.attempts + 1;
  let error: string | undefined;
  let status = 0;
  try {
    // The URL was checked at submission; the egress agent judges the address it connects to now.
    const res = await ctx.egress.fetch(row.url, {
      method: 'POST',
      headers: webhookHeaders(ctx, row.id, body),
      body,
      signal: AbortSignal.timeout(10_000),
      redirect: 'error',
    });
    status = res.status;
    await res.body?.cancel();
    if (!res.ok) error = `HTTP ${res.status}`;
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  if (!error) {
    await ctx.db.query(
      "UPDATE webhook_deliveries SET status = 'delivered', attempts = $2, delivered_at = now(), last_error = NULL WHERE id = $1",
      [row.id, attempts],
    );
    await addJobEvent(ctx.db, row.job_id, 'webhook_delivered', {
      delivery_id: row.id,
      event: row.event_type,
      attempts,
      status,
    });
    return;
  }
  const giveUp =
    Date.now() + webhookBackoffSeconds(attempts) * 1000 > row.created_at.getTime() + WEBHOOK_RETRY_WINDOW_MS;
  await ctx.db.query(
    `UPDATE webhook_deliveries SET attempts = $2, last_error = $3, status = $4, next_attempt_at = now() + make_interval(secs => $5) WHERE id = $1`,
    [row.id, attempts, error, giveUp ? 'failed' : 'pending', webhookBackoffSeconds(attempts)],
  );
  await addJobEvent(ctx.db, row.job_id, giveUp ? 'webhook_failed' : 'webhook_attempt_failed', {
    delivery_id: row.id,
    event: row.event_type,
    attempts,
    error,
  });
}

/** PUTs a completed job's result (and a manifest) to the buyer's URLs; records each outcome. */
export async function deliverArtifacts(
  ctx: PlatformServices,
  job: JobRow,
  result: { bytes: Buffer; contentType: string },
  receiptId: string,
): Promise<void> {
  const put = async (
    field: 'delivery_artifact_put_url' | 'delivery_manifest_put_url',
    body: Buffer,
    contentType: string,
  ) => {
    const url = job.spec[field];
    if (!url) return;
    let outcome: Record<string, unknown>;
    try {
      const res = await ctx.egress.fetch(url, {
        method: 'PUT',
        headers: { 'content-type': contentType },
        body,
        signal: AbortSignal.timeout(60_000),
        redirect: 'error',
      });
      await res.body?.cancel();
      outcome = { status: res.status, ok: res.ok, bytes: body.length };
    } catch (err) {
      outcome = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    await addJobEvent(
      ctx.db,
      job.id,
      field === 'delivery_artifact_put_url' ? 'delivery_artifact_put' : 'delivery_manifest_put',
      outcome,
    );
  };
  await put('delivery_artifact_put_url', result.bytes, result.contentType);
  const manifest = {
    job_id: job.id,
    result_hash: job.result_hash,
    receipt_id: receiptId,
    content_type: result.contentType,
    bytes: result.bytes.length,
    file: job.spec.output_file,
    delivery_id: randomUUID(),
  };
  await put('delivery_manifest_put_url', Buffer.from(JSON.stringify(manifest)), 'application/json');
}
