import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { DetectedTooling } from '@svc/protocol';

async function text(dir: string, name: string): Promise<string | undefined> {
  try {
    if (!(await stat(join(dir, name))).isFile()) return undefined;
    return await readFile(join(dir, name), 'utf8');
  } catch {
    return undefined;
  }
}

const exists = async (dir: string, name: string) => (await text(dir, name)) !== undefined;

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
 * await detectTooling(repoDir); // { package_managers: ['npm'], test_commands: ['npm test', 'npm run lint'], files: ['package.json'] }
 */
export async function detectTooling(dir: string): Promise<DetectedTooling> {
  const managers: string[] = [];
  const commands: string[] = [];
  const files: string[] = [];
  const pkg = await text(dir, 'package.json');
  if (pkg !== undefined) {
    files.push('package.json');
    const runner = (await exists(dir, 'pnpm-lock.yaml')) ? 'pnpm' : (await exists(dir, 'yarn.lock')) ? 'yarn' : 'npm';
    managers.push(runner);
    for (const script of scriptsOf(pkg))
      commands.push(script === 'test' ? `${runner} test` : `${runner} run ${script}`);
  }
  const pyproject = await text(dir, 'pyproject.toml');
  if (pyproject !== undefined) {
    files.push('pyproject.toml');
    managers.push(/\[tool\.poetry\]/.test(pyproject) ? 'poetry' : (await exists(dir, 'uv.lock')) ? 'uv' : 'pip');
    if (/pytest/.test(pyproject)) commands.push('pytest');
    if (/ruff/.test(pyproject)) commands.push('ruff check');
  } else if (await exists(dir, 'requirements.txt')) {
    files.push('requirements.txt');
    managers.push('pip');
  }
  if (await exists(dir, 'Cargo.toml')) {
    files.push('Cargo.toml');
    managers.push('cargo');
    commands.push('cargo test', 'cargo clippy');
  }
  if (await exists(dir, 'go.mod')) {
    files.push('go.mod');
    managers.push('go');
    commands.push('go test ./...', 'go vet ./...');
  }
  const makefile = (await text(dir, 'Makefile')) ?? (await text(dir, 'makefile'));
  if (makefile !== undefined) {
    files.push('Makefile');
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
