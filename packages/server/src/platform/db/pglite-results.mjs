// One statement's backend messages, as the embedded store's thread (pglite-worker.mjs) receives
// them from PGlite, read into the result the store answers with. Plain JavaScript importing only
// Node's own modules, like the worker that loads it (a worker thread does not inherit tsx's or
// vitest's loaders).
//
// PGlite's own reading of its output (`execProtocol`, then `parse.parseResults`) builds a message
// object for every backend message and copies every field of every row into an ArrayBuffer of its
// own before decoding it: under the gateway's flushes that was about a sixth of the store thread's
// CPU. Here the bytes are read where they lie, and the rows are built in one pass, with the same
// type parsers and the same row and count shapes (pglite-results.test.ts compares the two).

/**
 * Collects a statement's output as PGlite hands it over (`execProtocolRawStream`'s `onRawData`,
 * called with views into WebAssembly memory that are only valid during the call), in one buffer
 * reused from statement to statement.
 */
export class OutputBuffer {
  buffer = Buffer.allocUnsafeSlow(64 * 1024);
  length = 0;

  /** Appends `chunk`; returns its length, as `onRawData` must. */
  append(chunk) {
    const needed = this.length + chunk.length;
    if (needed > this.buffer.length) {
      const grown = Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(needed)));
      this.buffer.copy(grown, 0, 0, this.length);
      this.buffer = grown;
    }
    this.buffer.set(chunk, this.length);
    this.length = needed;
    return chunk.length;
  }

  /** The output collected since the last call, valid until the next append. */
  take() {
    const out = this.buffer.subarray(0, this.length);
    this.length = 0;
    return out;
  }
}

/** Thrown (and caught by the worker) when the output holds an ErrorResponse: PGlite's parser then reads it. */
export const HAS_ERROR = Symbol('an ErrorResponse');

/**
 * Reads one extended-protocol statement's output: its rows, parsed by type (`parsers` by type OID,
 * as `parse.parseResults` does: PGlite's own parser for a type when `parsers` has none, else the
 * text), and its count as `parse.parseResults` gives it (`affectedRows`: the number in an INSERT,
 * UPDATE, DELETE, COPY or MERGE tag, 0 for others). Notifications raised meanwhile go to
 * `onNotify` in their order. Returns {@link HAS_ERROR} when the output holds an error, so that the
 * caller builds the error as PGlite would.
 *
 * @param {Buffer} out
 * @param {(oid: number) => ((text: string, oid: number) => unknown) | undefined} parserOf
 * @param {(channel: string, payload: string) => void} onNotify
 * @returns {{ rows: Record<string, unknown>[]; rowCount: number } | typeof HAS_ERROR}
 * @example
 * const result = readResult(output.take(), (oid) => pg.parsers[oid], (channel, payload) => post(channel, payload));
 */
export function readResult(out, parserOf, onNotify) {
  let rows = [];
  let names = [];
  let parsers = [];
  let oids = [];
  let rowCount = 0;
  let complete = false;
  let at = 0;
  while (at + 5 <= out.length) {
    const type = out[at];
    const end = at + 1 + out.readInt32BE(at + 1);
    let p = at + 5;
    switch (type) {
      case 0x54: {
        // RowDescription: name, table OID, column, type OID, length, modifier, format.
        if (complete) break;
        const count = out.readInt16BE(p);
        p += 2;
        names = new Array(count);
        parsers = new Array(count);
        oids = new Array(count);
        for (let i = 0; i < count; i++) {
          const nul = out.indexOf(0, p);
          names[i] = out.toString('utf8', p, nul);
          p = nul + 1 + 6;
          oids[i] = out.readInt32BE(p);
          parsers[i] = parserOf(oids[i]);
          p += 12;
        }
        break;
      }
      case 0x44: {
        // DataRow: each column's length (-1 for NULL) and text.
        if (complete) break;
        const count = out.readInt16BE(p);
        p += 2;
        const row = {};
        for (let i = 0; i < count; i++) {
          const length = out.readInt32BE(p);
          p += 4;
          if (length < 0) {
            row[names[i]] = null;
            continue;
          }
          const text = out.toString('utf8', p, p + length);
          p += length;
          const parse = parsers[i];
          row[names[i]] = parse ? parse(text, oids[i]) : text;
        }
        rows.push(row);
        break;
      }
      case 0x43: {
        // CommandComplete: the first statement's tag ends its result.
        if (complete) break;
        complete = true;
        const tag = out.toString('utf8', p, end - 1);
        const space = tag.indexOf(' ');
        const verb = space < 0 ? tag : tag.slice(0, space);
        if (verb === 'INSERT' || verb === 'UPDATE' || verb === 'DELETE' || verb === 'COPY' || verb === 'MERGE')
          rowCount = parseInt(tag.slice(tag.lastIndexOf(' ') + 1), 10);
        break;
      }
      case 0x41: {
        // NotificationResponse: process id, channel, payload.
        const nul = out.indexOf(0, p + 4);
        onNotify(out.toString('utf8', p + 4, nul), out.toString('utf8', nul + 1, end - 1));
        break;
      }
      case 0x45:
        return HAS_ERROR;
      default:
        // ParseComplete, BindComplete, CloseComplete, NoData, ReadyForQuery, notices: nothing to read.
        break;
    }
    at = end;
  }
  return { rows, rowCount };
}
