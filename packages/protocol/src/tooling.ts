import type { DetectedTooling } from './repository-work.js';

/**
 * Tooling detection for repository work (kind 9), shared by the node agent (which reads a
 * checkout) and the server (which reads the base commit out of its bundle, to derive the check
 * commands it certifies against). Pure: the caller hands in how a top-level file is read.
 */

/** Reads a top-level file of the checkout; undefined when it is not there (or not a file). */
export type ReadTopLevelFile = (name: string) => Promise<string | undefined>;

/** The top-level files detection may read: a reader need not offer any other. */
export const TOOLING_FILES = [
  'package.json',
  'pnpm-lock.yaml',
  'yarn.lock',
  'pyproject.toml',
  'uv.lock',
  'requirements.txt',
  'Cargo.toml',
  'go.mod',
  'Makefile',
  'makefile',
] as const;

function scriptsOf(pkg: string): string[] {
  try {
    const parsed = JSON.parse(pkg) as { scripts?: unknown };
    return parsed.scripts && typeof parsed.scripts === 'object' ? Object.keys(parsed.scripts) : [];
  } catch {
    return [];
  }
}

/**
 * What a checkout's top-level files say about its tooling: package managers (npm, pnpm, yarn,
 * pip, poetry, uv, cargo, go, make) and the check commands they offer (package.json scripts,
 * `pytest` for a pyproject, `cargo test`, `go test ./...`, Makefile targets). Reads files only;
 * runs nothing.
 *
 * @example
 * await toolingFromFiles((name) => readFile(join(dir, name), 'utf8').catch(() => undefined));
 * // { package_managers: ['npm'], test_commands: ['npm test', 'npm run lint'], files: ['package.json'] }
 */
export async function toolingFromFiles(read: ReadTopLevelFile): Promise<DetectedTooling> {
  const exists = async (name: string) => (await read(name)) !== undefined;
  const managers: string[] = [];
  const commands: string[] = [];
  const files: string[] = [];
  const pkg = await read('package.json');
  if (pkg !== undefined) {
    files.push('package.json');
    const runner = (await exists('pnpm-lock.yaml')) ? 'pnpm' : (await exists('yarn.lock')) ? 'yarn' : 'npm';
    managers.push(runner);
    for (const script of scriptsOf(pkg))
      commands.push(script === 'test' ? `${runner} test` : `${runner} run ${script}`);
  }
  const pyproject = await read('pyproject.toml');
  if (pyproject !== undefined) {
    files.push('pyproject.toml');
    managers.push(/\[tool\.poetry\]/.test(pyproject) ? 'poetry' : (await exists('uv.lock')) ? 'uv' : 'pip');
    if (/pytest/.test(pyproject)) commands.push('pytest');
    if (/ruff/.test(pyproject)) commands.push('ruff check');
  } else if (await exists('requirements.txt')) {
    files.push('requirements.txt');
    managers.push('pip');
  }
  if (await exists('Cargo.toml')) {
    files.push('Cargo.toml');
    managers.push('cargo');
    commands.push('cargo test', 'cargo clippy');
  }
  if (await exists('go.mod')) {
    files.push('go.mod');
    managers.push('go');
    commands.push('go test ./...', 'go vet ./...');
  }
  const makefile = (await read('Makefile')) ?? (await read('makefile'));
  if (makefile !== undefined) {
    files.push((await exists('Makefile')) ? 'Makefile' : 'makefile');
    managers.push('make');
    for (const m of makefile.matchAll(/^([A-Za-z0-9][A-Za-z0-9_.-]*):(?!=)/gm))
      if (m[1] !== undefined) commands.push(`make ${m[1]}`);
  }
  return { package_managers: [...new Set(managers)], test_commands: [...new Set(commands)], files };
}

/**
 * The requested tools the detected tooling lacks. A request names a package manager (`npm`,
 * `cargo`), a command (`npm test`), or a bare check (`test`, `lint`) that some command contains.
 *
 * @example
 * missingTooling({ package_managers: ['npm'], test_commands: ['npm test'], files: [] }, ['npm', 'lint']); // ['lint']
 */
export function missingTooling(detected: DetectedTooling, requested: readonly string[]): string[] {
  return requested.filter(
    (want) =>
      !detected.package_managers.includes(want) &&
      !detected.test_commands.some((c) => c === want || c.split(/\s+/).includes(want) || c.includes(want)),
  );
}
