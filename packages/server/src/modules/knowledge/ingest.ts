import { sha256Hex } from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { newId, randomToken } from '../../platform/ids.js';
import { endRequest } from '../gateway/settle.js';
import { embeddingVectors } from '../gateway/embeddings.js';
import { embedTexts, principalFor } from './embed.js';
import { unitVector } from './vector-search.js';
import type { DocumentFormat } from './extract.js';
import { parseDocument } from './parse.js';
import {
  claimDocument,
  fairerTurnWaiting,
  finishDocument,
  pendingChunks,
  releaseLease,
  renewLease,
  replaceChunks,
  storeEmbeddings,
  unsettledBatches,
  type DocumentRow,
} from './store.js';
import { readWorkResult } from '../work/results.js';

/**
 * Asynchronous ingestion: a document answers 202 at upload and is then extracted, chunked and
 * embedded here, in the background, through the gateway (one billed, receipted embeddings
 * request per batch of chunks). Work is leased in the store: an instance renews its lease while
 * it works, and a document whose instance stopped (crash, kill -9) is taken over by any instance
 * once the lease runs out, resuming where it was (chunks already embedded are kept). A document
 * taken more than {@link MAX_ATTEMPTS} times is marked `failed`.
 */
export interface Ingestor {
  /**
   * Starts the periodic sweep, which resumes interrupted work: the server calls it once it
   * listens, so that a document that crashed the previous process cannot stop this one starting.
   */
  start(): void;
  /** Looks for documents to ingest now (after an upload; starts the sweep if not yet); the periodic sweep does the same. */
  kick(): void;
  /** Graceful stop: stops in-flight embedding requests (their holds are released) and frees the leases. */
  close(): Promise<void>;
  /**
   * Stops at once, as a crash would (tests of the takeover): the leases are kept, and requests in
   * flight are left to end on their own, their results never stored.
   */
  halt(): void;
  /** True once the periodic sweep runs (after `start()` or the first `kick()`), until stopped. */
  readonly sweeping: boolean;
}

export const MAX_ATTEMPTS = 3;
/** Tries per embeddings batch when no node can take it or a node fails. */
const EMBED_TRIES = 4;
/** Documents one instance ingests at once. */
const MAX_DOCUMENTS = 2;

/** The blob key of an uploaded document's bytes. */
export function sourceKey(documentId: string): string {
  return `kb/${documentId}/source`;
}

class Stop extends Error {
  override name = 'Stop';
}

const RETRYABLE = new Set(['no_capacity', 'upstream_error', 'timeout']);

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** A lock for one async section at a time (choosing the next batch of chunks). */
function createMutex() {
  let tail = Promise.resolve();
  return <T>(fn: () => Promise<T>): Promise<T> => {
    const run = tail.then(fn);
    tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  };
}

async function extractAndChunk(ctx: ServiceContext, doc: DocumentRow, model: string, owner: string): Promise<boolean> {
  const { leaseSeconds } = ctx.config.knowledge;
  if (!(await renewLease(ctx.db, doc.id, owner, leaseSeconds, { phase: 'extracting' }))) return false;
  const blob = await ctx.blobs.get(sourceKey(doc.id));
  if (!blob) throw new ApiError('internal', 'the uploaded bytes of this document are missing');
  // In a worker thread with a heap limit and a deadline: a hostile document fails alone.
  const { textChars, pages, chunks } = await parseDocument(
    {
      bytes: blob.bytes,
      format: doc.content_type as DocumentFormat,
      chunkSize: doc.chunk_size,
      chunkOverlap: doc.chunk_overlap,
    },
    ctx.config.knowledge.parse,
  );
  const rows = chunks.map((c, i) => ({
    id: newId('chk'),
    ordinal: i,
    text: c.text,
    sha256: sha256Hex(c.text),
    tokens: c.tokens,
    char_start: c.start,
    char_end: c.end,
  }));
  const tokens = rows.reduce((sum, r) => sum + r.tokens, 0);
  return ctx.db.transaction(async (tx) => {
    const progress = {
      phase: 'embedding' as const,
      chunk_count: rows.length,
      text_chars: textChars,
      token_count: tokens,
      ...(pages === undefined ? {} : { pages }),
    };
    if (!(await renewLease(tx, doc.id, owner, leaseSeconds, progress))) return false;
    await replaceChunks(tx, doc, model, rows);
    return true;
  });
}

