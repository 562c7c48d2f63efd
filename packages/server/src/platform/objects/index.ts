import { join } from 'node:path';
import type { Config } from '../config.js';
import type { ObjectStore } from './interface.js';
import { createLocalObjectStore } from './local.js';
import { createS3ObjectStore } from './s3.js';

export { assertObjectKey, type ObjectStore } from './interface.js';

/** The object store `config` asks for: S3 when `SVC_S3_BUCKET` is set, else `<data dir>/objects`. */
export function createObjectStore(config: Pick<Config, 'dataDir' | 's3'>): ObjectStore {
  return config.s3 ? createS3ObjectStore(config.s3) : createLocalObjectStore(join(config.dataDir, 'objects'));
}
