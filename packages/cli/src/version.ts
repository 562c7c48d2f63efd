import { readFileSync } from 'node:fs';

/** Written in by scripts/pack-agent.mjs (esbuild `define`) when svc is packed as a tarball. */
declare const SVC_PACKED_VERSION: string | undefined;

function checkoutVersion(): string {
  const url = new URL('../../../package.json', import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

/**
 * The version of this `svc`: the one written into the packed tarball, else the checkout's root
 * package.json (the server reports the same file's version in `GET /api/v1/health`).
 */
export const SVC_VERSION: string = typeof SVC_PACKED_VERSION === 'string' ? SVC_PACKED_VERSION : checkoutVersion();

/**
 * Orders two `MAJOR.MINOR.PATCH[-PRE]` versions: negative when `a` is older, positive when newer,
 * 0 when equal. A pre-release sorts before its release; anything unparsable compares as equal.
 *
 * @example
 * compareVersions('0.1.0', '0.2.0'); // < 0
 */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => /^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(?:\+.*)?$/.exec(v.trim());
  const pa = parse(a);
  const pb = parse(b);
  if (!pa || !pb) return 0;
  for (let i = 1; i <= 3; i++) {
    const d = Number(pa[i]) - Number(pb[i]);
    if (d !== 0) return d;
  }
  if (pa[4] === pb[4]) return 0;
  if (pa[4] === undefined) return 1;
  if (pb[4] === undefined) return -1;
  return pa[4] < pb[4] ? -1 : 1;
}
