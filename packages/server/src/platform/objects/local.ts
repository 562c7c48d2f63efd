import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomToken } from '../ids.js';
import { assertObjectKey, type ObjectStore } from './interface.js';

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
  return {
    kind: 'local',
    location: { kind: 'local', root },
    root,
    pathOf,
    async put(key, body, contentType) {
      const target = pathOf(key);
      await mkdir(dirname(target), { recursive: true });
      const temp = `${target}.${randomToken(8)}.part`;
      try {
        await pipeline(Buffer.isBuffer(body) ? Readable.from([body]) : body, createWriteStream(temp));
        if (contentType) await writeFile(`${target}.content-type`, contentType);
        else await rm(`${target}.content-type`, { force: true });
        await rename(temp, target);
      } catch (err) {
        await rm(temp, { force: true });
        throw err;
      }
      return { bytes: (await stat(target)).size };
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
