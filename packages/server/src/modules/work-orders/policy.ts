import picomatch from 'picomatch';

/**
 * Work-order policy (DESIGN.md section 15): presets, their expansion, and certification. Pure:
 * plain data in, plain data out, no IO.
 */

export const POLICY_PRESETS = [
  'custom',
  'review_only',
  'standard_feature',
  'frontend_ui',
  'backend_api',
  'sensitive_change',
  'infra_change',
] as const;
export type PolicyPreset = (typeof POLICY_PRESETS)[number];

export const TRUST_TIERS = ['certified', 'reviewed'] as const;
export type TrustTier = (typeof TRUST_TIERS)[number];

export interface WorkPolicy {
  allowed_paths: string[];
  forbidden_paths: string[];
  required_checks: string[];
}

const SECRETS_FORBIDDEN = ['.github/**', '**/*.pem', '**/.env*'];

/** What each preset allows, forbids and requires, exactly as DESIGN.md section 15 lists it. */
export const PRESETS: Readonly<Record<PolicyPreset, Readonly<WorkPolicy>>> = {
  custom: { allowed_paths: [], forbidden_paths: [], required_checks: [] },
  review_only: { allowed_paths: [], forbidden_paths: [], required_checks: [] },
  standard_feature: {
    allowed_paths: ['src/**', 'test/**', 'tests/**', 'docs/**'],
    forbidden_paths: SECRETS_FORBIDDEN,
    required_checks: ['test'],
  },
  frontend_ui: {
    allowed_paths: ['src/**', 'public/**', '**/*.css', '**/*.tsx'],
    forbidden_paths: SECRETS_FORBIDDEN,
    required_checks: ['test', 'lint'],
  },
  backend_api: {
    allowed_paths: ['src/**', 'test/**', 'migrations/**'],
    forbidden_paths: SECRETS_FORBIDDEN,
    required_checks: ['test'],
  },
  sensitive_change: {
    allowed_paths: [],
    forbidden_paths: [...SECRETS_FORBIDDEN, '**/auth/**', '**/security/**'],
    required_checks: ['test', 'lint'],
  },
  infra_change: {
    allowed_paths: ['infra/**', 'deploy/**', 'Dockerfile', '**/*.tf'],
    forbidden_paths: [],
    required_checks: ['plan'],
  },
};

const union = (a: readonly string[], b: readonly string[] | undefined) => [...new Set([...a, ...(b ?? [])])];

/**
 * The policy an order runs under: its preset's lists extended by the explicit fields (an entry
 * in both is kept once). `custom` starts empty, so only the explicit fields count. A path the
 * order names as allowed is not also forbidden by its preset: an explicit allow overrides the
 * preset's forbid of the very same glob (a forbid the order names itself always stays).
 *
 * @example
 * expandPolicy('standard_feature', { allowed_paths: ['lib/**'] }).allowed_paths; // ['src/**', 'test/**', 'tests/**', 'docs/**', 'lib/**']
 */
export function expandPolicy(preset: PolicyPreset, explicit: Partial<WorkPolicy>): WorkPolicy {
  const base = PRESETS[preset];
  const allowed = union(base.allowed_paths, explicit.allowed_paths);
  const forbidden = union(
    base.forbidden_paths.filter((glob) => !(explicit.allowed_paths ?? []).includes(glob)),
    explicit.forbidden_paths,
  );
  return {
    allowed_paths: allowed,
    forbidden_paths: forbidden,
    required_checks: union(base.required_checks, explicit.required_checks),
  };
}

/** One check the capsule ran, as the node reported it. */
export interface ExecutedCheck {
  command: string;
  exit_code: number | null;
}

export type Certification = 'certified' | 'needs_review' | 'blocked';

export interface Decision {
  certification: Certification;
  /** Why, one line per finding, in a stable order. */
  reasons: string[];
  forbidden_changes: string[];
  outside_allowed: string[];
  missing_checks: string[];
  failed_checks: string[];
  /** True when the trust tier lets a certified order go ahead without a person. */
  auto_approve: boolean;
}

const matcher = (globs: readonly string[]) => (globs.length === 0 ? () => false : picomatch([...globs], { dot: true }));

/**
 * Certifies what a capsule did against the order's policy: a forbidden path changed, or a
 * required check missing or failed -> `blocked`; every changed path inside `allowed_paths` and
 * every check passed -> `certified`; anything else (a path outside the allowed ones, nothing
 * allowed at all, no change) -> `needs_review`. A required check is a substring that must appear
 * in an executed command; it passed when every command containing it exited 0.
 *
 * @example
 * certify({ allowed_paths: ['src/**'], forbidden_paths: [], required_checks: ['test'] }, ['src/a.ts'], [{ command: 'npm test', exit_code: 0 }], 'certified').certification; // 'certified'
 */
export function certify(
  policy: WorkPolicy,
  changedPaths: readonly string[],
  checks: readonly ExecutedCheck[],
  trustTier: TrustTier,
): Decision {
  const isForbidden = matcher(policy.forbidden_paths);
  const isAllowed = matcher(policy.allowed_paths);
  const forbidden = changedPaths.filter((p) => isForbidden(p));
  const outside = changedPaths.filter((p) => !isForbidden(p) && !isAllowed(p));
  const missing: string[] = [];
  const failed: string[] = [];
  for (const required of policy.required_checks) {
    const ran = checks.filter((c) => c.command.includes(required));
    if (ran.length === 0) missing.push(required);
    else if (ran.some((c) => c.exit_code !== 0)) failed.push(required);
  }
  const reasons = [
    ...forbidden.map((p) => `forbidden path changed: ${p}`),
    ...missing.map((c) => `required check not run: ${c}`),
    ...failed.map((c) => `required check failed: ${c}`),
    ...outside.map((p) => `outside the allowed paths: ${p}`),
  ];
  let certification: Certification;
  if (forbidden.length > 0 || missing.length > 0 || failed.length > 0) certification = 'blocked';
  else if (changedPaths.length > 0 && outside.length === 0) certification = 'certified';
  else certification = 'needs_review';
  if (certification === 'needs_review' && changedPaths.length === 0) reasons.push('the capsule changed nothing');
  if (certification === 'certified')
    reasons.push(
      `every changed path is allowed and every required check passed (${changedPaths.length} paths, ${checks.length} checks)`,
    );
  return {
    certification,
    reasons,
    forbidden_changes: forbidden,
    outside_allowed: outside,
    missing_checks: missing,
    failed_checks: failed,
    auto_approve: certification === 'certified' && trustTier === 'certified',
  };
}
