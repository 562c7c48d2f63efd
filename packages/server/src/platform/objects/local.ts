import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomToken } from '../ids.js';
import { assertObjectKey, type ObjectStore } from './interface.js';

/**
 * Objects as files under `root` (by default `<data dir>/objects`). A write goes to a temporary
 * file renamed into place, so a reader never sees half an object.
 *
 * @example
 * const objects = createLocalObjectStore(join(config.dataDir, 'objects'));
 */
export function createLocalObjectStore(root: string): ObjectStore & { root: string; pathOf(key: string): string } {
  const pathOf = (key: string) => {
    assertObjectKey(key);
    return join(root, ...key.split('/'));
  };
  return {
    kind: 'local',
    location: { kind: 'local', root },
    root,
    pathOf,
    async put(key, body) {
      const target = pathOf(key);
      await mkdir(dirname(target), { recursive: true });
      const temp = `${target}.${randomToken(8)}.part`;
      try {
        await pipeline(Buffer.isBuffer(body) ? Readable.from([body]) : body, createWriteStream(temp));
        await rename(temp, target);
      } catch (err) {
        await rm(temp, { force: true });
        throw err;
      }
      return { bytes: (await stat(target)).size };
    },
    async stat(key) {
      try {
        const s = await stat(pathOf(key));
        return s.isFile() ? { bytes: s.size } : undefined;
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
      return existed;
    },
  };
}
