import { vi } from 'vitest';
import type { Db } from '../src/platform/db/index.js';

/**
 * Spies on `db.transaction` (until `vi.restoreAllMocks()`): `onStatement` hears the SQL of every
 * statement run inside a transaction, and its parameters, as it runs. Lets a test pick out the
 * transactions it cares about by what they do, so the background ticks' own transactions (the
 * lease sweeper's, every second) cannot disturb it.
 *
 * @example
 * const sql: string[] = [];
 * onTransactionStatements(ctx.db, (text) => sql.push(text));
 */
export function onTransactionStatements(
  db: Db,
  onStatement: (sql: string, params: readonly unknown[] | undefined) => void,
): void {
  const transaction = db.transaction.bind(db);
  vi.spyOn(db, 'transaction').mockImplementation((fn) =>
    transaction((tx) =>
      fn({
        query: (sql, params) => {
          onStatement(sql, params);
          return tx.query(sql, params);
        },
        exec: (sql) => tx.exec(sql),
      }),
    ),
  );
}
