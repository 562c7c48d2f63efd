import { eventHash, merkleRoot, signCertificate } from '@svc/protocol';
import type { Queryable } from '../../platform/db/index.js';
import { newId } from '../../platform/ids.js';
import type { PlatformSecrets } from '../../platform/secrets.js';
import {
  appendAndSign,
  appendAndSignMany,
  appendEvents,
  closeRunRows,
  findRunById,
  insertClosedRuns,
  insertDerivedRuns,
  insertRunWithEvents,
  insertRunsWithEvents,
  insertSignedRunsWithEvents,
  latestEventsOfTypes,
  latestEventsOfTypesMany,
  lockOpenRun,
  lockOpenRunWithHashes,
  lockOpenRunsWithHashes,
  markSigned,
  storeCertificate,
  type EdgeType,
  type EventRow,
  type NewRun,
  type RunRow,
} from './store.js';

/**
 * Writing evidence as things happen (DESIGN.md section 11). Every call takes the transaction of
 * the state change it describes, so an event exists exactly when its change committed, and a
 * crash loses neither. Each event gets a `then` edge from the one before it and `caused_by`
 * edges to the latest earlier events of the types it names.
 */

/** One event to record. */
export interface EvidenceEvent {
  type: string;
  summary: string;
  metadata?: Record<string, unknown>;
  /** Event types this one follows from (the latest of each, earlier in the run or this batch). */
  causedBy?: readonly string[];
}

/** Events committed together, all stamped `at` (ISO 8601 with milliseconds): a derived run is a list of these. */
export interface DerivedBatch {
  at: string;
  events: readonly EvidenceEvent[];
}

/** `created_at` exactly as hashed and returned: ISO 8601 UTC with milliseconds. */
function timestamp(): string {
  return new Date().toISOString();
}

/** The causes of `events` that no earlier event of the same batch provides: looked up in the store. */
function wantedCauses(events: readonly EvidenceEvent[]): Set<string> {
  const wanted = new Set<string>();
  events.forEach((e, i) =>
    (e.causedBy ?? []).forEach((type) => events.slice(0, i).some((p) => p.type === type) || wanted.add(type)),
  );
  return wanted;
}

type Latest = Map<string, { id: string; sequence: number }>;

/** An event's id and `created_at`, by its sequence. */
export type Stamp = (sequence: number) => { id: string; created_at: string };

/** A recorded event's stamp: a new id, and now. */
const freshStamp: Stamp = () => ({ id: newId('evt'), created_at: timestamp() });

/** The rows for `events` appended to `run`: hashed, with their `then` and `caused_by` edges as `parents`. */
async function buildEvents(
  tx: Queryable,
  run: { id: string; event_count: number; last_event_id: string | null },
  subjectId: string,
  events: readonly EvidenceEvent[],
): Promise<EventRow[]> {
  const wanted = wantedCauses(events);
  const latest =
    wanted.size > 0 && run.event_count > 0 ? await latestEventsOfTypes(tx, run.id, [...wanted]) : new Map();
  return eventRows(run, subjectId, events, latest);
}

