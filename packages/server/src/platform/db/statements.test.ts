import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, TEST_STORE_KIND, type TestStore } from '../../../test/harness.js';
import { openDb, type Db } from './index.js';

/**
 * What the store modules rely on from `query`, pinned on both stores: parameters are sent the way
 * node-postgres sends them (types inferred by the server), results come back typed, errors keep
 * their SQLSTATE, and a failed statement inside a transaction rolls the transaction back.
 */
describe(`statements on the ${TEST_STORE_KIND} store`, () => {
  let store: TestStore;
  let db: Db;
  beforeAll(async () => {
    store = await createTestStore();
    db = await openDb(store);
    await db.exec(
      'CREATE TABLE stmt_probe (id text PRIMARY KEY, doc jsonb, n bigint, ok boolean, bytes bytea, tags text[], at timestamptz)',
    );
  });
  afterAll(async () => {
    await db.close();
    await store.drop();
  });

  it('sends text, numbers, booleans, JSON, bytes, arrays, dates and nulls, and reads them back typed', async () => {
    const at = new Date('2026-11-22T05:00:00.123Z');
    const bytes = Buffer.from([0, 1, 127, 128, 255]);
    const inserted = await db.query<{ id: string }>(
      'INSERT INTO stmt_probe VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id',
      [
        'it\'s \\ "quoted" ☃',
        JSON.stringify({ a: [1, 'two'] }),
        9_007_199_254_740_991,
        true,
        bytes,
        ['x', 'y,z', 'with "quote"'],
        at,
      ],
    );
    expect(inserted).toEqual({ rows: [{ id: 'it\'s \\ "quoted" ☃' }], rowCount: 1 });
    const { rows } = await db.query<{
      doc: unknown;
      n: number;
      ok: boolean;
      bytes: Uint8Array;
      tags: string[];
      at: Date;
    }>('SELECT doc, n, ok, bytes, tags, at FROM stmt_probe WHERE id = $1', ['it\'s \\ "quoted" ☃']);
    expect(rows[0]?.doc).toEqual({ a: [1, 'two'] });
    expect(rows[0]?.n).toBe(9_007_199_254_740_991);
    expect(rows[0]?.ok).toBe(true);
    expect(Buffer.from(rows[0]?.bytes ?? []).equals(bytes)).toBe(true);
    expect(rows[0]?.tags).toEqual(['x', 'y,z', 'with "quote"']);
    expect(rows[0]?.at.getTime()).toBe(at.getTime());
    await db.query('INSERT INTO stmt_probe (id, doc, n, ok) VALUES ($1, $2, $3, $4)', ['nulls', null, undefined, null]);
    expect((await db.query('SELECT doc, n, ok FROM stmt_probe WHERE id = $1', ['nulls'])).rows).toEqual([
      { doc: null, n: null, ok: null },
    ]);
    // A JavaScript array compares with ANY; an untyped parameter takes its type from the context.
    expect(
      (await db.query<{ id: string }>('SELECT id FROM stmt_probe WHERE id = ANY($1) ORDER BY id', [['nulls', 'nope']]))
        .rows,
    ).toEqual([{ id: 'nulls' }]);
    expect((await db.query<{ v: number }>('SELECT $1::int + 1 AS v', ['41'])).rows).toEqual([{ v: 42 }]);
    expect((await db.query('UPDATE stmt_probe SET ok = NOT coalesce(ok, false) WHERE id IS NOT NULL')).rowCount).toBe(
      2,
    );
  });

  it('reads arrays of text back element for element: quotes, backslashes, NULL and null, control characters, non-ASCII', async () => {
    const tricky = [
      'plain',
      '',
      'NULL',
      'null',
      'with "quotes" and \\ back\\slashes \\"',
      '{braces}, commas, [brackets]',
      ' spaced ',
      '☃ é 𝄞 \u2028',
      JSON.stringify({ a: 'b "c" \\ d', n: [1, null] }),
    ];
    // The fast path (strings and nulls) and node-postgres's (a control character, a number).
    for (const array of [tricky, [...tricky, null, undefined], [...tricky, 'tab\there', 'line\nfeed'], ['7', 7]]) {
      const { rows } = await db.query<{ a: (string | null)[]; n: number }>(
        'SELECT $1::text[] AS a, cardinality($1::text[]) AS n',
        [array],
      );
      expect(rows[0]?.a).toEqual(array.map((v) => (v === null || v === undefined ? null : String(v))));
      expect(rows[0]?.n).toBe(array.length);
    }
    const { rows } = await db.query<{ id: string | null; n: string }>(
      'SELECT id, n FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS v(id, n, o) ORDER BY o',
      [
        ['a"b', null],
        ['x', 'NULL'],
      ],
    );
    expect(rows).toEqual([
      { id: 'a"b', n: 'x' },
      { id: null, n: 'NULL' },
    ]);
  });

  it('keeps the SQLSTATE of a failed statement, and the next statement runs normally', async () => {
    await expect(db.query('INSERT INTO stmt_probe (id) VALUES ($1)', ['nulls'])).rejects.toMatchObject({
      code: '23505',
    });
    await expect(db.query('SELECT * FROM no_such_table')).rejects.toMatchObject({ code: '42P01' });
    await expect(db.query('SELECT $1::int', ['not a number'])).rejects.toMatchObject({ code: '22P02' });
    expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('a failed statement inside a transaction rolls the transaction back; a concurrent statement waits for it', async () => {
    const failed = db.transaction(async (tx) => {
      await tx.query('INSERT INTO stmt_probe (id) VALUES ($1)', ['in-tx']);
      await tx.query('INSERT INTO stmt_probe (id) VALUES ($1)', ['nulls']);
    });
    const outside = db.query<{ n: number }>("SELECT count(*)::int AS n FROM stmt_probe WHERE id = 'in-tx'");
    await expect(failed).rejects.toMatchObject({ code: '23505' });
    expect((await outside).rows).toEqual([{ n: 0 }]);
    await db.transaction(async (tx) => {
      await tx.query('INSERT INTO stmt_probe (id) VALUES ($1)', ['in-tx']);
    });
    expect(
      (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM stmt_probe WHERE id = 'in-tx'")).rows,
    ).toEqual([{ n: 1 }]);
  });

  it('a statement run many times still answers after the table under it changes shape', async () => {
    await db.exec('CREATE TABLE stmt_shape (id text PRIMARY KEY, a int)');
    await db.query("INSERT INTO stmt_shape VALUES ('k', 1)");
    // Past five runs PostgreSQL keeps one plan for a prepared statement.
    for (let i = 0; i < 7; i++)
      expect((await db.query('SELECT * FROM stmt_shape WHERE id = $1', ['k'])).rows).toEqual([{ id: 'k', a: 1 }]);
    await db.exec('ALTER TABLE stmt_shape ADD COLUMN b text');
    expect((await db.query('SELECT * FROM stmt_shape WHERE id = $1', ['k'])).rows).toEqual([
      { id: 'k', a: 1, b: null },
    ]);
  });

  it.runIf(TEST_STORE_KIND === 'pglite')(
    'PGlite parses each statement once, closes what a failed first run left, and keeps at most 500',
    async () => {
      const kept = async (text: string) =>
        (
          await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = $1', [
            text,
          ])
        ).rows[0]?.n;
      const sql = 'SELECT id FROM stmt_probe WHERE id = $1';
      for (let i = 0; i < 3; i++) await db.query(sql, ['nulls']);
      expect(await kept(sql)).toBe(1);
      // Parsed, then failed at execution: the statement exists until the next one closes it.
      const failing = 'INSERT INTO stmt_probe (id) VALUES ($1) RETURNING id';
      await expect(db.query(failing, ['nulls'])).rejects.toMatchObject({ code: '23505' });
      expect(await kept(failing)).toBe(0);
      await db.query(failing, ['fresh']);
      expect(await kept(failing)).toBe(1);
      for (let i = 0; i < 600; i++) await db.query(`SELECT ${i} AS n WHERE $1::int IS NOT NULL`, [i]);
      const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements');
      expect(rows[0]?.n).toBeLessThanOrEqual(501);
      expect(rows[0]?.n).toBeGreaterThan(400);
    },
  );
  it.runIf(TEST_STORE_KIND === 'postgres')(
    'PostgreSQL parses each statement once per connection, and names at most 1,000 texts',
    async () => {
      const sql = 'SELECT id FROM stmt_probe WHERE id = $1 AND $2::int > 0';
      const preparedHere = (tx: Pick<Db, 'query'>, text: string) =>
        tx.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = $1', [text]);
      // One transaction is one connection: the statement is prepared on it once, however often it runs.
      await db.transaction(async (tx) => {
        for (let i = 1; i <= 3; i++) expect((await tx.query(sql, ['nulls', i])).rows).toEqual([{ id: 'nulls' }]);
        expect((await preparedHere(tx, sql)).rows).toEqual([{ n: 1 }]);
      });
      for (let i = 0; i < 1100; i++) await db.query(`SELECT ${i} AS n WHERE $1::int IS NOT NULL`, [i]);
      await db.transaction(async (tx) => {
        const { rows } = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements');
        expect(rows[0]?.n).toBeLessThanOrEqual(1000);
        // Texts past the bound still run (unnamed).
        expect((await tx.query<{ n: number }>('SELECT 1099 AS n WHERE $1::int IS NOT NULL', [1])).rows).toEqual([
          { n: 1099 },
        ]);
      });
    },
  );
});
