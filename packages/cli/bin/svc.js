#!/usr/bin/env node
// The `svc` binary: runs the TypeScript sources through tsx (see docs/decisions.md).
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