/** {@link buildEvents} with the store's latest events of the wanted causes already read. */
function eventRows(
  run: { id: string; event_count: number; last_event_id: string | null },
  subjectId: string,
  events: readonly EvidenceEvent[],
  latest: Latest,
  stamp: Stamp = freshStamp,
): EventRow[] {
  const rows: EventRow[] = [];
  let previous = run.last_event_id ? { id: run.last_event_id, sequence: run.event_count } : undefined;
  for (let i = 0; i < events.length; i++) {
    const e = events[i] as EvidenceEvent;
    const sequence = run.event_count + i + 1;
    const { id, created_at } = stamp(sequence);
    const self = { id, sequence };
    const parents: { event_id: string; edge_type: EdgeType; sequence: number }[] = [];
    if (previous) parents.push({ event_id: previous.id, edge_type: 'then', sequence: previous.sequence });
    for (const type of e.causedBy ?? []) {
      // A cause that is also the previous event gets both edges: they say different things.
      const cause = latest.get(type);
      if (cause) parents.push({ event_id: cause.id, edge_type: 'caused_by', sequence: cause.sequence });
    }
    // The hashed order (parentsOf in @svc/protocol): the parent's sequence, then the edge type.
    if (parents.length > 1)
      parents.sort(
        (a, b) => a.sequence - b.sequence || (a.edge_type < b.edge_type ? -1 : a.edge_type > b.edge_type ? 1 : 0),
      );
    const metadata = e.metadata ?? {};
    const metadataText = JSON.stringify(metadata);
    // eventHash takes only event_id and edge_type of each parent (eventHashInput copies them), as
    // the row keeps them.
    const event_hash = eventHash({
      run_id: run.id,
      sequence: self.sequence,
      event_type: e.type,
      subject_id: subjectId,
      summary: e.summary,
      metadata,
      created_at,
      parents,
    });
    rows.push({
      id: self.id,
      run_id: run.id,
      sequence: self.sequence,
      event_type: e.type,
      subject_id: subjectId,
      summary: e.summary,
      metadata: metadataText,
      created_at,
      event_hash,
      parents: JSON.stringify(parents.map((p) => ({ event_id: p.event_id, edge_type: p.edge_type }))),
    });
    latest.set(e.type, self);
    previous = self;
  }
  return rows;
}

/**
 * Starts the run of a job or gateway request with its first events.
 *
 * @example
 * await openRun(tx, { org_id, buyer_id, subject_type: 'job', job_id, ... }, [{ type: 'job.submitted', summary: '...' }]);
 */
export async function openRun(
  tx: Queryable,
  run: Omit<NewRun, 'id'>,
  events: readonly EvidenceEvent[],
): Promise<string> {
  return (await openRunWithHead(tx, run, events)).id;
}

/** An open run as {@link closeRun} reads it: its id, event count, last event and every event hash in order. */
export interface RunHead {
  id: string;
  event_count: number;
  last_event_id: string | null;
  hashes: string[];
}

/** {@link openRun}, returning the run's head as it now stands in `tx` (what `closeRun` would read back). */
export async function openRunWithHead(
  tx: Queryable,
  run: Omit<NewRun, 'id'>,
  events: readonly EvidenceEvent[],
): Promise<RunHead> {
  const id = newId('run');
  const rows = await buildEvents(tx, { id, event_count: 0, last_event_id: null }, run.job_id, events);
  await insertRunWithEvents(tx, { ...run, id }, rows);
  const last = rows[rows.length - 1];
  return {
    id,
    event_count: last?.sequence ?? 0,
    last_event_id: last?.id ?? null,
    hashes: rows.map((r) => r.event_hash),
  };
}

/**
 * {@link openRun} for many subjects in one statement (a flush of the group-commit writer): the
 * same rows as `openRun` called for each. Returns the run ids, in order.
 */
export async function openRuns(
  tx: Queryable,
  runs: readonly { run: Omit<NewRun, 'id'>; events: readonly EvidenceEvent[] }[],
): Promise<string[]> {
  return (await openRunsWithHeads(tx, runs)).map((head) => head.id);
}

/**
 * {@link openRuns}, returning each run's head as it now stands in `tx` (what `closeRuns` would
 * read back), as {@link openRunWithHead} does for one.
 */
export async function openRunsWithHeads(
  tx: Queryable,
  runs: readonly { run: Omit<NewRun, 'id'>; events: readonly EvidenceEvent[] }[],
): Promise<RunHead[]> {
  const events: EventRow[] = [];
  const heads: RunHead[] = [];
  const rows = runs.map(({ run, events: opening }) => {
    const id = newId('run');
    // A new run has no earlier events: every cause is in its opening batch or nowhere.
    const built = eventRows({ id, event_count: 0, last_event_id: null }, run.job_id, opening, new Map());
    events.push(...built);
    const last = built[built.length - 1];
    heads.push({
      id,
      event_count: last?.sequence ?? 0,
      last_event_id: last?.id ?? null,
      hashes: built.map((r) => r.event_hash),
    });
    return { ...run, id };
  });
  if (rows.length > 0) await insertRunsWithEvents(tx, rows, events);
  return heads;
}

