import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';

export function safe(f: () => string): string {
  try {
    return f();
  } catch {
    return '';
  }
}

export const podman = (...args: string[]) => execFileSync('podman', args, { encoding: 'utf8' }).trim();

/** An OCI archive of a busybox rootfs built from Debian's busybox-static: no registry involved. */
export function buildBusyboxArchive(dir: string, tag: string): string {
  const rootfs = join(dir, 'rootfs');
  mkdirSync(join(rootfs, 'bin'), { recursive: true });
  for (const d of ['tmp', 'output', 'etc', 'proc', 'sys', 'dev']) mkdirSync(join(rootfs, d), { recursive: true });
  copyFileSync('/bin/busybox', join(rootfs, 'bin', 'busybox'));
  chmodSync(join(rootfs, 'bin', 'busybox'), 0o755);
  const applets = ['sh', 'cat', 'echo', 'ls', 'nc', 'dd', 'sleep', 'seq', 'id', 'wget', 'head', 'grep', 'wc'];
  for (const a of applets) symlinkSync('busybox', join(rootfs, 'bin', a));
  const tar = join(dir, 'rootfs.tar');
  execFileSync('tar', ['-C', rootfs, '-cf', tar, '.']);
  podman('import', '--change', 'ENV=PATH=/bin', tar, tag);
  const archive = join(dir, 'busybox.oci.tar');
  podman('save', '--format', 'oci-archive', '-o', archive, tag);
  podman('rmi', '-f', tag);
  return archive;
}
