import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// `npm test` runs in a clone with nothing beside it (CI's clone has a copy of the steering repo's
// shared/ beside it, a developer's fresh clone does not): no code may reach outside the checkout.
const root = fileURLToPath(new URL('..', import.meta.url));
const skip = new Set(['node_modules', 'dist', '.svc', '.git', 'coverage', 'test-results']);

function* codeFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (skip.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* codeFiles(path);
    else if (/\.(ts|tsx|mts|cts|js|mjs|cjs)$/.test(entry.name)) yield path;
  }
}

describe('the repository is self-contained', () => {
  it('no source, test, script or bench file reads a path beside the checkout (../shared and the like)', () => {
    const outside: string[] = [];
    for (const top of ['packages', 'scripts', 'bench'])
      for (const file of codeFiles(join(root, top))) {
        const depth = relative(root, file).split('/').length - 1;
        const text = readFileSync(file, 'utf8');
        // A relative path with more `..` than the file is deep leaves the checkout (paths only a
        // test's own fixture tree holds are left alone: they name no folder beside the checkout).
        for (const match of text.matchAll(/['"`]((?:\.\.\/)+)(?:shared|steering|vectors)\b[^'"`]*['"`]/g)) {
          const ups = (match[1] ?? '').length / 3;
          if (ups > depth) outside.push(`${relative(root, file)}: ${match[0]}`);
        }
        if (/\bshared\/(vectors|spec|DESIGN)/.test(text) && !file.endsWith('self-contained.test.ts'))
          outside.push(`${relative(root, file)}: names the steering repo's shared/`);
      }
    expect(outside).toEqual([]);
  });

  it('the attestation vectors the tests read are in the repository, with their licences', () => {
    const vectors = fileURLToPath(new URL('../packages/protocol/vectors/attestation/', import.meta.url));
    expect(readdirSync(join(vectors, 'sev-snp')).sort()).toEqual(
      ['LICENSE', 'ask_ark_genoa.pem', 'ask_ark_milan.pem', 'attestation.bin', 'vcek.testcer'].sort(),
    );
    expect(readdirSync(join(vectors, 'tdx'))).toContain('LICENSE');
    expect(readdirSync(join(vectors, 'tdx'))).toContain('tdx_prod_quote_SPR_E4.dat');
  });
});
