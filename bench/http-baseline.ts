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
import { loadConfig, startServer } from '@svc/server';
import { createTestStore } from '@svc/server/testing';
import { measureThroughput, positiveInt, printTable, ratio, WARMUP_SECONDS, type Throughput } from './lib.js';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;

interface Listening {
  url: string;
  close(): Promise<void>;
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
    res
      .writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) })
      .end(body);
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

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' } },
  });
  const duration = positiveInt('duration', values.duration);
  const connections = positiveInt('connections', values.connections);
  // A fresh temp dir, or a throwaway database next to DATABASE_URL's, dropped at the end.
  const store = await createTestStore();
  try {
    const env = { SVC_LOG_LEVEL: 'silent', ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}) };
    const svc = await startServer(loadConfig({ 'data-dir': store.dataDir, port: '0', host: '127.0.0.1' }, env));
    const bare = await startBareServer(svc.ctx.db.kind);
    try {
      console.log(
        `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), store ${svc.ctx.db.kind}`,
      );
      console.log(
        `GET /api/v1/health, ${connections} connections, ${duration}s each after ${WARMUP_SECONDS}s warm-up\n`,
      );
      const b = await measureThroughput(`${bare.url}/api/v1/health`, { connections, duration });
      const s = await measureThroughput(`${svc.url}/api/v1/health`, { connections, duration });
      const fmt = (r: Throughput) => [
        Math.round(r.rps).toString(),
        r.p50.toString(),
        r.p99.toString(),
        r.failed.toString(),
      ];
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
