import { protocol } from '@electric-sql/pglite';
import { describe, expect, it } from 'vitest';
import { statementMessage } from './pglite-protocol.mjs';

/** The messages as PGlite's own serializer writes them (what the store's thread sent before). */
function serialized(
  closes: readonly Uint8Array[],
  name: string,
  sql: string | undefined,
  params: (string | Uint8Array | null)[],
): Buffer {
  return Buffer.concat([
    ...closes,
    ...(sql === undefined ? [] : [protocol.serialize.parse({ name, text: sql })]),
    protocol.serialize.bind({ statement: name, values: params }),
    protocol.serialize.describe({ type: 'P' }),
    protocol.serialize.execute({}),
    protocol.serialize.sync(),
  ]);
}

describe("the store thread's statement messages", () => {
  const cases: [string, readonly Uint8Array[], string, string | undefined, (string | Uint8Array | null)[]][] = [
    ['no parameters, parsed anew', [], 'svc_0', 'SELECT 1', []],
    ['text, null and bytes, already parsed', [], 'svc_a', undefined, ['abc', null, new Uint8Array([0, 1, 255]), '']],
    [
      'multi-byte text, an escaped array literal, a lone surrogate',
      [],
      'svc_1b',
      'SELECT $1::text, $2::text[], $3::text',
      ['héllo ✓ 𝄞', '{"say \\"hi\\"",null}', 'broken \ud800 pair'],
    ],
    [
      'closes owed in front',
      [protocol.serialize.close({ type: 'S', name: 'svc_9' }), protocol.serialize.close({ type: 'S', name: 'svc_a' })],
      'svc_b',
      'INSERT INTO t VALUES ($1)',
      ['x'],
    ],
    // Past the writer's growth steps and this module's first buffer (64 KB): a flush's multi-row statement.
    [
      '300 KB of parameters',
      [],
      'svc_z',
      'SELECT * FROM unnest($1::text[], $2::text[])',
      ['a'.repeat(200_000), 'é'.repeat(50_000)],
    ],
  ];
  it.each(cases)('%s: the same bytes as PGlite serializes', (_, closes, name, sql, params) => {
    expect(Buffer.compare(statementMessage(closes, name, sql, params), serialized(closes, name, sql, params))).toBe(0);
  });

  it('reuses one buffer up to 1 MB, and keeps none for a larger message', () => {
    const kept = statementMessage([], 'svc_0', 'SELECT $1', ['x'.repeat(900_000)]).buffer;
    expect(statementMessage([], 'svc_1', 'SELECT 1', []).buffer).toBe(kept);
    const big = statementMessage([], 'svc_2', 'SELECT $1', ['y'.repeat(2_000_000)]);
    expect(big.buffer).not.toBe(kept);
    expect(statementMessage([], 'svc_3', 'SELECT 3', []).buffer).toBe(kept);
    expect(Buffer.compare(big, serialized([], 'svc_2', 'SELECT $1', ['y'.repeat(2_000_000)]))).toBe(0);
  });
});
