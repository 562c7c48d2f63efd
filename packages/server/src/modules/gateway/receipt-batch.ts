import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { completeWorkWithResults, insertCompletedWorks, lockWorkOfJobs, type WorkRow } from '../work/store.js';
import type { VerifiedReceipt } from '../work/completion.js';
import { keepResult } from '../work/results.js';
import { insertReceipts, receiptIdOf, type ReceiptRow } from '../receipts/store.js';
import { boundOfRequest } from './metering.js';
import type { OpeningRun } from './opening.js';
import { completeManyFromReceipts, receiptFactsOf } from './settle.js';
import { lockRunningRequests, type GatewayRequestRow } from './store.js';

/**
 * Gateway receipts checked in memory (completion.ts `acceptVerified`), written many at a time by a
 * flush of the group-commit writer (gateway/flush.ts, DESIGN.md section 4): with a constant number
 * of statements whatever their number, the same rows as `applyReceipt` writes for each in order.
 */

/**
 * What the flush holds of a receipt's request: its opening as this transaction inserted it, or,
 * with `unwritten`, left unwritten for the receipt's batch to insert completed (the request's
 * opening and its receipt are in the same flush: gateway/flush.ts).
 */
export interface OpenedInFlush {
  request: GatewayRequestRow;
  work: WorkRow;
  unwritten?: { lease_seconds: number; dispatched: boolean; run: OpeningRun };
}

/**
 * Applies inside `tx` every item of `items` that is the plain case (its work is the latest of its
 * request on its node, leased, without a result or a receipt; its request running on that work;
 * the first item of its request): two statements lock the work and request rows, then the
 * results, the receipts, the ledger, the requests and the evidence runs of all of them are
 * written with one or a few statements each. A request whose opening this same transaction
 * inserted (it waited for its receipt in the writer: gateway/flush.ts pairs them) is taken as
 * inserted, neither locked nor read: rows no other transaction can see cannot have changed.
 * Returns the receipt of each item applied, undefined for each item left (written nothing for):
 * the caller applies those one by one as today, so each gets today's exact outcome or error.
 */
