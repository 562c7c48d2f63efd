/** pglite-results.mjs: one statement's backend messages, read as the embedded store's thread reads them. */
export class OutputBuffer {
  append(chunk: Uint8Array): number;
  take(): Buffer;
}

export const HAS_ERROR: unique symbol;

export function readResult(
  out: Buffer,
  parserOf: (oid: number) => ((text: string, oid: number) => unknown) | undefined,
  onNotify: (channel: string, payload: string) => void,
): { rows: Record<string, unknown>[]; rowCount: number } | typeof HAS_ERROR;
