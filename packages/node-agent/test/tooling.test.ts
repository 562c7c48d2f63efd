import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detectTooling, missingTooling } from '../src/runners/index.js';

function checkout(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-tooling-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('tooling detection (kind 9 preflight)', () => {
  it('reads package managers and check commands from the files', async () => {
    const dir = checkout({
      'package.json': JSON.stringify({ scripts: { test: 'vitest', lint: 'eslint .' } }),
      'pnpm-lock.yaml': '',
      'pyproject.toml': '[tool.poetry]\nname = "x"\n[tool.pytest.ini_options]\n',
      'Cargo.toml': '[package]\nname = "x"\n',
      'go.mod': 'module x\n',
      Makefile: 'VAR := 1\ncheck: build\n\tdo\nbuild:\n\tdo\n',
    });
    const t = await detectTooling(dir);
    expect(t.package_managers).toEqual(['pnpm', 'poetry', 'cargo', 'go', 'make']);
    expect(t.test_commands).toEqual([
      'pnpm test',
      'pnpm run lint',
      'pytest',
      'cargo test',
      'cargo clippy',
      'go test ./...',
      'go vet ./...',
      'make check',
      'make build',
    ]);
    expect(t.files).toEqual(['package.json', 'pyproject.toml', 'Cargo.toml', 'go.mod', 'Makefile']);
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds nothing in an empty checkout, and npm by default for a package.json', async () => {
    const empty = checkout({});
    expect(await detectTooling(empty)).toEqual({ package_managers: [], test_commands: [], files: [] });
    const npm = checkout({ 'package.json': '{"scripts":{"test":"node t.js"}}', 'requirements.txt': 'x\n' });
    expect(await detectTooling(npm)).toEqual({
      package_managers: ['npm', 'pip'],
      test_commands: ['npm test'],
      files: ['package.json', 'requirements.txt'],
    });
    rmSync(empty, { recursive: true, force: true });
    rmSync(npm, { recursive: true, force: true });
  });

  it('names the requested tools that are missing: managers, commands, or bare checks', () => {
    const t = { package_managers: ['npm'], test_commands: ['npm test', 'npm run lint'], files: ['package.json'] };
    expect(missingTooling(t, ['npm', 'test', 'lint', 'npm test'])).toEqual([]);
    expect(missingTooling(t, ['cargo', 'typecheck', 'npm'])).toEqual(['cargo', 'typecheck']);
  });
});
