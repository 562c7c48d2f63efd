#!/usr/bin/env node
// `npm test`: the store-dependent files on the embedded store (PGlite) and, at the same time, on
// PostgreSQL. The files that cannot see the store run once, in the PostgreSQL pass, and the
// store-dependent ones that declare one store enough once, in the PGlite pass, so that the two
// passes take about as long (the rule is in scripts/store-tests.ts). Without PostgreSQL, or with
// SVC_TEST_STORES naming one store, one pass runs every file. The two passes overlap because each spends much of its time
// waiting (on child processes, sockets, timers): one after the other, the CPUs sat idle for about
// a third of the run. The PostgreSQL pass's output goes to a file, printed when both are done;
// SVC_TEST_SERIAL=1 runs the passes one after the other with both outputs live. PostgreSQL comes from DATABASE_URL, or from a throwaway cluster started
// here when the server binaries are installed (Debian's `postgresql` package). Redis likewise, for
// the shared rate limits. What cannot run is skipped with a line saying so. Extra arguments go to
// vitest. At the end: each pass's time, the slowest files and the files that cost the most CPU.
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const only = process.env.SVC_TEST_STORES?.split(',') ?? ['pglite', 'postgres'];
const cleanups = [];
const results = [];
const fileTimes = [];
const fileCpu = [];

function log(line) {
  process.stdout.write(`[svc test] ${line}\n`);
}

function findPgBin() {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : undefined;
}

function asPostgresUser(cmd, cmdArgs) {
  // initdb and postgres refuse to run as root; use the `postgres` account the package creates.
  if (process.getuid?.() === 0)
    return spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...cmdArgs], { encoding: 'utf8' });
  return spawnSync(cmd, cmdArgs, { encoding: 'utf8' });
}

function startPostgres() {
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL };
  const bin = findPgBin();
  if (!bin) return { skip: 'no DATABASE_URL and no PostgreSQL server binaries (apt-get install postgresql)' };
  const dir = mkdtempSync(join(memoryDir() ?? tmpdir(), 'svc-pg-'));
  chmodSync(dir, 0o777);
  const data = join(dir, 'data');
  const port = 20000 + Math.floor(Math.random() * 20000);
  let r = asPostgresUser(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  if (r.status !== 0) return { skip: `initdb failed: ${r.stderr || r.error}` };
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300`;
  r = asPostgresUser(join(bin, 'pg_ctl'), ['-D', data, '-o', opts, '-l', join(dir, 'log'), '-w', 'start']);
  if (r.status !== 0)
    return {
      skip: `PostgreSQL did not start: ${r.stderr}${existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8') : ''}`,
    };
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
  const child = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  cleanups.push(() => child.kill('SIGKILL'));
  return { url: `redis://127.0.0.1:${port}` };
}

/** /dev/shm when it is a tmpfs with room for a cluster (PostgreSQL's files then stay in memory). */
function memoryDir() {
  try {
    const fs = statfsSync('/dev/shm');
    return fs.bavail * fs.bsize >= 2 * 1024 ** 3 ? '/dev/shm' : undefined;
  } catch {
    return undefined;
  }
}

/** A directory for the overlapping pass's output, removed at the end. */
function logDir() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-log-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * One vitest run on one store; resolves when it exits. `leaveOut` names the classes of test files
 * (scripts/store-tests.ts) the other pass runs. With `logFile` its output goes there instead of
 * this terminal.
 */
async function runVitest(label, env, { leaveOut, logFile }) {
  const reportDir = mkdtempSync(join(tmpdir(), 'svc-vitest-'));
  const report = join(reportDir, 'report.json');
  log(
    `running the suite${leaveOut ? ` but its ${leaveOut} files (the other pass runs those)` : ''} on ${label}${logFile ? ` (output in ${logFile}, printed at the end)` : ''}`,
  );
  const started = Date.now();
  const out = logFile ? openSync(logFile, 'w') : undefined;
  // vitest.config.ts adds the JSON and file-time reporters when SVC_TEST_REPORT_DIR is set.
  // A pass may find none of its files among the paths given (the other pass runs them all): that
  // is not a failure.
  const extra = leaveOut && args.length > 0 ? ['--passWithNoTests'] : [];
  const child = spawn('npx', ['vitest', 'run', ...args, ...extra], {
    stdio: out === undefined ? 'inherit' : ['ignore', out, out],
    env: {
      ...process.env,
      ...env,
      SVC_TEST_REPORT_DIR: reportDir,
      ...(leaveOut ? { SVC_TEST_LEAVE_OUT: leaveOut } : {}),
    },
  });
  const status = await new Promise((resolve) => {
    child.on('error', () => resolve(1));
    child.on('exit', (code) => resolve(code ?? 1));
  });
  if (out !== undefined) closeSync(out);
  const seconds = (Date.now() - started) / 1000;
  let counts = { passed: 0, failed: 0, skipped: 0, files: 0 };
  if (existsSync(report)) {
    const json = JSON.parse(readFileSync(report, 'utf8'));
    counts = {
      passed: json.numPassedTests,
      failed: json.numFailedTests,
      skipped: json.numPendingTests + json.numTodoTests,
      files: json.testResults.length,
    };
    if (json.numFailedTestSuites > 0 && counts.failed === 0) counts.failed = json.numFailedTestSuites;
  } else if (status !== 0) counts.failed = 1;
  const times = join(reportDir, 'files.json');
  const timings = existsSync(times) ? JSON.parse(readFileSync(times, 'utf8')) : [];
  // scripts/file-cpu-setup.ts: one line per file, its worker's CPU and its ended children's.
  const cpuLog = join(reportDir, 'cpu.jsonl');
  const cpu = existsSync(cpuLog)
    ? readFileSync(cpuLog, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];
  rmSync(reportDir, { recursive: true, force: true });
  return { label, status, seconds, ...counts, timings, cpu, logFile };
}

