import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';

export function safe(f: () => string): string {
  try {
    return f();
  } catch {
    return '';
  }
}

export const podman = (...args: string[]) => execFileSync('podman', args, { encoding: 'utf8' }).trim();

/** A busybox rootfs from Debian's busybox-static in `dir/rootfs`, packed as a tar (returned). */
function busyboxRootfs(dir: string, extra: (rootfs: string) => void = () => undefined): string {
  const rootfs = join(dir, 'rootfs');
  mkdirSync(join(rootfs, 'bin'), { recursive: true });
  for (const d of ['tmp', 'output', 'etc', 'proc', 'sys', 'dev']) mkdirSync(join(rootfs, d), { recursive: true });
  copyFileSync('/bin/busybox', join(rootfs, 'bin', 'busybox'));
  chmodSync(join(rootfs, 'bin', 'busybox'), 0o755);
  const applets = ['sh', 'cat', 'echo', 'ls', 'nc', 'dd', 'sleep', 'seq', 'id', 'wget', 'head', 'grep', 'wc', 'env'];
  for (const a of applets) symlinkSync('busybox', join(rootfs, 'bin', a));
  extra(rootfs);
  const tar = join(dir, 'rootfs.tar');
  execFileSync('tar', ['-C', rootfs, '-cf', tar, '.']);
  return tar;
}

/** An OCI archive of a busybox rootfs built from Debian's busybox-static: no registry involved. */
export function buildBusyboxArchive(dir: string, tag: string): string {
  podman('import', '--change', 'ENV=PATH=/bin', busyboxRootfs(dir), tag);
  const archive = join(dir, 'busybox.oci.tar');
  podman('save', '--format', 'oci-archive', '-o', archive, tag);
  podman('rmi', '-f', tag);
  return archive;
}

/** Copies a host program into `rootfs` at the same path, with the shared libraries `ldd` names. */
function copyProgram(rootfs: string, program: string): void {
  const libs = safeLdd(program);
  for (const file of [program, ...libs]) {
    const target = join(rootfs, file);
    mkdirSync(dirname(target), { recursive: true });
    if (!existsSync(target)) copyFileSync(file, target);
  }
}

function safeLdd(program: string): string[] {
  let out = '';
  try {
    out = execFileSync('ldd', [program], { encoding: 'utf8' });
  } catch {
    return []; // a static program
  }
  return [...out.matchAll(/(\/\S+) \(0x/g)].map((m) => m[1] ?? '').filter(Boolean);
}

/**
 * The runner image the tests of kinds 8, 9 and 10 use, imported into podman's store as `tag` (the
 * operator's image must hold what those programs need; docs/node-operator.md): busybox for a shell,
 * the host's node (its program for kinds 8/10, the capsule, `node` checks) and npm (`npm test`
 * checks), git with its libraries, and `files` (host path to image path) such as the programs.
 *
 * @example
 * importRunnerImage(dir, 'localhost/svc-runner:1', { [capsule]: '/opt/svc/capsule.mjs' });
 */
export function importRunnerImage(dir: string, tag: string, files: Record<string, string>): void {
  const tar = busyboxRootfs(dir, (rootfs) => {
    copyProgram(rootfs, process.execPath);
    copyProgram(rootfs, '/usr/bin/git');
    if (existsSync('/usr/lib/node_modules/npm')) {
      cpSync('/usr/lib/node_modules/npm', join(rootfs, 'usr/lib/node_modules/npm'), { recursive: true });
      symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(rootfs, 'usr/bin/npm'));
      // npm-cli.js starts with #!/usr/bin/env node.
      symlinkSync('/bin/busybox', join(rootfs, 'usr/bin/env'));
    }
    for (const [from, to] of Object.entries(files)) {
      mkdirSync(dirname(join(rootfs, to)), { recursive: true });
      copyFileSync(from, join(rootfs, to));
    }
  });
  podman('import', '--change', `ENV=PATH=${dirname(process.execPath)}:/usr/bin:/bin`, tar, tag);
}
