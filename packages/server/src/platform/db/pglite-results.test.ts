import { parse, PGlite, protocol, types } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_STORE_KIND } from '../../../test/harness.js';
import { statementMessage } from './pglite-protocol.mjs';
import { HAS_ERROR, OutputBuffer, readResult } from './pglite-results.mjs';

/**
 * The store's thread reads a statement's output itself (pglite-results.mjs) instead of through
 * PGlite's parser and `parse.parseResults`: the same rows, values and counts, from the same bytes.
 */
describe.runIf(TEST_STORE_KIND === 'pglite')("the store thread's reading of a statement's output", () => {
  let pg: PGlite;
  const output = new OutputBuffer();
  beforeAll(async () => {
    pg = await PGlite.create({
      parsers: { [types.INT8]: (value: string) => Number(value) },
    });
    await pg.exec(`
      CREATE TABLE results_probe (id serial PRIMARY KEY, doc jsonb, at timestamptz, tags text[]);
      LISTEN results_probe;
    `);
  });
  afterAll(() => pg.close());

  /** The statement's raw output, as the thread collects it. */
  async function outputOf(sql: string, params: (string | null)[] = []): Promise<Buffer> {
    await pg.execProtocolRawStream(statementMessage([], '', sql, params), {
      syncToFs: false,
      onRawData: (chunk) => output.append(chunk),
    });
    return Buffer.from(output.take());
  }

  /** What the thread answered before: PGlite's parser, then `parse.parseResults`. */
  function asPglite(raw: Buffer) {
    const messages: Parameters<typeof parse.parseResults>[0] = [];
    new protocol.Parser().parse(raw, (m) => messages.push(m));
    const [result] = parse.parseResults(messages, pg.parsers);
    if (!result) throw new Error('no result');
    return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
  }

  const read = (raw: Buffer, notes: string[][] = []) =>
    readResult(
      raw,
      (oid) => pg.parsers[oid] ?? types.parsers[oid],
      (channel, payload) => notes.push([channel, payload]),
    );

  const cases: [string, string, (string | null)[]][] = [
    [
      'every type the store modules read, nulls and non-ASCII text',
      `SELECT 1::int2 AS i2, 2::int4 AS i4, 9007199254740991::int8 AS i8, 1.5::float8 AS f8, 12.30::numeric AS num,
              true AS yes, false AS no, $1::text AS txt, '{"a":[1,"two"],"b":null}'::jsonb AS doc, '[1,2]'::json AS js,
              '\\x00017f80ff'::bytea AS bin, '2026-11-22T05:00:00.123Z'::timestamptz AS at, '2026-11-22'::date AS day,
              ARRAY['x', NULL, 'y,z', 'with "quote"'] AS tags, ARRAY[1, 2, 3]::int8[] AS nums,
              'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS id, NULL::text AS nothing, $2::text AS param_null`,
      ['héllo ✓ 𝄞 \\ "q"', null],
    ],
    ['a column name twice: the last value, at the first place', 'SELECT 1 AS a, 2 AS b, 3 AS a', []],
    ['no rows', 'SELECT 1 AS a WHERE false', []],
    [
      'rows inserted and returned',
      "INSERT INTO results_probe (doc, tags) VALUES ('{}', '{a}'), (NULL, NULL) RETURNING *",
      [],
    ],
    ['rows updated, none returned', "UPDATE results_probe SET at = '2026-01-01Z'", []],
    ['rows deleted, none there', 'DELETE FROM results_probe WHERE id < 0', []],
    ['a command without rows or count', 'SET LOCAL statement_timeout = 0', []],
    [
      'an output of many chunks: 3,000 rows and a 300 KB value',
      `SELECT n, repeat('é', 100) AS t, CASE WHEN n = 1 THEN repeat('x', 300000) END AS big FROM generate_series(1, 3000) n`,
      [],
    ],
  ];
  it.each(cases)('%s: what PGlite read', async (_, sql, params) => {
    const raw = await outputOf(sql, params);
    expect(read(raw)).toStrictEqual(asPglite(raw));
  });

  it('hands over the notifications in the output, in order', async () => {
    const notes: string[][] = [];
    const raw = await outputOf(
      "SELECT pg_notify('results_probe', 'one ✓'), pg_notify('results_probe', ''), pg_notify('results_probe', 'three')",
    );
    expect(read(raw, notes)).toStrictEqual(asPglite(raw));
    expect(notes).toEqual([
      ['results_probe', 'one ✓'],
      ['results_probe', ''],
      ['results_probe', 'three'],
    ]);
  });

  it('says so when the output holds an error, and the store goes on', async () => {
    expect(read(await outputOf('SELECT 1 / 0'))).toBe(HAS_ERROR);
    expect(read(await outputOf('SELECT 2 AS n'))).toStrictEqual({ rows: [{ n: 2 }], rowCount: 0 });
  });
});
