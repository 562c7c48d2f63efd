import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/**
 * Writes a file so that a reader (or the agent after a crash) sees either the old content or the
 * new one, never a torn mix: the bytes go to a temporary file beside the target, are flushed to
 * disk, and the temporary file is renamed over the target. `durable: false` skips both flushes:
 * still atomic, and the file outlives the process, but a power cut may lose it.
 *
 * @example
 * await writeFileAtomic(join(dataDir, 'node.json'), JSON.stringify(record), 0o600);
 */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  mode = 0o600,
  options: { durable?: boolean } = {},
): Promise<void> {
  const durable = options.durable ?? true;
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(tmp, 'wx', mode);
  try {
    await handle.writeFile(data);
    if (durable) await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await handle.close();
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  if (durable) await syncDirectory(dirname(path));
}

/** Makes the rename itself durable; some platforms cannot open a directory, which is fine. */
async function syncDirectory(dir: string): Promise<void> {
  try {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Best effort: the data is flushed; only the directory entry may lag on such platforms.
  }
}
