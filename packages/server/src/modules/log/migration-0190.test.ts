import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStoreBefore, type StoreBefore } from '../../../test/store-before.js';
import { loadPlatformSecrets } from '../../platform/secrets.js';
import { sequenceOnce } from './sequencer.js';
import { leafOfRun } from './store.js';

/** Migration 0190 (the transparency log) over a store holding runs closed before it. */
describe('migration 0190_transparency_log over existing runs', () => {
  let store: StoreBefore;
  beforeAll(async () => {
    store = await openStoreBefore(190);
  });
  afterAll(() => store.close());

  it('enters every signed run as a leaf, oldest first, and leaves open runs out', async () => {
    const root = 'ab'.repeat(32);
    // Inserted newest first: the migration orders by the time each run was signed.
    await store.db.exec(`
      INSERT INTO organizations (id, name) VALUES ('org_old', 'old');
      INSERT INTO evidence_runs (id, org_id, subject_type, job_id, policy_id, trust_tier, work_type, event_count, status, root_hash, signed_at)
        VALUES ('run_c', 'org_old', 'request', 'chatcmpl-c', 'pol_x', 'standard', 'inference', 9, 'signed', '${root}', '2026-11-22T10:00:00.123456Z'),
               ('run_a', 'org_old', 'job', 'job_a', 'pol_x', 'standard', 'inference', 3, 'signed', '${root}', '2026-11-20T10:00:00Z'),
               ('run_open', 'org_old', 'job', 'job_open', 'pol_x', 'standard', 'inference', 1, 'open', NULL, NULL),
               ('run_b', 'org_old', 'work_order', 'wo_b', 'pol_x', 'standard', 'inference', 5, 'signed', '${root}', '2026-11-21T10:00:00Z');`);
    expect(await store.migrateRest()).toContain(190);
    const secrets = await loadPlatformSecrets(store.db, { signingKeySeedHex: undefined, keyPepper: undefined });
    const step = await store.db.transaction((tx) =>
      sequenceOnce(tx, { holder: 'inst_test', leaseMs: 5000, origin: 'svc.test/log', secrets }),
    );
    expect(step).toEqual({ held: true, signed: { tree_size: 3, added: 3 } });
    const leaves = await Promise.all(['run_a', 'run_b', 'run_c'].map((id) => leafOfRun(store.db, id)));
    expect(leaves.map((l) => l?.leaf_index)).toEqual([0, 1, 2]);
    expect(leaves[2]).toMatchObject({
      subject_type: 'request',
      subject_id: 'chatcmpl-c',
      event_count: 9,
      root_hash: root,
      closed_at: '2026-11-22T10:00:00.123Z',
    });
    expect(await leafOfRun(store.db, 'run_open')).toBeUndefined();
  });
});