try {
  const redis = startRedis();
  if (redis.skip) log(`SKIPPED shared (Redis) rate-limit tests: ${redis.skip}`);
  const shared = redis.url ? { SVC_TEST_REDIS_URL: redis.url } : {};
  const pg = only.includes('postgres') ? startPostgres() : undefined;
  if (pg?.skip) log(`SKIPPED the PostgreSQL pass: ${pg.skip}`);
  const both = only.includes('pglite') && pg?.url !== undefined;
  const serial = process.env.SVC_TEST_SERIAL === '1';
  const passes = [];
  const pglitePass = () =>
    runVitest('pglite (embedded)', { ...shared, DATABASE_URL: '' }, { leaveOut: both ? 'independent' : undefined });
  const postgresPass = () =>
    runVitest(
      'postgres',
      { ...shared, DATABASE_URL: pg.url },
      {
        leaveOut: both ? 'oneStore' : undefined,
        logFile: both && !serial ? join(logDir(), 'postgres-pass.log') : undefined,
      },
    );
  if (only.includes('pglite')) passes.push(serial || !both ? await pglitePass() : pglitePass());
  if (pg?.url) passes.push(postgresPass());
  for (const pass of await Promise.all(passes)) {
    if (pass.logFile) {
      log(`output of the ${pass.label} pass:`);
      process.stdout.write(readFileSync(pass.logFile, 'utf8'));
    }
    for (const f of pass.timings) fileTimes.push({ label: pass.label, ...f, ms: f.collectMs + f.runMs });
    for (const f of pass.cpu) fileCpu.push({ label: pass.label, ...f, ms: f.selfMs + f.childrenMs });
    results.push(pass);
  }
} finally {
  for (const cleanup of cleanups.reverse()) cleanup();
}

// SVC_TEST_FILE_REPORT=<path>: every file's time and CPU as JSON, for finding where the rest goes.
if (process.env.SVC_TEST_FILE_REPORT)
  writeFileSync(process.env.SVC_TEST_FILE_REPORT, JSON.stringify({ times: fileTimes, cpu: fileCpu }, null, 1));

const total = results.reduce(
  (t, r) => ({ passed: t.passed + r.passed, failed: t.failed + r.failed, skipped: t.skipped + r.skipped }),
  { passed: 0, failed: 0, skipped: 0 },
);
log('slowest files:');
for (const f of fileTimes.sort((a, b) => b.ms - a.ms).slice(0, 10)) {
  log(
    `  ${(f.ms / 1000).toFixed(1).padStart(6)} s  ${f.file} (${f.label}; imports ${(f.collectMs / 1000).toFixed(1)} s)`,
  );
}
// On 2 CPUs the suite is bound by CPU, not by the slowest file: these are where it goes.
const cpuTotal = fileCpu.reduce((sum, f) => sum + f.ms, 0);
log(
  `CPU of the test files: ${(cpuTotal / 1000).toFixed(0)} s (test processes and the children they started); the most:`,
);
for (const f of fileCpu.sort((a, b) => b.ms - a.ms).slice(0, 10)) {
  log(
    `  ${(f.ms / 1000).toFixed(1).padStart(6)} s  ${f.file} (${f.label}; children ${(f.childrenMs / 1000).toFixed(1)} s)`,
  );
}
for (const r of results)
  log(
    `${r.label}: ${r.files} files, ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped in ${r.seconds.toFixed(0)} s (exit ${r.status})`,
  );
const failed = results.some((r) => r.status !== 0) || results.length === 0;
process.stdout.write(`total: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped\n`);
process.exit(failed ? 1 : 0);
