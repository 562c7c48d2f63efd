/** The part of `s3rver` (which ships no types) that the test S3 server calls. */
declare module 's3rver' {
  import type { AddressInfo } from 'node:net';
  interface S3rverOptions {
    port?: number;
    address?: string;
    silent?: boolean;
    directory: string;
    configureBuckets?: { name: string; configs: unknown[] }[];
  }
  // eslint-disable-next-line no-restricted-syntax -- the module exports its class as the default
  export default class S3rver {
    constructor(options: S3rverOptions);
    run(): Promise<AddressInfo>;
    /** Koa's middleware list (s3rver is a Koa app); composed at run(). */
    middleware: ((ctx: never, next: () => Promise<void>) => unknown)[];
    store: { getResourcePath(bucket: string, key: undefined, resource: string): string };
    close(): Promise<void>;
  }
}
