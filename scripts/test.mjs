#!/usr/bin/env node
// `npm test`: the whole suite, once on the embedded store (PGlite) and once on PostgreSQL.
// PostgreSQL comes from DATABASE_URL, or from a throwaway cluster started here when the server
// binaries are installed (Debian's `postgresql` package). Redis likewise, for the shared rate
// limits. What cannot run is skipped with a line saying so. Extra arguments go to vitest.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const only = process.env.SVC_TEST_STORES?.split(',') ?? ['pglite', 'postgres'];
const cleanups = [];
const results = [];

function log(line) {
  process.stdout.write(`[svc test] ${line}\n`);
}

function findPgBin() {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : undefined;
}

function asPostgresUser(cmd, cmdArgs) {
  // initdb and postgres refuse to run as root; use the `postgres` account the package creates.
  if (process.getuid?.() === 0) return spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...cmdArgs], { encoding: 'utf8' });
  return spawnSync(cmd, cmdArgs, { encoding: 'utf8' });
}

function startPostgres() {
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL };
  const bin = findPgBin();
  if (!bin) return { skip: 'no DATABASE_URL and no PostgreSQL server binaries (apt-get install postgresql)' };
  const dir = mkdtempSync(join(tmpdir(), 'svc-pg-'));
  chmodSync(dir, 0o777);
  const data = join(dir, 'data');
  const port = 20000 + Math.floor(Math.random() * 20000);
  let r = asPostgresUser(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  if (r.status !== 0) return { skip: `initdb failed: ${r.stderr || r.error}` };
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300`;
  r = asPostgresUser(join(bin, 'pg_ctl'), ['-D', data, '-o', opts, '-l', join(dir, 'log'), '-w', 'start']);
  if (r.status !== 0) return { skip: `PostgreSQL did not start: ${r.stderr}${existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8') : ''}` };
  cleanups.push(() => {
    asPostgresUser(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop']);
    rmSync(dir, { recursive: true, force: true });
  });
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres` };
}

function startRedis() {
  if (process.env.SVC_TEST_REDIS_URL) return { url: process.env.SVC_TEST_REDIS_URL };
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  const bin = which.stdout.trim();
  if (!bin) return { skip: 'no SVC_TEST_REDIS_URL and no redis-server (apt-get install redis-server)' };
  const port = 40000 + Math.floor(Math.random() * 20000);
  const child = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  cleanups.push(() => child.kill('SIGKILL'));
  return { url: `redis://127.0.0.1:${port}` };
}

function runVitest(label, env) {
  const report = join(mkdtempSync(join(tmpdir(), 'svc-vitest-')), 'report.json');
  log(`running the suite on ${label}`);
  const r = spawnSync('npx', ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...args], {
    stdio: 'inherit',
    env: { ...process.env, ...env },
  });
  let counts = { passed: 0, failed: 0, skipped: 0 };
  if (existsSync(report)) {
    const json = JSON.parse(readFileSync(report, 'utf8'));
    counts = { passed: json.numPassedTests, failed: json.numFailedTests, skipped: json.numPendingTests + json.numTodoTests };
    if (json.numFailedTestSuites > 0 && counts.failed === 0) counts.failed = json.numFailedTestSuites;
  } else if (r.status !== 0) counts.failed = 1;
  results.push({ label, status: r.status ?? 1, ...counts });
}

try {
  const redis = startRedis();
  if (redis.skip) log(`SKIPPED shared (Redis) rate-limit tests: ${redis.skip}`);
  const shared = redis.url ? { SVC_TEST_REDIS_URL: redis.url } : {};
  if (only.includes('pglite')) runVitest('pglite (embedded)', { ...shared, DATABASE_URL: '' });
  if (only.includes('postgres')) {
    const pg = startPostgres();
    if (pg.skip) log(`SKIPPED the PostgreSQL pass: ${pg.skip}`);
    else runVitest('postgres', { ...shared, DATABASE_URL: pg.url });
  }
} finally {
  for (const cleanup of cleanups.reverse()) cleanup();
}

const total = results.reduce((t, r) => ({ passed: t.passed + r.passed, failed: t.failed + r.failed, skipped: t.skipped + r.skipped }), { passed: 0, failed: 0, skipped: 0 });
for (const r of results) log(`${r.label}: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped (exit ${r.status})`);
const failed = results.some((r) => r.status !== 0) || results.length === 0;
process.stdout.write(`total: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped\n`);
process.exit(failed ? 1 : 0);
