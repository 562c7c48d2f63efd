/**
 * A throwaway PostgreSQL cluster for a bench run, started the way `scripts/test.mjs` starts the
 * suite's (Debian's `postgresql` server binaries, in /dev/shm when it has room, fsync off), and
 * removed at the end. Benches take DATABASE_URL first; this is for `--store postgres` without one.
 *
 * @example
 * const { values } = parseArgs({ options: { store: STORE_OPTION } });
 * const store = benchStore(values.store); // before createTestStore, which reads DATABASE_URL
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { atExit } from './lib.js';

/** `cmd args` as the `postgres` account when this runs as root: initdb and postgres refuse root. */
function postgresUserArgv(cmd: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
}

function asPostgresUser(cmd: string, args: string[]) {
  return spawnSync(...postgresUserArgv(cmd, args), { encoding: 'utf8' });
}

function memoryDir(): string | undefined {
  try {
    const fs = statfsSync('/dev/shm');
    return fs.bavail * fs.bsize >= 2 * 1024 ** 3 ? '/dev/shm' : undefined;
  } catch {
    return undefined;
  }
}

export function startThrowawayPostgres(): {
  url: string;
  version: string;
  stop: () => void;
  stopDetached: () => void;
} {
  const root = '/usr/lib/postgresql';
  const version = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))[0]
    : undefined;
  if (!version) throw new Error('no DATABASE_URL and no PostgreSQL server binaries (apt-get install postgresql)');
  const bin = join(root, version, 'bin');
  const dir = mkdtempSync(join(memoryDir() ?? tmpdir(), 'svc-bench-pg-'));
  chmodSync(dir, 0o777);
  const data = join(dir, 'data');
  const port = 20000 + Math.floor(Math.random() * 20000);
  let r = asPostgresUser(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  if (r.status !== 0) throw new Error(`initdb failed: ${r.stderr}`);
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300`;
  r = asPostgresUser(join(bin, 'pg_ctl'), ['-D', data, '-o', opts, '-l', join(dir, 'log'), '-w', 'start']);
  if (r.status !== 0) {
    const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8') : '';
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`PostgreSQL did not start: ${r.stderr}${log}`);
  }
  const stopArgs = ['-D', data, '-m', 'immediate', 'stop'];
  let stopped = false;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    version,
    /** Stops the cluster and removes its directory before it returns. */
    stop() {
      if (stopped) return;
      stopped = true;
      asPostgresUser(join(bin, 'pg_ctl'), stopArgs);
      rmSync(dir, { recursive: true, force: true });
    },
    /**
     * The same in a detached process that outlives this one, for an exit. A synchronous stop
     * (0.1 to 0.3 s) at exit is not safe: `npx tsx` relays a Ctrl-C to its child a second time
     * (npm forwards it to tsx) and SIGKILLs a child that does not acknowledge it within 60 ms,
     * which a process blocked in its exit handlers cannot; the cluster was left behind that way.
     */
    stopDetached() {
      if (stopped) return;
      stopped = true;
      const [cmd, args] = postgresUserArgv(join(bin, 'pg_ctl'), stopArgs);
      const script = `require('node:child_process').spawnSync(${JSON.stringify(cmd)}, ${JSON.stringify(args)});
        require('node:fs').rmSync(${JSON.stringify(dir)}, { recursive: true, force: true });`;
      spawn(process.execPath, ['-e', script], { detached: true, stdio: 'ignore' }).unref();
    },
  };
}

/** A bench's `--store pglite|postgres` option for `parseArgs`: postgres by default when DATABASE_URL is set. */
export const STORE_OPTION = { type: 'string', default: process.env.DATABASE_URL ? 'postgres' : 'pglite' } as const;

/** The store a bench runs on, as {@link benchStore} set it up. */
export interface BenchStore {
  kind: 'pglite' | 'postgres';
  /** How the bench reports it: `pglite`, `postgres` or `postgres 15 (a throwaway cluster, fsync off)`. */
  label: string;
  /** Stops and removes the throwaway cluster, if one was started (again at exit: a no-op then). */
  stop: () => void;
}

/**
 * Sets DATABASE_URL, which `createTestStore` and the `svc serve`s a bench starts read, to the store
 * `--store` names: unset for `pglite`; for `postgres` the cluster DATABASE_URL names, or else a
 * throwaway one ({@link startThrowawayPostgres}) that is stopped and removed when the bench
 * exits, however it exits (the end, an error, Ctrl-C, `timeout`). Call it before the first store.
 */
export function benchStore(flag: string): BenchStore {
  if (flag !== 'pglite' && flag !== 'postgres') throw new Error(`--store must be pglite or postgres, got '${flag}'`);
  if (flag === 'pglite') {
    delete process.env.DATABASE_URL;
    return { kind: 'pglite', label: 'pglite', stop: () => undefined };
  }
  if (process.env.DATABASE_URL) return { kind: 'postgres', label: 'postgres', stop: () => undefined };
  let cluster: ReturnType<typeof startThrowawayPostgres> | undefined = undefined;
  // Registered first: a Ctrl-C while the cluster starts is handled once the start returns.
  atExit(() => cluster?.stopDetached());
  cluster = startThrowawayPostgres();
  process.env.DATABASE_URL = cluster.url;
  return {
    kind: 'postgres',
    label: `postgres ${cluster.version} (a throwaway cluster, fsync off)`,
    stop: cluster.stop,
  };
}
