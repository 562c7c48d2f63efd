import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { randomToken } from '../ids.js';
import { assertObjectKey, type ObjectStore } from './interface.js';

const ignore = () => undefined;

/**
 * Objects as files under `root` (by default `<data dir>/objects`). A write goes to a temporary
 * file renamed into place, so a reader never sees half an object. A content type, when given, is
 * kept beside the file in `<file>.content-type`.
 *
 * @example
 * const objects = createLocalObjectStore(join(config.dataDir, 'objects'));
 */
export function createLocalObjectStore(root: string): ObjectStore & { root: string; pathOf(key: string): string } {
  const pathOf = (key: string) => {
    assertObjectKey(key);
    return join(root, ...key.split('/'));
  };
  // Directories this process made or found, so a write to a known one costs no mkdir. One removed
  // behind our back (a test's cleanup, an operator) is made again when a write meets ENOENT.
  const madeDirs = new Set<string>();
  const remember = (dir: string) => {
    if (madeDirs.size >= 10_000) madeDirs.clear();
    madeDirs.add(dir);
  };
  const writeAgain = async (dir: string, write: () => Promise<unknown>) => {
    try {
      await write();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      madeDirs.delete(dir);
      await mkdir(dir, { recursive: true });
      remember(dir);
      await write();
    }
  };
  return {
    kind: 'local',
    location: { kind: 'local', root },
    root,
    pathOf,
    async put(key, body, contentType) {
      const target = pathOf(key);
      const dir = dirname(target);
      // A stream that fails while its directory is made (a size limit, a client gone) must not end
      // the process: heard from now on, its error is what the pipeline below rejects with.
      if (!Buffer.isBuffer(body)) body.on('error', ignore);
      // A stream cannot be replayed after a failed open, so its directory is always made first.
      if (!Buffer.isBuffer(body) || !madeDirs.has(dir)) {
        await mkdir(dir, { recursive: true });
        remember(dir);
      }
      const temp = `${target}.${randomToken(8)}.part`;
      try {
        // A buffer (every result and receipt body) is written in one call; a stream is piped.
        if (Buffer.isBuffer(body)) await writeAgain(dir, () => writeFile(temp, body));
        else await pipeline(body, createWriteStream(temp));
        if (contentType) await writeFile(`${target}.content-type`, contentType);
        else await rm(`${target}.content-type`, { force: true });
        await rename(temp, target);
      } catch (err) {
        await rm(temp, { force: true });
        throw err;
      }
      return { bytes: Buffer.isBuffer(body) ? body.length : (await stat(target)).size };
    },
    async stat(key) {
      try {
        const path = pathOf(key);
        const s = await stat(path);
        if (!s.isFile()) return undefined;
        const contentType = await readFile(`${path}.content-type`, 'utf8').catch(() => undefined);
        return contentType === undefined ? { bytes: s.size } : { bytes: s.size, contentType };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw err;
      }
    },
    async read(key) {
      const path = pathOf(key);
      if (!(await this.stat(key))) return undefined;
      return createReadStream(path);
    },
    async delete(key) {
      const path = pathOf(key);
      const existed = (await this.stat(key)) !== undefined;
      await rm(path, { force: true });
      await rm(`${path}.content-type`, { force: true });
      return existed;
    },
  };
}
