// The worker thread of the embedded store (pglite.ts): PGlite and every statement run here, off the
// server's event loop. Plain JavaScript importing only plain JavaScript of our own
// (pglite-protocol.mjs), so that it loads the same way under tsx, vitest and the compiled `svc`:
// a worker thread does not inherit their loaders.
//
// The thread serves one store at a time, opened by a message `{dir, port, buffersMb}` on the parent port and
// then spoken to on `port` until it is closed; the server may then open another store in the same
// thread (its JIT-compiled code is warm by then). Requests come in order on the port and each one
// takes PGlite's own locks, as the calls did when PGlite ran in the server's thread: a statement
// outside a transaction waits for the transaction lock, one inside a transaction for the query
// lock only, in the order they came.
import { mkdirSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, protocol, types } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { statementMessage } from './pglite-protocol.mjs';
import { HAS_ERROR, OutputBuffer, readResult } from './pglite-results.mjs';

/** The same rule as `toSafeNumber` in pglite.ts (which node-postgres's int8 parser also uses). */
const parsers = {
  [types.INT8]: (value) => {
    const n = Number(value);
    if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${value} exceeds the safe integer range`);
    return n;
  },
};

/** Prepared statements kept per store; past this many the least recently used are closed. */
const MAX_PREPARED = 500;

/**
 * Each distinct SQL text is parsed once into a named prepared statement and then only bound and
 * executed: PostgreSQL skips parsing and analysis on every later run, and after five runs plans
 * it once for all (its `plan_cache_mode = auto`: a generic plan unless that would cost more than
 * the custom ones). Statements the store no longer wants (evicted, or possibly left behind by a
 * failed first run) are closed in front of the next statement; closing a name that does not exist
 * is not an error.
 */
class PreparedStatements {
  names = new Map();
  toClose = [];
  next = 0;

  /** The statement's name, and whether it still has to be parsed. */
  name(sql) {
    const known = this.names.get(sql);
    if (known !== undefined) {
      // Most recently used last, so eviction takes the front.
      this.names.delete(sql);
      this.names.set(sql, known);
      return { name: known, parse: false };
    }
    return { name: `svc_${(this.next++).toString(36)}`, parse: true };
  }

  parsed(sql, name) {
    this.names.set(sql, name);
    if (this.names.size <= MAX_PREPARED) return;
    const [oldest, oldestName] = this.names.entries().next().value;
    this.names.delete(oldest);
    this.toClose.push(oldestName);
  }

  /** A statement that failed: a new one may exist under `name`, or a cached one may be stale. */
  failed(sql, name, parse, code) {
    // 0A000: a cached plan's result type changed under DDL; 26000: no such prepared statement.
    const stale = !parse && (code === '0A000' || code === '26000');
    if (parse || stale) this.toClose.push(name);
    if (stale) this.names.delete(sql);
  }

  /** Close messages owed, to send in front of the next statement. */
  takeCloses() {
    return this.toClose.splice(0).map((name) => protocol.serialize.close({ type: 'S', name }));
  }
}

/** Why a rolled back transaction's callback rejects: not an error of the store. */
const ROLLED_BACK = Symbol('rolled back');

/** One open store: its PGlite, its prepared statements and open transactions, and its port. */
class Store {
  prepared = new PreparedStatements();
  /** Open transactions by id: PGlite's transaction object, and how to end it. */
  transactions = new Map();
  nextTransaction = 1;

  /** A statement's output, collected as PGlite hands it over. */
  output = new OutputBuffer();
  onRawData = (chunk) => this.output.append(chunk);
  /** The parser of a column's type, as `parse.parseResults` picks it. */
  parserOf = (oid) => this.pg.parsers[oid] ?? types.parsers[oid];

  constructor(pg, port) {
    this.pg = pg;
    this.port = port;
    /** A NOTIFY raised by SQL (a trigger, migrations/0160_nodes_changed.sql), before its statement's answer. */
    this.onNotify = (channel, payload) => port.postMessage({ notify: channel, payload });
  }

  /**
   * One parameterised statement in one call into PGlite: (Close,) (Parse,) Bind, Describe, Execute
   * and Sync as a single message. `PGlite.query` makes six calls (it first asks for the parameter
   * types to serialize by them), which costs about 150 us more per statement. The parameters come
   * from the server's thread already as node-postgres sends them (text, bytes or null), so the
   * same SQL and values behave alike on both stores. The message is written into a buffer the
   * next statement reuses (pglite-protocol.mjs): PGlite reads it before it first yields. The
   * output is taken raw and read here (pglite-results.mjs); an error in it is read by PGlite's own
   * parser, so that it is the error `execProtocol` would throw. The caller holds PGlite's query lock.
   */
  async runStatement(sql, params) {
    const { prepared, pg, output } = this;
    const { name, parse: mustParse } = prepared.name(sql);
    const message = statementMessage(prepared.takeCloses(), name, mustParse ? sql : undefined, params);
    // PGlite keeps `onRawData` as its output callback after the call; its own calls (BEGIN, COMMIT,
    // `exec`) set theirs first, so nothing should be left here, and nothing left is this statement's.
    output.take();
    try {
      await pg.execProtocolRawStream(message, { syncToFs: false, onRawData: this.onRawData });
    } catch (e) {
      prepared.failed(sql, name, mustParse, e?.code);
      throw e;
    }
    const raw = output.take();
    const result = readResult(raw, this.parserOf, this.onNotify);
    if (result === HAS_ERROR) {
      const err = databaseError(raw);
      prepared.failed(sql, name, mustParse, err.code);
      throw err;
    }
    if (mustParse) prepared.parsed(sql, name);
    return result;
  }

  /** A statement outside a transaction: it takes the transaction lock too, as `PGlite.query` does. */
  query(sql, params) {
    const { pg } = this;
    return pg._runExclusiveTransaction(() =>
      pg._runExclusiveQuery(async () => {
        let result;
        try {
          result = await this.runStatement(sql, params);
        } catch (e) {
          // DDL changed the shape of a kept statement's result (0A000): it has been dropped, and
          // outside a transaction nothing was done, so the statement runs again, parsed anew.
          if (e?.code !== '0A000') throw e;
          result = await this.runStatement(sql, params);
        }
        // Written through before the answer leaves, so that a `kill -9` after it loses nothing.
        await pg.syncToFs();
        return result;
      }),
    );
  }

  /**
   * Opens a transaction with `PGlite.transaction` (BEGIN, then COMMIT or ROLLBACK), held open
   * until an `end` request for it comes: answers `id` with the transaction's id once BEGIN has
   * run, and the `end` request once COMMIT or ROLLBACK has.
   */
  begin(id) {
    const tx = this.nextTransaction++;
    const entry = { beginId: id, endId: undefined, pg: undefined, end: undefined };
    const ended = (err) => {
      this.transactions.delete(tx);
      // BEGIN itself failed: the request that opened it hears why.
      if (!entry.end) this.fail(entry.beginId, err);
      else if (err === undefined) this.answer(entry.endId, null);
      else this.fail(entry.endId, err);
    };
    this.pg
      .transaction(
        (pgTx) =>
          new Promise((resolve, reject) => {
            entry.pg = pgTx;
            entry.end = (commit) => (commit ? resolve() : reject(ROLLED_BACK));
            this.transactions.set(tx, entry);
            this.answer(id, tx);
          }),
      )
      .then(
        () => ended(undefined),
        (err) => ended(err === ROLLED_BACK ? undefined : err),
      );
  }

  transaction(tx) {
    const entry = this.transactions.get(tx);
    if (!entry?.end) throw new Error('Transaction is closed');
    return entry;
  }

  /** Answers request `r`: now for most, when its transaction has ended for `begin` and `end`. */
  serve(r) {
    this.handle(r).then(
      (value) => {
        if (value !== undefined) this.answer(r.id, value);
        if (r.op === 'close') this.port.close();
      },
      (err) => this.fail(r.id, err),
    );
  }

  async handle(r) {
    switch (r.op) {
      case 'query':
        return r.tx === undefined
          ? this.query(r.sql, r.params)
          : this.pg._runExclusiveQuery(() => this.runStatement(r.sql, r.params));
      case 'exec':
        await (r.tx === undefined ? this.pg.exec(r.sql) : this.transaction(r.tx).pg.exec(r.sql));
        return null;
      case 'begin':
        this.begin(r.id);
        return undefined;
      case 'end': {
        const entry = this.transaction(r.tx);
        entry.endId = r.id;
        entry.end(r.commit);
        return undefined;
      }
      case 'close':
        await this.pg.close();
        return null;
      default:
        throw new Error(`unknown request '${r.op}'`);
    }
  }

  answer(id, value) {
    try {
      this.port.postMessage({ id, value });
    } catch (err) {
      // A value a structured clone cannot carry fails its request, not the thread.
      this.fail(id, err);
    }
  }

  fail(id, err) {
    this.port.postMessage({ id, error: serializeError(err) });
  }
}

/** The first error in a statement's output, as PGlite's parser reads it (a `DatabaseError`). */
function databaseError(raw) {
  let error;
  new protocol.Parser().parse(raw, (message) => {
    if (message.name === 'error') error ??= message;
  });
  return error ?? new Error('PGlite answered a statement with an error it could not read');
}

/** Every field of an error that a structured clone can carry (PostgreSQL's: code, constraint, detail...). */
function serializeError(err) {
  if (!(err instanceof Error)) return { message: String(err), stack: undefined, fields: {} };
  const fields = {};
  for (const [key, value] of Object.entries(err)) {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) fields[key] = value;
  }
  return { message: err.message, stack: err.stack, fields: { name: err.name, ...fields } };
}

/** Opens the store in `dir` and serves it on `port`, which first hears whether it opened. */
async function open({ dir, port, buffersMb }) {
  let pg;
  try {
    if (!dir.startsWith('memory://')) mkdirSync(dir, { recursive: true });
    const startParams = [
      ...PGlite.defaultStartParams,
      ...(buffersMb === undefined ? [] : ['-c', `shared_buffers=${buffersMb}MB`]),
    ];
    pg = await PGlite.create(dir, {
      parsers,
      extensions: { vector },
      pgliteWasmModule: workerData.pgliteWasmModule,
      startParams,
    });
  } catch (err) {
    port.postMessage({ ready: false, error: serializeError(err) });
    port.close();
    return;
  }
  const store = new Store(pg, port);
  // A NOTIFY raised by SQL (a trigger, migrations/0160_nodes_changed.sql): PGlite hands it over
  // while the statement that committed it runs, so it is posted before that statement's answer.
  pg.onNotification((channel, payload) => port.postMessage({ notify: channel, payload }));
  port.on('message', (r) => store.serve(r));
  port.postMessage({ ready: true });
}

parentPort.on('message', (m) => void open(m));