export async function completeReceipts(
  ctx: ServiceContext,
  tx: Queryable,
  items: readonly VerifiedReceipt[],
  opened: readonly (OpenedInFlush | undefined)[],
): Promise<(ReceiptRow | undefined)[]> {
  const jobIds = items.map((i) => i.body.job_id);
  const first = new Set<number>(jobIds.map((id) => jobIds.indexOf(id)));
  // Opened by this transaction: the work and the request as inserted, or left unwritten for this
  // batch (paired by the flush, one per request). A second receipt of the same request is not
  // the plain case, and meets the first one's receipt alone, as a duplicate.
  const fresh = items.map((_, index) => (first.has(index) ? opened[index] : undefined));
  // Only a request's first receipt can be the plain case: the others are applied alone (and lock then).
  const stored = jobIds.filter((_, index) => first.has(index) && !fresh[index]);
  const works = stored.length > 0 ? await lockWorkOfJobs(tx, stored) : [];
  // As lockWorkForReceipt: the latest work item of the request on the node sending the receipt.
  const workOf = (item: VerifiedReceipt) =>
    works
      .filter((w) => w.job_id === item.body.job_id && w.node_id === item.node.id)
      .reduce<(typeof works)[number] | undefined>((a, w) => (!a || w.created_at > a.created_at ? w : a), undefined);
  const candidates = items.flatMap((item, index) => {
    const opened = fresh[index];
    const work = opened ? { ...opened.work, has_receipt: false } : workOf(item);
    const plain =
      first.has(index) &&
      work !== undefined &&
      !work.has_receipt &&
      work.type !== 'job' &&
      work.status === 'leased' &&
      work.result_hash === null;
    return plain ? [{ item, index, work, opened, unwritten: opened?.unwritten }] : [];
  });
  const toLock = candidates.filter((c) => !c.opened).map((c) => c.work);
  const running = toLock.length > 0 ? await lockRunningRequests(tx, toLock) : new Map<string, GatewayRequestRow>();
  const ready = candidates.flatMap(({ item, index, work, opened, unwritten }) => {
    const owner = opened ? opened.request : running.get(work.id);
    if (owner === undefined) return [];
    // Over its request's bound: not the plain case; applied alone, it is refused (work/intake.ts).
    const bound = boundOfRequest(owner);
    return item.body.metering_units <= (bound ?? Infinity) ? [{ item, index, work, owner, unwritten }] : [];
  });
  const out: (ReceiptRow | undefined)[] = items.map(() => undefined);
  if (ready.length === 0) return out;

  // From here on everything is written: a failure fails the flush, and the writer retries each alone.
  const facts = await receiptFactsOf(
    tx,
    ready.map((r) => ({ owner: r.owner, node: r.item.node })),
  );
  const attestationOf = (i: number) => facts[i]?.attestation ?? undefined;
  const results = await Promise.all(
    ready.map(async ({ item, work }) => {
      const contentType = item.inline.content_type ?? 'application/json';
      const inline = await keepResult(ctx.blobs.within(tx), work.id, item.inlineBytes, contentType);
      return {
        inline,
        work,
        workId: work.id,
        result_hash: item.inline.result_hash,
        content_type: contentType,
        bytes: item.inlineBytes.length,
        metering_units: item.inline.metering_units,
        ...(item.inline.usage ? { usage: item.inline.usage } : {}),
      };
    }),
  );
  // Work this flush opened and left unwritten is inserted completed; the rest is completed.
  const inStore = results.filter((_, i) => !ready[i]?.unwritten);
  if (inStore.length > 0 && (await completeWorkWithResults(tx, inStore)) !== inStore.length)
    throw new Error('a work item of the flush changed state under its lock');
  const unwritten = results.flatMap((r, i) => {
    const lease = ready[i]?.unwritten;
    if (!lease) return [];
    const { work, workId: _id, ...result } = r;
    return [
      {
        ...result,
        id: work.id,
        owner_id: work.job_id,
        org_id: work.org_id,
        node_id: work.node_id,
        type: work.type,
        model: work.model ?? '',
        payload: work.payload,
        stream: work.stream,
        lease_seconds: lease.lease_seconds,
        dispatched: lease.dispatched,
        lease_expires_at: work.lease_expires_at,
      },
    ];
  });
  if (unwritten.length > 0 && (await insertCompletedWorks(tx, unwritten)) !== unwritten.length)
    throw new Error('a work item opened by the flush was already stored');
  const receipts = await insertReceipts(
    tx,
    ready.map((r, i) => {
      const { item, work } = r;
      const attestation = attestationOf(i);
      return {
        id: receiptIdOf(work.id),
        job_id: item.body.job_id,
        work_id: work.id,
        org_id: work.org_id,
        node_id: item.node.id,
        node_public_key: item.node.pubkey,
        result_hash: item.body.result_hash,
        metering_units: item.body.metering_units,
        signature: item.body.signature,
        metadata: {
          ...(item.body.metadata ?? {}),
          node_country: item.node.country,
          node_region: item.node.region,
          gpu_model: item.node.gpu_model,
          ...facts[i]?.metadata,
          ...(attestation ? { attestation } : {}),
        },
      };
    }),
  );
  await completeManyFromReceipts(
    ctx,
    tx,
    ready.map((r, i) => {
      const attestation = attestationOf(i);
      const receipt = receipts[i];
      if (!receipt) throw new Error('a receipt of the flush was not inserted');
      return {
        request: r.owner,
        work: { id: r.work.id, usage: r.item.inline.usage ?? null },
        node: attestation ? { ...r.item.node, attestation } : r.item.node,
        receipt,
        ...(r.unwritten ? { opening: { run: r.unwritten.run } } : {}),
      };
    }),
  );
  ready.forEach((r, i) => (out[r.index] = receipts[i]));
  return out;
}
