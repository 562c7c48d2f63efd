/**
 * The one error type thrown by `@svc/protocol`: malformed input to a pure function.
 *
 * `path` is a JSON Pointer to the offending field (`/job_id`, `/leaves/3`), so the server can
 * render it directly as a validation detail (`{"path": "/job_id", "message": "..."}`).
 *
 * @example
 * try {
 *   svc1Message({ job_id: 'bad id', node_public_key_hex, result_hash_hex, metering_units: 1 });
 * } catch (err) {
 *   if (err instanceof ProtocolError) console.log(err.path); // "/job_id"
 * }
 */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
  readonly path: string | undefined;

  constructor(message: string, path?: string) {
    super(message);
    this.path = path;
  }
}
