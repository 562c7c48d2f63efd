#!/usr/bin/env -S node --max-semi-space-size=32
// The `svc` binary: runs the TypeScript sources through tsx (see docs/decisions.md).
// The first line's node flags are how `svc` runs (`npm start` and `npm run svc` pass the same):
// semi-spaces of 32 MB instead of Node's 16 halve how often the young generation is collected,
// so fewer of a busy server's short-lived objects live long enough to be copied into the old
// generation (docs/configuration.md, "The Node.js process").
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