/** One run of {@link openAndCloseRuns}: what `openRuns` takes, then what `closeRuns` takes for it. */
export interface RunOpenedAndClosed {
  run: Omit<NewRun, 'id'>;
  events: readonly EvidenceEvent[];
  closing: readonly EvidenceEvent[];
  summary: string;
}

/**
 * {@link openRuns} then {@link closeRuns} for subjects opened and closed in one transaction (a
 * flush holding a request's opening and its completion), with one statement: every run inserted
 * with all its events and its signature. The same events, edges and certificates as
 * the two calls (a closing event's causes are the run's latest events of their types, here all
 * known). Returns the run ids, in order.
 */
export async function openAndCloseRuns(
  tx: Queryable,
  secrets: PlatformSecrets,
  runs: readonly RunOpenedAndClosed[],
): Promise<string[]> {
  if (runs.length === 0) return [];
  const events: EventRow[] = [];
  const signings: { id: string; closing: ReturnType<typeof closingOf> }[] = [];
  const rows = runs.map(({ run, events: opening, closing, summary }) => {
    const id = newId('run');
    // Every event of the run is in these two batches: the opening's latest of each type are the
    // closing's causes, as the store would give them back.
    const latest: Latest = new Map();
    const opened = eventRows({ id, event_count: 0, last_event_id: null }, run.job_id, opening, latest);
    const last = opened[opened.length - 1];
    const head: RunHead = {
      id,
      event_count: last?.sequence ?? 0,
      last_event_id: last?.id ?? null,
      hashes: opened.map((r) => r.event_hash),
    };
    const closed = eventRows(head, run.job_id, closing, latest);
    events.push(...opened, ...closed);
    const signing = closingOf(head, closed, summary);
    signings.push({ id, closing: signing });
    return {
      ...run,
      id,
      event_count: signing.count,
      last_event_id: signing.lastId,
      signed: signing.sign(secrets),
    };
  });
  const unsigned = await insertSignedRunsWithEvents(tx, rows, events);
  if (unsigned.length > 0) {
    await secrets.reload(tx);
    for (const s of signings.filter((s) => unsigned.includes(s.id)))
      await markSigned(tx, s.id, s.closing.sign(secrets), s.closing.count, s.closing.lastId);
  }
  return rows.map((r) => r.id);
}

/**
 * Appends events to the open run of `subjectId`. Returns false (recording nothing) when the
 * subject has no open run: it predates evidence runs, or its run is already signed.
 */
export async function recordEvents(
  tx: Queryable,
  subjectId: string,
  events: readonly EvidenceEvent[],
): Promise<boolean> {
  const run = await lockOpenRun(tx, subjectId);
  if (!run) return false;
  await appendEvents(tx, run.id, await buildEvents(tx, run, subjectId, events));
  return true;
}

/**
 * Appends the closing events, then signs the run: the RFC 6962 root over every event hash and
 * the platform's Ed25519 certificate over it. Nothing can be appended afterwards. `head`: the
 * run as this transaction opened it ({@link openRunWithHead}), so it need not be read back.
 */
export async function closeRun(
  tx: Queryable,
  secrets: PlatformSecrets,
  subjectId: string,
  events: readonly EvidenceEvent[],
  summary: string,
  head?: RunHead,
): Promise<boolean> {
  const run = head ?? (await lockOpenRunWithHashes(tx, subjectId));
  if (!run) return false;
  const rows = await buildEvents(tx, run, subjectId, events);
  const closing = closingOf(run, rows, summary);
  // Signed only while the key is still the active one; another process may have rotated it.
  if (await appendAndSign(tx, run.id, rows, closing.sign(secrets), closing.count, closing.lastId)) return true;
  await secrets.reload(tx);
  await markSigned(tx, run.id, closing.sign(secrets), closing.count, closing.lastId);
  return true;
}

/** A run's counters after its closing events, and its certificate over every event hash. */
function closingOf(
  run: { id: string; event_count: number; last_event_id: string | null; hashes: string[] },
  rows: readonly EventRow[],
  summary: string,
) {
  const hashes = [...run.hashes, ...rows.map((r) => r.event_hash)];
  const last = rows[rows.length - 1];
  return {
    count: last?.sequence ?? run.event_count,
    lastId: last?.id ?? run.last_event_id,
    sign: (secrets: PlatformSecrets) => {
      const key = secrets.active;
      const root = merkleRoot(hashes);
      return {
        root_hash: root,
        root_signature_hex: signCertificate(
          { run_id: run.id, event_count: hashes.length, root_hash_hex: root },
          key.privateKey,
        ),
        signer_public_key_hex: key.public_key_hex,
        signer_key_id: key.key_id,
        summary,
      };
    },
  };
}

