import { describe, expect, it } from 'vitest';
import { certify, expandPolicy, PRESETS, type WorkPolicy } from './policy.js';
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
      reasons: ['required check not run: test'],
    },
    {
      name: 'a required check that failed',
      policy: standard,
      paths: ['src/a.ts'],
      checks: [fail('npm test')],
      want: 'blocked',
      reasons: ['required check failed: test'],
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
      checks: [pass('terraform plan')],
      want: 'certified',
    },
  ];
  for (const row of table) {
    it(`${row.name} -> ${row.want}`, () => {
      const d = certify(row.policy, row.paths, row.checks, 'certified');
      expect(d.certification).toBe(row.want);
      if (row.reasons) expect(d.reasons).toEqual(row.reasons);
    });
  }

  it('auto-approves only a certified decision under the certified trust tier', () => {
    expect(certify(standard, ['src/a.ts'], [pass('npm test')], 'certified').auto_approve).toBe(true);
    expect(certify(standard, ['src/a.ts'], [pass('npm test')], 'reviewed').auto_approve).toBe(false);
    expect(certify(standard, ['README.md'], [pass('npm test')], 'certified').auto_approve).toBe(false);
  });

  it('reports every finding', () => {
    const d = certify(standard, ['.github/a', 'README.md'], [fail('npm test')], 'certified');
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
