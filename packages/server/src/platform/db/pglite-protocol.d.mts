/** pglite-protocol.mjs: one statement's frontend messages, as the embedded store's thread sends them. */
export function statementMessage(
  closes: readonly Uint8Array[],
  name: string,
  sql: string | undefined,
  params: readonly (string | Uint8Array | null)[],
): Buffer;
