import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';

/** One built file, held in memory with its gzip twin: the whole dashboard is a few hundred KB. */
export interface StaticFile {
  body: Buffer;
  gzip: Buffer | undefined;
  type: string;
  etag: string;
}

/** The dashboard's built output: `index.html` and the content-hashed files under `assets/`. */
export interface DashboardFiles {
  dir: string;
  index: StaticFile | undefined;
  /** Keyed by the path under `assets/`, e.g. `index-3f2a1c.js`. */
  assets: Map<string, StaticFile>;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg', '.json', '.map', '.txt']);

function staticFile(path: string): StaticFile {
  const body = readFileSync(path);
  const ext = extname(path);
  const gzip = COMPRESSIBLE.has(ext) && body.length > 1024 ? gzipSync(body, { level: 9 }) : undefined;
  return {
    body,
    gzip,
    type: TYPES[ext] ?? 'application/octet-stream',
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
  };
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}

/**
 * Reads the built dashboard into memory once, at start-up. A missing or unbuilt directory gives
 * `index: undefined`, and `/` then says how to build it; the API works either way.
 *
 * @example
 * const files = loadDashboardFiles('packages/dashboard/dist');
 * files.assets.get('index-3f2a1c.js')?.type; // 'text/javascript; charset=utf-8'
 */
export function loadDashboardFiles(dir: string): DashboardFiles {
  const assets = new Map<string, StaticFile>();
  const indexPath = join(dir, 'index.html');
  if (!existsSync(indexPath)) return { dir, index: undefined, assets };
  const assetDir = join(dir, 'assets');
  if (existsSync(assetDir)) {
    for (const path of walk(assetDir)) assets.set(relative(assetDir, path).split(sep).join('/'), staticFile(path));
  }
  return { dir, index: staticFile(indexPath), assets };
}
