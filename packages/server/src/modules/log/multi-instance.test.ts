import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestApp,
  createTestStore,
  eventually,
  signUp,
  TEST_STORE_KIND,
  type TestApp,
  type TestStore,
} from '../../../test/harness.js';
import { closeTestRuns } from '../../../test/log-runs.js';
import { latestCheckpoint } from './store.js';

const onPostgres = TEST_STORE_KIND === 'postgres';
if (!onPostgres)
  console.log(
    '[svc test] SKIPPED the log under two server instances: needs PostgreSQL (runs in the DATABASE_URL pass)',
  );

/** Leaf indexes of every run closed, by run id. */
async function indexesOf(t: TestApp): Promise<number[]> {
  const { rows } = await t.ctx.db.query<{ leaf_index: number | null }>(
    'SELECT leaf_index::float8 AS leaf_index FROM log_leaves ORDER BY leaf_index',
  );
  return rows.map((r) => r.leaf_index ?? -1);
}

describe.skipIf(!onPostgres)('the transparency log under two server instances on one PostgreSQL', () => {
  let store: TestStore;
  let one: TestApp;
  let two: TestApp;
  beforeAll(async () => {
    store = await createTestStore();
    one = await createTestApp({ store, env: { SVC_LOG_CHECKPOINT_MS: '50' } });
    two = await createTestApp({ store, env: { SVC_LOG_CHECKPOINT_MS: '50' } });
  });
  afterAll(async () => {
    await one.close();
    await two.close();
    await store.drop();
  });

  it('numbers leaves appended on both at once densely, and the other takes over when the holder stops', async () => {
    const buyer = await signUp(one.app);
    for (let round = 0; round < 4; round++)
      await Promise.all([closeTestRuns(one.ctx, buyer.orgId, 12), closeTestRuns(two.ctx, buyer.orgId, 12)]);
    await eventually(async () => (await latestCheckpoint(one.ctx.db))?.tree_size === 96 || undefined);
    expect(await indexesOf(one)).toEqual(Array.from({ length: 96 }, (_, i) => i));

    // Whichever held the lease stops; the other numbers what arrives next.
    await one.close();
    await closeTestRuns(two.ctx, buyer.orgId, 6);
    await eventually(async () => (await latestCheckpoint(two.ctx.db))?.tree_size === 102 || undefined);
    expect(await indexesOf(two)).toEqual(Array.from({ length: 102 }, (_, i) => i));
    one = await createTestApp({ store, env: { SVC_LOG_CHECKPOINT_MS: '50' } });
  });
});