/**
 * Settles what an interrupted take of the document left behind, so that no batch is paid twice.
 * A request still running is cancelled: its hold is released and its node's receipt will be
 * refused. A request that completed (and was paid) without its vectors being stored gives them
 * now, from its stored result, instead of being embedded and paid again.
 * Returns false when the lease was lost meanwhile.
 */
async function settleInterrupted(ctx: ServiceContext, doc: DocumentRow, owner: string): Promise<boolean> {
  const left = await unsettledBatches(ctx.db, doc.org_id, doc.id);
  const running = left.filter((r) => r.status === 'running');
  for (const r of running) {
    await endRequest(ctx, r.id, {
      status: 'cancelled',
      error: 'the ingestion it was for was taken over by another instance',
      cancelWork: true,
    });
  }
  const completed =
    running.length > 0
      ? (await unsettledBatches(ctx.db, doc.org_id, doc.id)).filter((r) => r.status === 'completed')
      : left.filter((r) => r.status === 'completed');
  for (const r of completed) {
    const blob = r.work_id ? await readWorkResult(ctx, r.work_id) : undefined;
    if (!blob) {
      ctx.log.warn(
        { document_id: doc.id, request_id: r.id },
        'knowledge: a completed ingestion request has no stored result; its chunks are embedded again',
      );
      continue;
    }
    const vectors = embeddingVectors(blob.bytes, r.model, r.chunk_ids.length);
    const pending = new Set(r.pending);
    const rows = r.chunk_ids.flatMap((id, i) =>
      pending.has(id) ? [{ id, embedding: unitVector(vectors[i] ?? []) }] : [],
    );
    const kept = await ctx.db.transaction(async (tx) => {
      if (!(await renewLease(tx, doc.id, owner, ctx.config.knowledge.leaseSeconds))) return false;
      await storeEmbeddings(tx, ctx.vectorSearch, doc.id, r.id, rows);
      return true;
    });
    if (!kept) return false;
    ctx.log.info(
      { document_id: doc.id, request_id: r.id, chunks: rows.length },
      'knowledge: stored the vectors of a batch paid before an interruption',
    );
  }
  return true;
}

/** One document's turn on this instance: what it works on, and how it stops. */
interface Turn {
  doc: DocumentRow;
  model: string;
  owner: string;
  /** Stops the work. */
  signal: AbortSignal;
  /** Cancels the embeddings requests in flight (aborted by a graceful stop, not by a halt). */
  requests: AbortSignal;
  /** When the turn began (`Date.now()`). */
  startedAt: number;
}

/**
 * Embeds the document's pending chunks, batch by batch, until none is left (`done`) or until its
 * turn is over (`yielded`): once the turn has lasted `SVC_KB_SLICE_MS`, the document gives it up
 * when another organization's document waits whose organization has fewer documents in progress
 * (docs/knowledge-bases.md, "Fair turns"). The batches already in flight are stored first.
 */
