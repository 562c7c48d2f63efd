import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { WriteFailure, type WriteKind } from '../../platform/writer.js';
import type { ReceiptRow } from '../receipts/store.js';
import type { VerifiedReceipt } from '../work/completion.js';
import { applyReceipt } from '../work/intake.js';
import {
  openedWork,
  openingParts,
  writeOpening,
  writeOpenings,
  type InsertedOpening,
  type Opening,
} from './opening.js';
import { completeReceipts, type OpenedInFlush } from './receipt-batch.js';

/**
 * The gateway's records in the group-commit writer (DESIGN.md section 4): the one writer kind of
 * gateway requests. A flush holds openings (handed to their node before they are stored:
 * service.ts `openRequest`) and receipts answered from memory (completion.ts `acceptVerified`);
 * this file pairs them by request id in plain code and writes them in the flush's transaction:
 *
 * - an opening whose request's first receipt is in the same flush, from the node it was leased
 *   to, is not written on its own: the receipts' batch inserts its rows once, already completed
 *   (receipt-batch.ts);
 * - the other openings are written first, many in one go (opening.ts `writeOpenings`), and a
 *   receipt of one of them takes its rows as inserted, neither locked nor read back;
 * - the receipts are written as a batch with a constant number of statements; one the batch
 *   cannot apply (its request ended meanwhile, a second receipt) is applied alone under a
 *   savepoint, as the intake's transactional path would (work/intake.ts `applyReceipt`), and is
 *   refused alone.
 *
 * Should the flush fail (an opening rebuilt meanwhile from its ticket by another instance, say),
 * the writer writes each item again in a transaction of its own: an opening alone, or a receipt
 * alone as the intake would apply it.
 */

type GatewayRecord = { ctx: ServiceContext; opening: Opening } | { ctx: ServiceContext; receipt: VerifiedReceipt };

const gatewayRecords: WriteKind<GatewayRecord, ReceiptRow | undefined> = {
  name: 'gateway records',
  async writeMany(tx, items) {
    const ctx = items[0]?.ctx;
    if (!ctx) return [];
    const receipts = items.flatMap((item, index) => ('receipt' in item ? [{ index, receipt: item.receipt }] : []));
    // Each request's first receipt, by its place (a receipt sent again may even be the same object).
    const firstAt = new Map<string, number>();
    receipts.forEach(({ receipt }, i) => firstAt.set(receipt.body.job_id, firstAt.get(receipt.body.job_id) ?? i));
    const firsts = new Map([...firstAt].map(([id, i]) => [id, receipts[i]?.receipt]));
    const { whole, alone } = pairOpenings(
      ctx,
      items.flatMap((item) => ('opening' in item ? [item.opening] : [])),
      firsts,
    );
    const inserted = await writeAlone(ctx, tx, alone);
    // What each receipt's request has in this flush: only its first receipt, and only from its node.
    const opened = receipts.map(({ receipt }, i): OpenedInFlush | undefined => {
      const id = receipt.body.job_id;
      if (firstAt.get(id) !== i) return undefined;
      const fresh = whole.get(id) ?? inserted.get(id);
      return fresh?.work.node_id === receipt.node.id ? fresh : undefined;
    });
    const values: (ReceiptRow | undefined | WriteFailure)[] = items.map(() => undefined);
    if (receipts.length === 0) return values;
    const [only] = receipts;
    const [onlyOpened] = opened;
    if (receipts.length === 1 && only && !onlyOpened?.unwritten) {
      // One receipt alone takes the intake's path (the batch's statements only pay off from two
      // on), in the flush's transaction: refused, the flush of it fails and it rejects.
      const r = only.receipt;
      const fresh = onlyOpened && { work: onlyOpened.work, owner: onlyOpened.request };
      values[only.index] = (
        await applyReceipt(ctx, tx, r.node, r.body, r.inline, r.inlineBytes, undefined, fresh)
      ).receipt;
      return values;
    }
    const batched = await completeReceipts(
      ctx,
      tx,
      receipts.map((r) => r.receipt),
      opened,
    );
    // An opening left to its receipt that the batch did not write would be lost with the commit:
    // the flush fails instead, and each of its items is written again alone.
    opened.forEach((o, i) => {
      if (o?.unwritten && !batched[i])
        throw new Error(`the opening of ${o.request.id} was left to a receipt not applied`);
    });
    for (const [i, { index, receipt }] of receipts.entries())
      values[index] = batched[i] ?? (await applyAlone(ctx, tx, receipt));
    return values;
  },
};

/**
 * The openings of a flush split in two: those written whole with their request's first receipt
 * of the flush (from the node they were leased to, and with no rows of their own to add:
 * `onOpen`), and the others, written alone.
 */
function pairOpenings(
  ctx: ServiceContext,
  openings: readonly Opening[],
  firsts: ReadonlyMap<string, VerifiedReceipt | undefined>,
) {
  const whole = new Map<string, OpenedInFlush>();
  const alone: Opening[] = [];
  for (const o of openings) {
    const receipt = firsts.get(o.call.id);
    if (!receipt || o.call.onOpen || receipt.node.id !== o.decision.node.id) {
      alone.push(o);
      continue;
    }
    const parts = openingParts(ctx, o);
    whole.set(o.call.id, {
      request: parts.request,
      work: openedWork(o),
      unwritten: { lease_seconds: parts.work.lease_seconds, dispatched: o.dispatched, run: parts.run },
    });
  }
  return { whole, alone };
}

/** Writes openings on their own (one as `writeOpening`, several in one go); the rows inserted, by request id. */
async function writeAlone(
  ctx: ServiceContext,
  tx: Queryable,
  openings: readonly Opening[],
): Promise<Map<string, InsertedOpening>> {
  const [one] = openings;
  if (openings.length !== 1 || !one) return openings.length === 0 ? new Map() : writeOpenings(ctx, tx, openings);
  const inserted = await writeOpening(ctx, tx, one);
  return new Map(inserted ? [[one.call.id, inserted]] : []);
}

/**
 * Applies one receipt of the flush as the intake's transactional path does (`applyReceipt`),
 * under a savepoint of the flush's transaction: refused, its writes roll back and it fails alone.
 */
export async function applyAlone(
  ctx: ServiceContext,
  tx: Queryable,
  r: VerifiedReceipt,
): Promise<ReceiptRow | WriteFailure> {
  await tx.query('SAVEPOINT gateway_receipt');
  try {
    const { receipt } = await applyReceipt(ctx, tx, r.node, r.body, r.inline, r.inlineBytes, undefined);
    await tx.query('RELEASE SAVEPOINT gateway_receipt');
    return receipt;
  } catch (err) {
    await tx.query('ROLLBACK TO SAVEPOINT gateway_receipt');
    return new WriteFailure(err);
  }
}

/**
 * Queues a request's opening records: settled once committed. `waitMs`: how long it may wait for
 * a flush its completion brings, so that the two commit in one transaction (SVC_WRITER_OPENING_WAIT_MS).
 */
export async function enqueueOpening(ctx: ServiceContext, opening: Opening, waitMs: number): Promise<void> {
  await ctx.writer.enqueueAs(gatewayRecords, { ctx, opening }, { waitMs });
}

/** Queues a receipt answered from memory: its stored receipt once the flush holding it committed. */
export async function enqueueReceipt(ctx: ServiceContext, receipt: VerifiedReceipt): Promise<ReceiptRow> {
  const stored = await ctx.writer.enqueueAs(gatewayRecords, { ctx, receipt });
  if (!stored) throw new Error(`the receipt of ${receipt.body.job_id} was not written`);
  return stored;
}
