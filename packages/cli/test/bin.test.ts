import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SVC_BIN } from './spawn.js';

const PACKAGE = new URL('../../../package.json', import.meta.url);

/** The node flags of the binary's first line (`#!/usr/bin/env -S node <flags>`). */
function shebangFlags(): string[] {
  const [first = ''] = readFileSync(SVC_BIN, 'utf8').split('\n', 1);
  const match = /^#!\/usr\/bin\/env -S node((?: --[a-z-]+=\d+)+)$/.exec(first);
  if (!match?.[1]) throw new Error(`unexpected first line of bin/svc.js: ${first}`);
  return match[1].trim().split(' ');
}

describe('how svc starts', () => {
  it('runs with a 32 MB young-generation semi-space, the same through its binary and npm scripts', () => {
    const flags = shebangFlags();
    expect(flags).toEqual(['--max-semi-space-size=32']);
    const { scripts } = JSON.parse(readFileSync(PACKAGE, 'utf8')) as { scripts: Record<string, string> };
    expect(scripts.start).toBe(`node ${flags.join(' ')} packages/cli/bin/svc.js serve`);
    expect(scripts.svc).toBe(`node ${flags.join(' ')} packages/cli/bin/svc.js`);
  });

  it('starts through its first line with those flags in force', () => {
    // Executed as a file, as an installed `svc` is: env(1) splits the line (-S) and starts node with the flags.
    const printArgv = `data:text/javascript,${encodeURIComponent('console.log("execArgv=" + JSON.stringify(process.execArgv))')}`;
    const run = spawnSync(SVC_BIN, ['help'], {
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: `--import=${printArgv}` },
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain(`execArgv=${JSON.stringify(shebangFlags())}`);
    expect(run.stdout).toContain('svc <command> [options]');
  });
});