async function embedPending(ctx: ServiceContext, turn: Turn): Promise<'done' | 'yielded'> {
  const { doc, model, owner, signal, requests } = turn;
  const { embedBatch, embedConcurrency, leaseSeconds, retryBaseMs, sliceMs } = ctx.config.knowledge;
  const principal = principalFor(doc.org_id, doc.created_by);
  const inFlight = new Set<string>();
  const exclusive = createMutex();
  let yielded = false;
  let checkedAt = 0;
  // Past its slice, the turn asks the store (at most once a second) whether it is someone else's.
  const turnOver = async () => {
    const now = Date.now();
    if (now - turn.startedAt < sliceMs || now - checkedAt < Math.min(1_000, sliceMs)) return false;
    checkedAt = now;
    return fairerTurnWaiting(ctx.db, doc.org_id);
  };
  const nextBatch = () =>
    exclusive(async () => {
      if (yielded) return [];
      // A fresh lease before each request: no other instance can take the document over (and
      // settle its requests) while this one opens a request it would then not store.
      if (!(await renewLease(ctx.db, doc.id, owner, leaseSeconds))) throw new Stop('lease lost');
      const batch = await pendingChunks(ctx.db, doc.id, embedBatch, [...inFlight]);
      if (batch.length > 0 && (await turnOver())) {
        yielded = true;
        return [];
      }
      for (const c of batch) inFlight.add(c.id);
      return batch;
    });
  const embed = async (batch: { id: string; text: string }[]) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await embedTexts(ctx, principal, {
          model,
          texts: batch.map((c) => c.text),
          // The receipt then says which chunks its signed result embeds.
          audit: {
            purpose: 'knowledge_base_ingestion',
            knowledge_base_id: doc.kb_id,
            document_id: doc.id,
            chunk_ids: batch.map((c) => c.id),
          },
          signal: requests,
        });
      } catch (err) {
        if (signal.aborted) throw new Stop('stopped');
        if (!(err instanceof ApiError) || !RETRYABLE.has(err.code) || attempt >= EMBED_TRIES) throw err;
        ctx.log.info(
          { document_id: doc.id, attempt, err: err.message },
          'knowledge: embeddings batch failed; retrying',
        );
        await sleep(retryBaseMs * 2 ** (attempt - 1), signal);
      }
    }
  };
  // The first worker to fail stops the others: the document fails as a whole.
  let stopping = false;
  const worker = async () => {
    for (;;) {
      if (signal.aborted) throw new Stop('stopped');
      if (stopping) return;
      const batch = await nextBatch();
      if (batch.length === 0) return;
      try {
        const { vectors, requestId } = await embed(batch);
        if (signal.aborted) throw new Stop('stopped');
        const stored = await ctx.db.transaction(async (tx) => {
          if (!(await renewLease(tx, doc.id, owner, leaseSeconds))) return false;
          await storeEmbeddings(
            tx,
            ctx.vectorSearch,
            doc.id,
            requestId,
            batch.map((c, i) => ({ id: c.id, embedding: vectors[i] ?? [] })),
          );
          return true;
        });
        if (!stored) throw new Stop('lease lost');
      } catch (err) {
        stopping = true;
        throw err;
      } finally {
        for (const c of batch) inFlight.delete(c.id);
      }
    }
  };
  const workers = Array.from({ length: embedConcurrency }, () => worker());
  const results = await Promise.allSettled(workers);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return yielded ? 'yielded' : 'done';
}

/**
 * Starts the ingestion loop of this instance: every `sweepMs` (and at each `kick`) it takes
 * documents that wait, up to {@link MAX_DOCUMENTS} at once, in the store's fair order
 * ({@link claimDocument}); a document gives its turn up for another organization's (embedPending).
 * With `deferred`, nothing runs until `start()` or the first `kick()`.
 *
 * @example
 * const ingestor = startIngestor(ctx);
 * ingestor.kick(); // after an upload
 * await ingestor.close();
 */
