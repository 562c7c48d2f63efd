import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { classifyTests, testFiles } from './store-tests.js';

describe('which test files run on every store', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-store-tests-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };

  it('follows imports across files and workspace packages to the store; type-only imports do not count', () => {
    write(
      'packages/server/package.json',
      JSON.stringify({ name: '@svc/server', exports: { '.': './src/index.ts', './testing': './test/harness.ts' } }),
    );
    write('packages/server/src/platform/db/index.ts', 'export const openDb = 1;\n');
    write('packages/server/src/platform/db/interface.ts', 'export interface Db {}\n');
    write('packages/server/test/test-store.ts', 'export const createTestStore = 1;\n');
    write('packages/server/test/harness.ts', "export { createTestStore } from './test-store.js';\n");
    write('packages/server/src/pure.ts', 'export const add = (a: number, b: number) => a + b;\n');
    write(
      'packages/server/src/service.ts',
      "import type { Db } from './platform/db/interface.js';\nimport { openDb } from './platform/db/index.js';\n",
    );
    write(
      'packages/server/src/pure.test.ts',
      "import { add } from './pure.js';\nimport type { Db } from './platform/db/index.js';\n",
    );
    write('packages/server/src/service.test.ts', "import { x } from './service.js';\n");
    write('packages/server/src/lazy.test.ts', "const m = await import('./platform/db/index.js');\n");
    write('packages/server/src/helpers/app.ts', "export * from '../../test/harness.js';\n");
    write('packages/server/src/chain.test.ts', "import { y } from './helpers/app.js';\n");
    write('packages/cli/test/serve.test.ts', "import {\n  createTestStore,\n} from '@svc/server/testing';\n");
    write('packages/cli/test/args.test.ts', "import { parse } from '../src/args.js';\n");
    write('packages/cli/src/args.ts', 'export const parse = 1;\n');
    write('scripts/tool.test.ts', "import { z } from 'vitest';\n");
    // Declares one store enough; the same line without a reason, or not at the start of a line, does not count.
    write(
      'packages/cli/test/browser.test.ts',
      "import { createTestStore } from '@svc/server/testing';\n// npm test: one store: the subject is the browser.\n",
    );
    write(
      'packages/cli/test/unexplained.test.ts',
      "import { createTestStore } from '@svc/server/testing';\n// npm test: one store:\nconst s = '// npm test: one store: no';\n",
    );
    write(
      'packages/cli/test/pure-declared.test.ts',
      "// npm test: one store: nothing to see\nimport { parse } from '../src/args.js';\n",
    );

    expect(testFiles(root)).toEqual([
      'packages/cli/test/args.test.ts',
      'packages/cli/test/browser.test.ts',
      'packages/cli/test/pure-declared.test.ts',
      'packages/cli/test/serve.test.ts',
      'packages/cli/test/unexplained.test.ts',
      'packages/server/src/chain.test.ts',
      'packages/server/src/lazy.test.ts',
      'packages/server/src/pure.test.ts',
      'packages/server/src/service.test.ts',
      'scripts/tool.test.ts',
    ]);
    expect(classifyTests(root)).toEqual({
      store: [
        'packages/cli/test/serve.test.ts',
        'packages/cli/test/unexplained.test.ts',
        'packages/server/src/chain.test.ts',
        'packages/server/src/lazy.test.ts',
        'packages/server/src/service.test.ts',
      ],
      independent: [
        'packages/cli/test/args.test.ts',
        'packages/cli/test/pure-declared.test.ts',
        'packages/server/src/pure.test.ts',
        'scripts/tool.test.ts',
      ],
      oneStore: ['packages/cli/test/browser.test.ts'],
    });
  });

  it("in this repository: every file that makes a store or app is store-dependent, protocol's are not", () => {
    const { store, independent, oneStore } = classifyTests();
    expect(store.length + independent.length + oneStore.length).toBe(testFiles().length);
    const makesStore =
      /\b(createTestStore|createTestApp|startTestServer|startGatewayFixture|openDb|createContext|createPgliteDb|createPostgresDb)\(/;
    const missed = independent.filter((f) => makesStore.test(readFileSync(f, 'utf8')));
    expect(missed).toEqual([]);
    expect(store).toContain('packages/server/src/modules/keys/keys.test.ts');
    expect(store).toContain('packages/cli/test/serve.test.ts');
    expect(oneStore).toContain('packages/dashboard/test/dashboard.browser.test.ts');
    expect(independent).toContain('packages/protocol/src/jcs.test.ts');
    expect(independent).toContain('packages/server/src/modules/billing/rules.test.ts');
    expect(independent.filter((f) => f.startsWith('packages/protocol/')).length).toBe(
      testFiles().filter((f) => f.startsWith('packages/protocol/')).length,
    );
  });
});