/** One run to close with {@link closeRuns}. */
export interface RunClosing {
  subjectId: string;
  events: readonly EvidenceEvent[];
  summary: string;
  /** The run as this transaction opened it ({@link openRunsWithHeads}): not locked and read back. */
  head?: RunHead;
}

/**
 * {@link closeRun} for many subjects with a constant number of statements (a flush of the
 * group-commit writer): one read of the runs' heads (none for the closings that carry theirs), one of earlier causes when some are needed,
 * one write of every event and signature. The same rows and certificates as `closeRun`
 * called for each in order; false for a subject without an open run (or closed earlier in the list).
 */
export async function closeRuns(
  tx: Queryable,
  secrets: PlatformSecrets,
  closings: readonly RunClosing[],
): Promise<boolean[]> {
  if (closings.length === 0) return [];
  // Runs this transaction opened are known as it inserted them; only the others are locked and read.
  const unknown = closings.filter((c) => !c.head).map((c) => c.subjectId);
  const runs = unknown.length > 0 ? await lockOpenRunsWithHashes(tx, unknown) : new Map<string, RunHead>();
  for (const c of closings) if (c.head && !runs.has(c.subjectId)) runs.set(c.subjectId, c.head);
  const wanted = closings.map((c) => wantedCauses(c.events));
  const lookups = closings.flatMap((c, i) => {
    const run = runs.get(c.subjectId);
    return run && run.event_count > 0 && (wanted[i]?.size ?? 0) > 0
      ? [{ run: run.id, types: [...(wanted[i] ?? [])] }]
      : [];
  });
  const latest =
    lookups.length > 0
      ? await latestEventsOfTypesMany(
          tx,
          lookups.map((l) => l.run),
          [...new Set(lookups.flatMap((l) => l.types))],
        )
      : new Map<string, Latest>();
  const seen = new Set<string>();
  const events: EventRow[] = [];
  const signings: { runId: string; closing: ReturnType<typeof closingOf> }[] = [];
  const closed = closings.map((c, i) => {
    const run = runs.get(c.subjectId);
    if (!run || seen.has(c.subjectId)) return false;
    seen.add(c.subjectId);
    const types = wanted[i] ?? new Set<string>();
    const found = latest.get(run.id) ?? new Map();
    const own: Latest = new Map([...found].filter(([type]) => types.has(type)));
    const built = eventRows(run, c.subjectId, c.events, own);
    events.push(...built);
    signings.push({ runId: run.id, closing: closingOf(run, built, c.summary) });
    return true;
  });
  const signed = await appendAndSignMany(
    tx,
    events,
    signings.map((s) => ({
      runId: s.runId,
      signed: s.closing.sign(secrets),
      eventCount: s.closing.count,
      lastEventId: s.closing.lastId,
    })),
  );
  const unsigned = signings.filter((s) => !signed.has(s.runId));
  if (unsigned.length > 0) {
    await secrets.reload(tx);
    for (const s of unsigned) await markSigned(tx, s.runId, s.closing.sign(secrets), s.closing.count, s.closing.lastId);
  }
  return closed;
}

/**
 * The rows of a run whose events are derived, not stored (a gateway request: DESIGN.md section
 * 11, revised 2026-11-27): each batch's events stamped with its `at`, their ids fixed by the run
 * and the sequence (`stamp` replaces both, to compare with a run recorded otherwise). The same
 * sequences, edges and hashes as the batches appended one after another by `openRun` and
 * `closeRun`.
 *
 * @example
 * const rows = derivedEventRows('run_chatcmpl-01...', 'chatcmpl-01...', [{ at, events }]);
 */