export function startIngestor(ctx: ServiceContext, options: { sweepMs?: number; deferred?: boolean } = {}): Ingestor {
  const owner = `ing_${randomToken(16)}`;
  const { leaseSeconds } = ctx.config.knowledge;
  const active = new Map<string, { controller: AbortController; requests: AbortController; done: Promise<void> }>();
  let stopped = false;
  let halted = false;
  let filling = false;
  let again = false;

  const ingest = async (doc: DocumentRow, signal: AbortSignal, requests: AbortSignal) => {
    const startedAt = Date.now();
    let requeue = false;
    // Keeps the lease while long embeddings requests run; a lost lease stops the work.
    const keeper = setInterval(
      () => {
        if (signal.aborted) return;
        void renewLease(ctx.db, doc.id, owner, leaseSeconds).then(
          (kept) => {
            if (kept) return;
            const entry = active.get(doc.id);
            entry?.controller.abort(new Stop('lease lost'));
            entry?.requests.abort(new Stop('lease lost'));
          },
          () => undefined,
        );
      },
      Math.max(500, (leaseSeconds * 1000) / 3),
    );
    keeper.unref();
    try {
      if (doc.attempts > MAX_ATTEMPTS) {
        const error = `ingestion was interrupted ${MAX_ATTEMPTS} times; upload the document again`;
        await ctx.db.transaction((tx) => finishDocument(tx, doc.id, { status: 'failed', error, owner }));
        return;
      }
      const { rows } = await ctx.db.query<{ embedding_model: string }>(
        'SELECT embedding_model FROM knowledge_bases WHERE id = $1',
        [doc.kb_id],
      );
      const model = rows[0]?.embedding_model;
      if (!model) return; // deleted meanwhile
      if ((doc.phase === 'queued' || doc.phase === 'extracting') && !(await extractAndChunk(ctx, doc, model, owner)))
        return;
      if (signal.aborted) return;
      if (!(await settleInterrupted(ctx, doc, owner))) return;
      if ((await embedPending(ctx, { doc, model, owner, signal, requests, startedAt })) === 'yielded') {
        requeue = true;
        ctx.log.info(
          { document_id: doc.id, org_id: doc.org_id, turn_ms: Date.now() - startedAt },
          "knowledge: ingestion gives its turn to another organization's document",
        );
        return;
      }
      await finishDocument(ctx.db, doc.id, { status: 'ready', owner });
    } catch (err) {
      if (signal.aborted || err instanceof Stop) return;
      const message =
        err instanceof ApiError && err.code !== 'internal'
          ? err.message
          : 'internal error while ingesting the document';
      if (!(err instanceof ApiError) || err.code === 'internal')
        ctx.log.error({ err, document_id: doc.id }, 'knowledge: ingestion failed');
      await ctx.db
        .transaction((tx) => finishDocument(tx, doc.id, { status: 'failed', error: message.slice(0, 1000), owner }))
        .catch(() => undefined);
    } finally {
      clearInterval(keeper);
      if (!halted) await releaseLease(ctx.db, doc.id, owner, { requeue }).catch(() => undefined);
    }
  };

  const fill = async () => {
    if (filling) {
      again = true;
      return;
    }
    filling = true;
    try {
      do {
        again = false;
        while (!stopped && active.size < MAX_DOCUMENTS) {
          const doc = await claimDocument(ctx.db, owner, leaseSeconds);
          if (!doc || stopped) break;
          const controller = new AbortController();
          const requests = new AbortController();
          const done = ingest(doc, controller.signal, requests.signal).finally(() => {
            active.delete(doc.id);
            if (!stopped) kick();
          });
          active.set(doc.id, { controller, requests, done });
        }
      } while (again && !stopped);
    } catch (err) {
      if (!stopped) ctx.log.warn({ err }, 'knowledge: could not look for documents to ingest');
    } finally {
      filling = false;
    }
  };
  let sweep: NodeJS.Timeout | undefined;
  const start = () => {
    if (sweep || stopped) return;
    sweep = setInterval(() => void fill(), options.sweepMs ?? Math.min(5_000, leaseSeconds * 500));
    sweep.unref();
    void fill();
  };
  const kick = () => (sweep ? void fill() : start());
  if (!options.deferred) start();

  return {
    start,
    kick,
    get sweeping() {
      return sweep !== undefined && !stopped;
    },
    async close() {
      stopped = true;
      clearInterval(sweep);
      for (const { controller, requests } of active.values()) {
        controller.abort(new Stop('closing'));
        requests.abort(new Stop('closing'));
      }
      await Promise.allSettled([...active.values()].map((a) => a.done));
    },
    halt() {
      stopped = true;
      halted = true;
      clearInterval(sweep);
      for (const { controller } of active.values()) controller.abort(new Stop('halted'));
    },
  };
}
