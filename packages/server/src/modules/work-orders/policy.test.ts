import { describe, expect, it } from 'vitest';
import {
  certify,
  checkCommandsFor,
  checkNameOf,
  expandPolicy,
  PRESETS,
  type CertifyInput,
  type WorkPolicy,
} from './policy.js';
import { canMove } from './states.js';

const pass = (command: string) => ({ command, exit_code: 0 });
const fail = (command: string) => ({ command, exit_code: 1 });

describe('expandPolicy', () => {
  it('expands every preset exactly as DESIGN section 15 lists it', () => {
    expect(expandPolicy('standard_feature', {})).toEqual({
      allowed_paths: ['src/**', 'test/**', 'tests/**', 'docs/**'],
      forbidden_paths: ['.github/**', '**/*.pem', '**/.env*'],
      required_checks: ['test'],
    });
    expect(expandPolicy('frontend_ui', {}).allowed_paths).toEqual(['src/**', 'public/**', '**/*.css', '**/*.tsx']);
    expect(expandPolicy('frontend_ui', {}).required_checks).toEqual(['test', 'lint']);
    expect(expandPolicy('backend_api', {}).allowed_paths).toEqual(['src/**', 'test/**', 'migrations/**']);
    expect(expandPolicy('sensitive_change', {})).toEqual({
      allowed_paths: [],
      forbidden_paths: ['.github/**', '**/*.pem', '**/.env*', '**/auth/**', '**/security/**'],
      required_checks: ['test', 'lint'],
    });
    expect(expandPolicy('infra_change', {})).toEqual({
      allowed_paths: ['infra/**', 'deploy/**', 'Dockerfile', '**/*.tf'],
      forbidden_paths: [],
      required_checks: ['plan'],
    });
    expect(expandPolicy('review_only', {})).toEqual({ allowed_paths: [], forbidden_paths: [], required_checks: [] });
    expect(expandPolicy('custom', {})).toEqual({ allowed_paths: [], forbidden_paths: [], required_checks: [] });
  });

  it('extends a preset with explicit fields, once each', () => {
    const p = expandPolicy('backend_api', {
      allowed_paths: ['lib/**', 'src/**'],
      forbidden_paths: ['secrets/**'],
      required_checks: ['lint', 'test'],
    });
    expect(p.allowed_paths).toEqual(['src/**', 'test/**', 'migrations/**', 'lib/**']);
    expect(p.forbidden_paths).toEqual(['.github/**', '**/*.pem', '**/.env*', 'secrets/**']);
    expect(p.required_checks).toEqual(['test', 'lint']);
  });

  it('lets an explicit allow override the same glob the preset forbids', () => {
    expect(expandPolicy('standard_feature', { allowed_paths: ['.github/**'] }).forbidden_paths).toEqual([
      '**/*.pem',
      '**/.env*',
    ]);
  });

  it('custom takes only the explicit fields', () => {
    expect(expandPolicy('custom', { allowed_paths: ['a/**'], required_checks: ['make check'] })).toEqual({
      allowed_paths: ['a/**'],
      forbidden_paths: [],
      required_checks: ['make check'],
    });
  });

  it('keeps the preset table frozen in shape', () => {
    expect(Object.keys(PRESETS).sort()).toEqual([
      'backend_api',
      'custom',
      'frontend_ui',
      'infra_change',
      'review_only',
      'sensitive_change',
      'standard_feature',
    ]);
  });
});

const TOOLING = {
  package_managers: ['npm', 'make'],
  test_commands: ['npm test', 'npm run lint', 'make plan'],
  files: ['package.json', 'Makefile'],
};

/** certify on the server's side of things: commands from TOOLING, the organization's own node. */
function decide(
  policy: WorkPolicy,
  paths: string[],
  checks: { command: string; exit_code: number | null }[],
  extra: Partial<CertifyInput> = {},
) {
  return certify({
    policy,
    changedPaths: paths,
    checks,
    commands: checkCommandsFor(policy.required_checks, TOOLING).commands,
    checkFiles: TOOLING.files,
    trustTier: 'certified',
    node: { id: 'node_own', trust: 'own' },
    ...extra,
  });
}

