/**
 * What API-key verification costs per request: `GET /api/v1/config` with a valid key (auth,
 * scope check, rate-limit buckets) against `GET /api/v1/downloads` without one (same work
 * otherwise: a small JSON answer, no store access). Same server, same run. See bench/README.md.
 *
 * @example
 * npx tsx bench/auth.ts --duration 10 --connections 50 --requests 5000
 */
import { availableParallelism, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { loadConfig, startServer } from '@svc/server';
import { createTestStore } from '@svc/server/testing';
import { measureThroughput, positiveInt, printTable, ratio, sequentialLatency } from './lib.js';
import { UNLIMITED_RATES } from './svc.js';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    requests: { type: 'string', default: '5000' },
  },
});
const duration = positiveInt('duration', values.duration);
const connections = positiveInt('connections', values.connections);
const requests = positiveInt('requests', values.requests);

const store = await createTestStore();
const env = {
  SVC_LOG_LEVEL: 'silent',
  ...UNLIMITED_RATES,
  ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
};
const svc = await startServer(loadConfig({ 'data-dir': store.dataDir, port: '0', host: '127.0.0.1' }, env));
try {
  const signup = await fetch(`${svc.url}/api/v1/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'bench@example.test', password: 'benchmark password' }),
  });
  const { api_key: key } = (await signup.json()) as { api_key: string };
  const auth = { authorization: `Bearer ${key}` };
  const open = `${svc.url}/api/v1/downloads`;
  const guarded = `${svc.url}/api/v1/config`;

  console.log(
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), store ${svc.ctx.db.kind}`,
  );
  console.log(
    `latency: ${requests} sequential requests each; throughput: ${connections} connections, ${duration}s each\n`,
  );
  const latOpen = await sequentialLatency(open, requests);
  const latKey = await sequentialLatency(guarded, requests, auth);
  const tOpen = await measureThroughput(open, { connections, duration });
  const tKey = await measureThroughput(guarded, { connections, duration, headers: auth });
  const us = (n: number) => n.toFixed(0);
  printTable([
    ['', 'p50 µs', 'p99 µs', 'req/s', 'failed'],
    ['no key (/downloads)', us(latOpen.p50), us(latOpen.p99), Math.round(tOpen.rps).toString(), String(tOpen.failed)],
    ['valid key (/config)', us(latKey.p50), us(latKey.p99), Math.round(tKey.rps).toString(), String(tKey.failed)],
    [
      'key verification adds',
      us(latKey.p50 - latOpen.p50),
      us(latKey.p99 - latOpen.p99),
      ratio(tKey.rps, tOpen.rps),
      '',
    ],
  ]);
} finally {
  await svc.close();
  await store.drop();
}
