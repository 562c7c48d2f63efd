/**
 * Compares `GET /api/v1/health` on the real server against a bare node:http server answering
 * the same JSON, so the framework's overhead per request is visible. See bench/README.md.
 *
 * @example
 * npx tsx bench/http-baseline.ts --duration 10 --connections 50
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { availableParallelism, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { loadConfig, startServer } from '@svc/server';
import { createTestStore } from '@svc/server/testing';

const WARMUP_SECONDS = 2;
const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

interface Listening {
  url: string;
  close(): Promise<void>;
}
interface Row {
  rps: number;
  p50: number;
  p99: number;
  failed: number;
}

function positiveInt(name: string, raw: string): number {
  if (!/^[1-9]\d*$/.test(raw)) throw new Error(`--${name} must be a positive integer, got '${raw}'`);
  return Number(raw);
}

/** A node:http server with nothing but the health route, answering the shape the real one does. */
function startBareServer(store: string): Promise<Listening> {
  const startedAt = Date.now();
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/api/v1/health') return void res.writeHead(404).end();
    const s = Math.floor((Date.now() - startedAt) / 1000);
    const uptime = s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
    const body = JSON.stringify({ ok: true, uptime, uptime_seconds: s, version: VERSION, store });
    // The content headers Fastify sends for a JSON reply (it adds only an x-request-id).
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      const close = () => new Promise<void>((done) => server.close(() => done()).closeAllConnections());
      resolve({ url: `http://127.0.0.1:${port}`, close });
    });
  });
}

async function measure(baseUrl: string, connections: number, duration: number): Promise<Row> {
  // One worker thread fires the requests, so the client does not share the server's event loop.
  const options = { url: `${baseUrl}/api/v1/health`, connections, workers: 1 };
  await autocannon({ ...options, duration: WARMUP_SECONDS });
  const r = await autocannon({ ...options, duration });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, failed: r.errors + r.timeouts + r.non2xx };
}

const ratio = (svc: number, bare: number) => (bare > 0 ? `${(svc / bare).toFixed(2)}x` : 'n/a');

/** Prints rows as aligned columns: the first left-aligned, the numbers right-aligned. */
function printTable(rows: string[][]): void {
  const width = (i: number) => Math.max(...rows.map((row) => row[i]?.length ?? 0));
  for (const row of rows) console.log(row.map((cell, i) => (i === 0 ? cell.padEnd(width(i)) : cell.padStart(width(i)))).join('  '));
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' } } });
  const duration = positiveInt('duration', values.duration);
  const connections = positiveInt('connections', values.connections);
  // A fresh temp dir, or a throwaway database next to DATABASE_URL's, dropped at the end.
  const store = await createTestStore();
  try {
    const env = { SVC_LOG_LEVEL: 'silent', ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}) };
    const svc = await startServer(loadConfig({ 'data-dir': store.dataDir, port: '0', host: '127.0.0.1' }, env));
    const bare = await startBareServer(svc.ctx.db.kind);
    try {
      console.log(`node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), store ${svc.ctx.db.kind}`);
      console.log(`GET /api/v1/health, ${connections} connections, ${duration}s each after ${WARMUP_SECONDS}s warm-up\n`);
      const b = await measure(bare.url, connections, duration);
      const s = await measure(svc.url, connections, duration);
      const fmt = (r: Row) => [Math.round(r.rps).toString(), r.p50.toString(), r.p99.toString(), r.failed.toString()];
      printTable([
        ['', 'req/s', 'p50 ms', 'p99 ms', 'failed'],
        ['bare', ...fmt(b)],
        ['svc', ...fmt(s)],
        ['svc/bare', ratio(s.rps, b.rps), ratio(s.p50, b.p50), ratio(s.p99, b.p99), ''],
      ]);
    } finally {
      await bare.close();
      await svc.close();
    }
  } finally {
    await store.drop();
  }
}

await main();