describe('checkCommandsFor', () => {
  it("derives a required check's commands from the repository's tooling, never from a capsule", () => {
    expect(checkCommandsFor(['test', 'lint'], TOOLING)).toEqual({
      commands: [
        { check: 'test', command: 'npm test', argv: ['npm', 'test'] },
        { check: 'lint', command: 'npm run lint', argv: ['npm', 'run', 'lint'] },
      ],
      unavailable: [],
    });
    expect(checkCommandsFor(['plan'], TOOLING).commands).toEqual([
      { check: 'plan', command: 'make plan', argv: ['make', 'plan'] },
    ]);
    // A check with a space is the command itself (the order's owner wrote it).
    expect(checkCommandsFor(['terraform  plan'], TOOLING).commands).toEqual([
      { check: 'terraform  plan', command: 'terraform plan', argv: ['terraform', 'plan'] },
    ]);
    expect(checkCommandsFor(['test', 'typecheck'], { package_managers: [], test_commands: [], files: [] })).toEqual({
      commands: [],
      unavailable: ['test', 'typecheck'],
    });
    expect(
      checkCommandsFor(['test'], {
        package_managers: ['cargo', 'go'],
        test_commands: ['cargo test', 'cargo clippy', 'go test ./...'],
        files: [],
      }).commands.map((c) => c.command),
    ).toEqual(['cargo test', 'go test ./...']);
  });

  it('names each detected command by the check it answers to', () => {
    expect(
      [
        'npm test',
        'pnpm run lint',
        'yarn run build',
        'make check',
        'cargo clippy',
        'go vet ./...',
        'pytest',
        'ruff check',
      ].map(checkNameOf),
    ).toEqual(['test', 'lint', 'build', 'check', 'clippy', 'vet', 'test', 'lint']);
  });
});

