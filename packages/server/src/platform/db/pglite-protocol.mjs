// One statement's frontend messages for the embedded store's thread (pglite-worker.mjs), written
// into one buffer of the exact size. Plain JavaScript importing only Node's own modules, like the
// worker that loads it (a worker thread does not inherit tsx's or vitest's loaders).
//
// PGlite's `protocol.serialize` (pg-protocol's) builds each message in a writer that starts at
// 256 bytes and, for every few kilobytes more, allocates a new ArrayBuffer half again as large and
// copies into it; the parameters go through a second such writer and are copied once more, and
// the messages once more when they are joined. A multi-row statement of the group-commit writer
// (10 to 250 KB of parameters) so left 4 to 5 times its size in short-lived ArrayBuffers, and that
// external memory started a full collection of the thread's heap about twice a second under
// load. The bytes are the same (pglite-protocol.test.ts compares them).

/** What follows every Bind: `Describe` of the unnamed portal, `Execute` of it (all rows), `Sync`. */
const TAIL = Buffer.from([0x44, 0, 0, 0, 6, 0x50, 0, 0x45, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0x53, 0, 0, 0, 4]);

/** Reused between statements: a message is read while `execProtocol` is called, then never again. */
let scratch = Buffer.allocUnsafeSlow(64 * 1024);
/**
 * The largest the reused buffer grows to (a flush of many requests takes a few hundred KB); a
 * larger message (a knowledge-base document's chunks, say) gets a buffer of its own, so that one
 * big statement does not hold its size for the rest of the thread's life.
 */
const SCRATCH_MAX = 1024 * 1024;

/**
 * (the `closes`,) (Parse of `sql` as `name`, when given,) Bind of `name` with `params`
 * (text, bytes sent in binary format, or null), Describe, Execute and Sync: the messages
 * `protocol.serialize` writes for them, in one buffer. The buffer of a message up to 1 MB is only
 * valid until the next call: hand it to PGlite at once.
 *
 * @param {readonly Uint8Array[]} closes Close messages owed, sent first.
 * @param {string} name The prepared statement's name.
 * @param {string | undefined} sql The text to parse, or undefined when `name` is parsed already.
 * @param {readonly (string | Uint8Array | null)[]} params
 * @returns {Buffer}
 * @example
 * const { messages } = await pg.execProtocol(statementMessage([], 'svc_0', 'SELECT $1::int', ['1']), { syncToFs: false });
 */
export function statementMessage(closes, name, sql, params) {
  const lengths = lengthsOf(closes, name, sql, params);
  let out;
  if (lengths.total > SCRATCH_MAX) out = Buffer.allocUnsafeSlow(lengths.total);
  else {
    if (scratch.length < lengths.total) scratch = Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(lengths.total)));
    out = scratch;
  }
  let at = 0;
  for (const close of closes) {
    out.set(close, at);
    at += close.length;
  }
  if (sql !== undefined) {
    out[at++] = 0x50; // 'P'
    at = out.writeInt32BE(lengths.parse, at);
    at += out.write(name, at);
    out[at++] = 0;
    at += out.write(sql, at);
    out[at++] = 0;
    at = out.writeInt16BE(0, at); // no parameter types: the server infers them
  }
  out[at++] = 0x42; // 'B'
  at = out.writeInt32BE(lengths.bind, at);
  out[at++] = 0; // the unnamed portal
  at += out.write(name, at);
  out[at++] = 0;
  at = out.writeUInt16BE(params.length, at);
  for (const value of params) at = out.writeInt16BE(value === null || typeof value === 'string' ? 0 : 1, at);
  at = out.writeUInt16BE(params.length, at);
  for (const value of params) {
    if (value === null) {
      at = out.writeInt32BE(-1, at);
    } else if (typeof value === 'string') {
      const length = out.write(value, at + 4);
      out.writeInt32BE(length, at);
      at += 4 + length;
    } else {
      at = out.writeInt32BE(value.byteLength, at);
      out.set(value, at);
      at += value.byteLength;
    }
  }
  at = out.writeInt16BE(0, at); // results in text
  out.set(TAIL, at);
  at += TAIL.length;
  if (at !== lengths.total) throw new Error(`statement message: wrote ${at} bytes of ${lengths.total}`);
  return out.subarray(0, at);
}

/**
 * The Parse and Bind messages' length fields (which count themselves, not the type byte) and the
 * whole message's size in bytes.
 */
function lengthsOf(closes, name, sql, params) {
  const nameBytes = Buffer.byteLength(name);
  const parse = sql === undefined ? 0 : 4 + nameBytes + 1 + Buffer.byteLength(sql) + 1 + 2;
  // The portal '' and the statement's name, a format code and a value per parameter, and one
  // result format code (text).
  let bind = 4 + 1 + nameBytes + 1 + 2 + 2 * params.length + 2 + 2;
  for (const value of params) {
    bind += 4;
    if (value !== null) bind += typeof value === 'string' ? Buffer.byteLength(value) : value.byteLength;
  }
  let total = (sql === undefined ? 0 : 1 + parse) + 1 + bind + TAIL.length;
  for (const close of closes) total += close.length;
  return { parse, bind, total };
}