export function derivedEventRows(
  runId: string,
  subjectId: string,
  batches: readonly DerivedBatch[],
  stamp?: Stamp,
): EventRow[] {
  const latest: Latest = new Map();
  const rows: EventRow[] = [];
  for (const batch of batches) {
    const last = rows[rows.length - 1];
    const head = { id: runId, event_count: last?.sequence ?? 0, last_event_id: last?.id ?? null };
    const at = (sequence: number) => ({
      id: `evt_${runId.slice(runId.indexOf('_') + 1)}_${sequence}`,
      created_at: batch.at,
    });
    rows.push(...eventRows(head, subjectId, batch.events, latest, stamp ?? at));
  }
  return rows;
}

/** A derived run's counters and root: what its run row keeps, and the log's leaf. */
export function derivedHead(rows: readonly EventRow[]): {
  event_count: number;
  last_event_id: string | null;
  root_hash: string;
} {
  const last = rows[rows.length - 1];
  return {
    event_count: last?.sequence ?? 0,
    last_event_id: last?.id ?? null,
    root_hash: merkleRoot(rows.map((r) => r.event_hash)),
  };
}

/**
 * Opens runs whose events are derived: the run rows only, with the opening's counters (one
 * statement for all).
 */
export async function openDerivedRuns(
  tx: Queryable,
  runs: readonly { run: NewRun; subjectId: string; batches: readonly DerivedBatch[] }[],
): Promise<void> {
  if (runs.length === 0) return;
  await insertDerivedRuns(
    tx,
    runs.map(({ run, subjectId, batches }) => ({
      ...run,
      ...derivedHead(derivedEventRows(run.id, subjectId, batches)),
    })),
  );
}

/**
 * Closes runs whose events are derived: each run row gets its root, event count and closing time
 * and enters the transparency log as a pending leaf, in one statement with no event row and no
 * signature (its certificate is signed when first read: {@link certifyRuns}). `insert`: the runs
 * were not opened (their opening and closing share a flush), so they are inserted closed.
 */
export async function closeDerivedRuns(
  tx: Queryable,
  runs: readonly { run: NewRun; batches: readonly DerivedBatch[]; summary: string }[],
  insert: boolean,
): Promise<void> {
  if (runs.length === 0) return;
  const closed = runs.map(({ run, batches, summary }) => ({
    ...run,
    summary,
    ...derivedHead(derivedEventRows(run.id, run.job_id, batches)),
  }));
  const done = insert ? await insertClosedRuns(tx, closed) : await closeRunRows(tx, closed);
  if (done !== runs.length) throw new Error(`${runs.length - done} derived evidence runs were not open`);
}

/**
 * Signs the certificate of each closed run that has none yet (a derived run's, on its first
 * read), with the active platform key, and returns the runs as they now stand: a run another
 * reader certified meanwhile is read back, so every read shows the same bytes.
 */
export async function certifyRuns(db: Queryable, secrets: PlatformSecrets, runs: readonly RunRow[]): Promise<RunRow[]> {
  const out: RunRow[] = [];
  for (const run of runs) {
    if (run.status !== 'signed' || run.root_signature_hex !== null || run.root_hash === null) {
      out.push(run);
      continue;
    }
    const sign = () => {
      const key = secrets.active;
      return {
        root_signature_hex: signCertificate(
          { run_id: run.id, event_count: run.event_count, root_hash_hex: run.root_hash ?? '' },
          key.privateKey,
        ),
        signer_public_key_hex: key.public_key_hex,
        signer_key_id: key.key_id,
      };
    };
    let stored = await storeCertificate(db, run.id, sign());
    if (!stored) {
      // Another process may have rotated the key, or certified the run first.
      await secrets.reload(db);
      stored = (await storeCertificate(db, run.id, sign())) ?? (await findRunById(db, run.id));
    }
    out.push(stored ?? run);
  }
  return out;
}

/**
 * Stores a derived run's events as rows (before events are appended to it the usual way: a
 * gateway request's failover or its end without a receipt), moving its counters.
 */
export async function storeDerivedRun(
  tx: Queryable,
  runId: string,
  subjectId: string,
  batches: readonly DerivedBatch[],
): Promise<void> {
  await appendEvents(tx, runId, derivedEventRows(runId, subjectId, batches));
}
