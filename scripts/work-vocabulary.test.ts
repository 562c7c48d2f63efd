import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// modules/work sits below the modules that own work (issue 44 point 1): it speaks of its own two
// kinds of work, a job's attempt and direct work, and what an owner decides comes through the
// completion port (work/completion.ts). So no file of it but its tests names the gateway, in
// code, comments, SQL, hop marks or README.md: its owners are named by their port, registered in
// context.ts. A mention anywhere in those files fails this one.
const root = fileURLToPath(new URL('..', import.meta.url));
const WORK = 'packages/server/src/modules/work';

function* workFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* workFiles(path);
    else if (!/\.test\.ts$/.test(entry.name)) yield path;
  }
}

/** `file:line: text` for every line of `files` that names the gateway, in any case. */
function gatewayMentions(files: { path: string; text: string }[]): string[] {
  return files.flatMap(({ path, text }) =>
    text.split('\n').flatMap((line, i) => (/gateway/i.test(line) ? [`${path}:${i + 1}: ${line.trim()}`] : [])),
  );
}

describe('modules/work speaks of its own work', () => {
  it('no file of modules/work but its tests names the gateway', () => {
    const files = [...workFiles(join(root, WORK))].map((file) => ({
      path: relative(root, file),
      text: readFileSync(file, 'utf8'),
    }));
    expect(files.some((f) => f.path === `${WORK}/README.md`)).toBe(true);
    expect(files.some((f) => f.path === `${WORK}/store.ts`)).toBe(true);
    expect(gatewayMentions(files)).toEqual([]);
  });

  it('sees a mention in any case and anywhere in a line', () => {
    const text = [
      '// direct work, leased straight to its node',
      "hop('gateway.receipt');",
      ' * the Gateway writes its own records',
      'export const shortenGATEWAYLeases = 1;',
    ].join('\n');
    expect(gatewayMentions([{ path: `${WORK}/store.ts`, text }])).toEqual([
      `${WORK}/store.ts:2: hop('gateway.receipt');`,
      `${WORK}/store.ts:3: * the Gateway writes its own records`,
      `${WORK}/store.ts:4: export const shortenGATEWAYLeases = 1;`,
    ]);
  });
});
