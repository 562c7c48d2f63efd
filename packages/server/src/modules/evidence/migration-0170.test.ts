import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventHash, parentsOf, type EvidenceParent } from '@svc/protocol';
import { openStoreBefore, type StoreBefore } from '../../../test/store-before.js';
import type { Db } from '../../platform/db/index.js';
import { recordEvents } from './recorder.js';
import { graphOf } from './store.js';

const RUN = 'run_old';
const AT = '2026-11-20T10:00:00.000Z';

/** An event as written before migration 0170: its parents are edge rows, its hash covers them. */
function oldEvent(sequence: number, parents: EvidenceParent[]) {
  const fields = {
    run_id: RUN,
    sequence,
    event_type: `step.${sequence}`,
    subject_id: 'job_old',
    summary: `step ${sequence}`,
    metadata: { n: sequence },
    created_at: AT,
  };
  return { id: `evt_${sequence}`, ...fields, parents, event_hash: eventHash({ ...fields, parents }) };
}

/** Migration 0170 (an event's edges kept in its row) applied over a store that holds edge rows. */
describe('migration 0170_evidence_parents over existing runs', () => {
  let store: StoreBefore;
  let db: Db;
  beforeAll(async () => {
    store = await openStoreBefore(170);
    db = store.db;
  });
  afterAll(() => store.close());

  it("moves every edge into its event's parents in the hashed order, drops the table, and the run still verifies and grows", async () => {
    // Event 4 has two edges from event 3 (`caused_by` sorts before `then`) and one from event 1.
    const events = [
      oldEvent(1, []),
      oldEvent(2, [{ event_id: 'evt_1', edge_type: 'then' }]),
      oldEvent(3, [
        { event_id: 'evt_1', edge_type: 'caused_by' },
        { event_id: 'evt_2', edge_type: 'then' },
      ]),
      oldEvent(4, [
        { event_id: 'evt_1', edge_type: 'caused_by' },
        { event_id: 'evt_3', edge_type: 'caused_by' },
        { event_id: 'evt_3', edge_type: 'then' },
      ]),
    ];
    await db.exec(`
      INSERT INTO organizations (id, name) VALUES ('org_old', 'old');
      INSERT INTO evidence_runs (id, org_id, subject_type, job_id, policy_id, trust_tier, work_type, event_count, last_event_id)
        VALUES ('${RUN}', 'org_old', 'job', 'job_old', 'pol_x', 'standard', 'inference', 4, 'evt_4');`);
    for (const e of events)
      await db.query(
        `INSERT INTO evidence_events (id, run_id, sequence, event_type, subject_id, summary, metadata, created_at, event_hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [e.id, RUN, e.sequence, e.event_type, e.subject_id, e.summary, JSON.stringify(e.metadata), AT, e.event_hash],
      );
    // Edge rows in no particular order: the migration orders them.
    for (const e of [...events].reverse())
      for (const p of [...e.parents].reverse())
        await db.query(
          'INSERT INTO evidence_edges (run_id, from_event_id, to_event_id, edge_type) VALUES ($1, $2, $3, $4)',
          [RUN, p.event_id, e.id, p.edge_type],
        );

    expect(await store.migrateRest()).toContain(170);

    const { rows: tables } = await db.query<{ t: string | null }>("SELECT to_regclass('evidence_edges')::text AS t");
    expect(tables).toEqual([{ t: null }]);
    const graph = await graphOf(db, RUN);
    expect(graph.events.map((e) => JSON.parse(e.parents) as unknown)).toEqual(events.map((e) => e.parents));
    expect(graph.edges).toEqual(
      events.flatMap((e) =>
        e.parents.map((p) => ({ run_id: RUN, from_event_id: p.event_id, to_event_id: e.id, edge_type: p.edge_type })),
      ),
    );
    // Every stored hash recomputes from the edges as read now (what the API and the bundle check).
    const views = graph.events.map((e) => ({ ...e, metadata: JSON.parse(e.metadata) as Record<string, unknown> }));
    for (const e of views)
      expect(eventHash({ ...e, parents: parentsOf(e.id, views, graph.edges) }), e.id).toBe(e.event_hash);

    // The migrated run takes new events: a `then` from event 4 and a `caused_by` to the latest step.2.
    expect(
      await db.transaction((tx) =>
        recordEvents(tx, 'job_old', [{ type: 'step.5', summary: 'after', causedBy: ['step.2'] }]),
      ),
    ).toBe(true);
    const grown = await graphOf(db, RUN);
    expect(grown.events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(grown.edges.filter((e) => e.to_event_id === grown.events[4]?.id)).toEqual([
      { run_id: RUN, from_event_id: 'evt_2', to_event_id: grown.events[4]?.id, edge_type: 'caused_by' },
      { run_id: RUN, from_event_id: 'evt_4', to_event_id: grown.events[4]?.id, edge_type: 'then' },
    ]);
  });
});
