// Which test files depend on the store, so `npm test` runs only those a second time (on PostgreSQL).
//
// The rule: a test file is store-dependent when it reaches, through its imports (followed across
// the repository's own files and the @svc/* workspace packages; `import type` does not count),
// the code that opens a store (packages/server/src/platform/db/) or makes a test store
// (packages/server/test/test-store.ts). Every other file cannot see which store runs, so one pass
// runs it. A file that imports the server's public index counts as store-dependent even if the
// part it uses is pure: the rule errs on the side of running a file twice.
//
// A store-dependent file whose subject is something else (a browser driving the dashboard,
// containers, an npm install) may say so with a line of its own, the reason after the colon:
//   // npm test: one store: <why the store does not matter here>
// It then runs on one store only (PGlite, the default): `oneStore` below.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The line a store-dependent file declares itself with when its subject is not the store (with a reason). */
const ONE_STORE_RE = /^\/\/ npm test: one store: \S/m;

/** Where a store is opened or made: reaching any of these makes a test store-dependent. */
const STORE_MARKERS = ['packages/server/src/platform/db/', 'packages/server/test/test-store.ts'];

// `import x from '...'`, `import '...'`, `export ... from '...'`, `import('...')`; not `import type` / `export type`.
const IMPORT_RE =
  /(?:^|[\s;])(?:import|export)\s+(?!type\s)(?:[^'";]*?\sfrom\s*)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** Every test file vitest's `include` selects (vitest.config.ts), relative to the repository. */
export function testFiles(root = ROOT): string[] {
  const files: string[] = [];
  for (const pkg of readdirSync(join(root, 'packages'))) {
    for (const top of ['src', 'test']) walk(join(root, 'packages', pkg, top), files);
  }
  walk(join(root, 'scripts'), files);
  return files
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => toPosix(relative(root, f)))
    .sort();
}

function walk(dir: string, out: string[]): void {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else out.push(path);
  }
}

function toPosix(path: string): string {
  return path.split(sep).join('/');
}

function workspaceExports(root: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const pkg of readdirSync(join(root, 'packages'))) {
    const file = join(root, 'packages', pkg, 'package.json');
    if (!existsSync(file)) continue;
    const json = JSON.parse(readFileSync(file, 'utf8')) as { name: string; exports?: string | Record<string, unknown> };
    const exports = typeof json.exports === 'string' ? { '.': json.exports } : (json.exports ?? {});
    for (const [sub, target] of Object.entries(exports)) {
      if (typeof target !== 'string') continue;
      map.set(sub === '.' ? json.name : `${json.name}/${sub.slice(2)}`, join(root, 'packages', pkg, target));
    }
  }
  return map;
}

function resolveSource(path: string): string | undefined {
  const candidates = [
    path,
    path.replace(/\.js$/, '.ts'),
    path.replace(/\.js$/, '.tsx'),
    `${path}.ts`,
    join(path, 'index.ts'),
  ];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile());
}

/** The test files by what the store can change: run on every store, on any one, or on PGlite. */
export interface TestClasses {
  /** Reach the store: run on every store. */
  store: string[];
  /** Cannot see which store runs: run once, on any. */
  independent: string[];
  /** Reach the store but declare (ONE_STORE_RE) that their subject is not it: run once, on PGlite. */
  oneStore: string[];
}

/**
 * Splits the test files into those that depend on the store, those that do not, and the
 * store-dependent ones that declare one store enough.
 *
 * @example
 * const { independent } = classifyTests();
 * // ['packages/protocol/src/jcs.test.ts', ...]
 */
export function classifyTests(root = ROOT): TestClasses {
  const exportsMap = workspaceExports(root);
  const markers = STORE_MARKERS.map((m) => join(root, m));
  const isMarker = (file: string) => markers.some((m) => (m.endsWith('/') ? file.startsWith(m) : file === m));

  // The import graph of everything the tests reach, then which files reach a marker.
  const tests = testFiles(root);
  const importers = new Map<string, Set<string>>(); // file -> files that import it
  const seen = new Set<string>();
  const queue = tests.map((t) => join(root, t));
  while (queue.length > 0) {
    const file = queue.pop();
    if (file === undefined || seen.has(file)) continue;
    seen.add(file);
    for (const match of readFileSync(file, 'utf8').matchAll(IMPORT_RE)) {
      const spec = match[1] ?? match[2] ?? '';
      const target = spec.startsWith('.') ? resolveSource(resolve(dirname(file), spec)) : exportsMap.get(spec);
      if (!target) continue;
      const set = importers.get(target) ?? new Set<string>();
      set.add(file);
      importers.set(target, set);
      queue.push(target);
    }
  }
  const reaches = new Set([...seen].filter(isMarker));
  const pending = [...reaches];
  while (pending.length > 0) {
    for (const importer of importers.get(pending.pop() ?? '') ?? []) {
      if (!reaches.has(importer)) {
        reaches.add(importer);
        pending.push(importer);
      }
    }
  }
  const dependent = tests.filter((t) => reaches.has(join(root, t)));
  const declaresOne = (t: string) => ONE_STORE_RE.test(readFileSync(join(root, t), 'utf8'));
  return {
    store: dependent.filter((t) => !declaresOne(t)),
    independent: tests.filter((t) => !reaches.has(join(root, t))),
    oneStore: dependent.filter(declaresOne),
  };
}

// `npx tsx scripts/store-tests.ts` prints the split, for checking the rule by eye.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { store, independent, oneStore } = classifyTests();
  const list = (title: string, files: string[]) => `${title} (${files.length}):\n  ${files.join('\n  ')}\n`;
  process.stdout.write(
    list('store-dependent', store) +
      list('store-independent', independent) +
      list('store-dependent, declared one store', oneStore),
  );
}