describe('certify', () => {
  const standard: WorkPolicy = expandPolicy('standard_feature', {});
  const table: {
    name: string;
    policy: WorkPolicy;
    paths: string[];
    checks: { command: string; exit_code: number | null }[];
    want: string;
    reasons?: string[];
  }[] = [
    {
      name: 'allowed paths and passing checks',
      policy: standard,
      paths: ['src/a.ts', 'test/a.test.ts'],
      checks: [pass('npm test')],
      want: 'certified',
    },
    {
      name: 'a forbidden path',
      policy: standard,
      paths: ['src/a.ts', '.github/workflows/ci.yml'],
      checks: [pass('npm test')],
      want: 'blocked',
      reasons: ['forbidden path changed: .github/workflows/ci.yml'],
    },
    {
      name: 'a dotfile matched by a forbidden glob',
      policy: standard,
      paths: ['config/.env.local'],
      checks: [pass('npm test')],
      want: 'blocked',
    },
    {
      name: 'a key file deep in src',
      policy: standard,
      paths: ['src/keys/server.pem'],
      checks: [pass('npm test')],
      want: 'blocked',
    },
    {
      name: 'a required check never run',
      policy: standard,
      paths: ['src/a.ts'],
      checks: [pass('npm run lint')],
      want: 'blocked',
      reasons: ['required check not run: test (npm test)'],
    },
    {
      name: 'a command a capsule chose that merely contains the check (echo test)',
      policy: standard,
      paths: ['src/a.ts'],
      checks: [pass('echo test'), pass('node test/run.js'), pass('npm test --if-present')],
      want: 'blocked',
      reasons: ['required check not run: test (npm test)'],
    },
    {
      name: 'a required check the repository defines no command for',
      policy: expandPolicy('custom', { allowed_paths: ['src/**'], required_checks: ['typecheck'] }),
      paths: ['src/a.ts'],
      checks: [pass('typecheck'), pass('npm run typecheck')],
      want: 'blocked',
      reasons: ['required check not run: typecheck (the repository defines no command for it)'],
    },
    {
      name: 'a required check that failed',
      policy: standard,
      paths: ['src/a.ts'],
      checks: [fail('npm test')],
      want: 'blocked',
      reasons: ['required check failed: test (npm test)'],
    },
    {
      name: 'a required check run twice, failing once',
      policy: standard,
      paths: ['src/a.ts'],
      checks: [pass('npm test'), fail('npm test')],
      want: 'blocked',
    },
    {
      name: 'a required check killed (no exit code)',
      policy: standard,
      paths: ['src/a.ts'],
      checks: [{ command: 'npm test', exit_code: null }],
      want: 'blocked',
    },
    {
      name: 'a path outside the allowed ones',
      policy: standard,
      paths: ['src/a.ts', 'README.md'],
      checks: [pass('npm test')],
      want: 'needs_review',
      reasons: ['outside the allowed paths: README.md'],
    },
    {
      name: 'the file that defines the required checks, though allowed',
      policy: expandPolicy('standard_feature', { allowed_paths: ['**'] }),
      paths: ['src/a.ts', 'package.json'],
      checks: [pass('npm test')],
      want: 'needs_review',
      reasons: ['changes package.json, which defines the required checks'],
    },
    {
      name: 'nothing changed',
      policy: standard,
      paths: [],
      checks: [pass('npm test')],
      want: 'needs_review',
      reasons: ['the capsule changed nothing'],
    },
    {
      name: 'review_only allows nothing',
      policy: expandPolicy('review_only', {}),
      paths: ['src/a.ts'],
      checks: [],
      want: 'needs_review',
    },
    {
      name: 'forbidden wins over outside',
      policy: standard,
      paths: ['README.md', '.github/x.yml'],
      checks: [pass('npm test')],
      want: 'blocked',
    },
    {
      name: 'sensitive auth path',
      policy: expandPolicy('sensitive_change', { allowed_paths: ['src/**'] }),
      paths: ['src/auth/login.ts'],
      checks: [pass('npm test'), pass('npm run lint')],
      want: 'blocked',
    },
    {
      name: 'infra plan check',
      policy: expandPolicy('infra_change', {}),
      paths: ['infra/main.tf', 'Dockerfile'],
      checks: [pass('make plan')],
      want: 'certified',
    },
  ];
  for (const row of table) {
    it(`${row.name} -> ${row.want}`, () => {
      const d = decide(row.policy, row.paths, row.checks);
      expect(d.certification).toBe(row.want);
      if (row.reasons) expect(d.reasons).toEqual(row.reasons);
    });
  }

  it('auto-approves only a certified decision under the certified trust tier, from a node the organization trusts', () => {
    const ok = [pass('npm test')];
    expect(decide(standard, ['src/a.ts'], ok).auto_approve).toBe(true);
    expect(decide(standard, ['src/a.ts'], ok, { trustTier: 'reviewed' }).auto_approve).toBe(false);
    expect(decide(standard, ['README.md'], ok).auto_approve).toBe(false);
    expect(decide(standard, ['src/a.ts'], ok, { node: { id: 'node_tee', trust: 'tee_verified' } }).auto_approve).toBe(
      true,
    );
    const stranger = decide(standard, ['src/a.ts'], ok, { node: { id: 'node_x', trust: 'untrusted' } });
    expect(stranger).toMatchObject({
      certification: 'certified',
      auto_approve: false,
      node_id: 'node_x',
      node_trust: 'untrusted',
    });
    expect(stranger.reasons.at(-1)).toBe(
      "not approved automatically: node node_x is neither the organization's own nor a verified TEE node, and its check results are its claim; an owner or admin decides",
    );
  });

  it('says what each input rests on, and which commands the checks were matched to', () => {
    const d = decide(standard, ['src/a.ts'], [pass('npm test')]);
    expect(d.basis).toEqual({
      changed_paths: 'recomputed by the server from the base and work bundles',
      checks: "the node's signed claim: the server does not re-run checks",
    });
    expect(d.check_commands).toEqual([{ check: 'test', command: 'npm test' }]);
  });

  it('reports every finding', () => {
    const d = decide(standard, ['.github/a', 'README.md'], [fail('npm test')]);
    expect(d).toMatchObject({
      forbidden_changes: ['.github/a'],
      outside_allowed: ['README.md'],
      missing_checks: [],
      failed_checks: ['test'],
    });
  });
});

describe('work-order transitions', () => {
  it('allows the moves DESIGN section 15 names and nothing else', () => {
    expect(canMove('queued', 'running')).toBe(true);
    expect(canMove('needs_review', 'approved')).toBe(true);
    expect(canMove('certified', 'rejected')).toBe(true);
    expect(canMove('approved', 'pr_opened')).toBe(true);
    expect(canMove('pr_opened', 'rolled_back')).toBe(true);
    expect(canMove('blocked', 'approved')).toBe(false);
    expect(canMove('rejected', 'approved')).toBe(false);
    expect(canMove('running', 'approved')).toBe(false);
    expect(canMove('certified', 'rolled_back')).toBe(false);
  });
});
