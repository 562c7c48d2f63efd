/**
 * A throwaway PostgreSQL cluster for a bench run, started the way `scripts/test.mjs` starts the
 * suite's (Debian's `postgresql` server binaries, in /dev/shm when it has room, fsync off), and
 * removed at the end. Benches take DATABASE_URL first; this is for `--store postgres` without one.
 *
 * @example
 * const pg = startThrowawayPostgres(); // { url, stop }
 * process.env.DATABASE_URL = pg.url;
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function asPostgresUser(cmd: string, args: string[]) {
  // initdb and postgres refuse to run as root; the package creates the `postgres` account.
  if (process.getuid?.() === 0)
    return spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { encoding: 'utf8' });
  return spawnSync(cmd, args, { encoding: 'utf8' });
}

function memoryDir(): string | undefined {
  try {
    const fs = statfsSync('/dev/shm');
    return fs.bavail * fs.bsize >= 2 * 1024 ** 3 ? '/dev/shm' : undefined;
  } catch {
    return undefined;
  }
}

export function startThrowawayPostgres(): { url: string; version: string; stop: () => void } {
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
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    version,
    stop() {
      asPostgresUser(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop']);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
