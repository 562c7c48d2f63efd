import type { DetectedTooling } from '@svc/protocol';
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

/** One check the node reports it ran (its signed claim: the server cannot re-run it). */
export interface ExecutedCheck {
  command: string;
  exit_code: number | null;
}

/** A required check and a command the server derived for it from the base commit's tooling. */
export interface CheckCommand {
  check: string;
  command: string;
  argv: string[];
}

/**
 * The check a detected command answers to: `npm test` and `npm run lint` -> `test` and `lint`,
 * `make check` -> `check`, `cargo clippy` -> `clippy`, `go vet ./...` -> `vet`, `pytest` ->
 * `test`, `ruff check` -> `lint`.
 *
 * @example
 * checkNameOf('pnpm run lint'); // 'lint'
 */
export function checkNameOf(command: string): string {
  const [tool = '', sub = '', script] = command.split(' ');
  if (sub === 'run' && script !== undefined && ['npm', 'pnpm', 'yarn'].includes(tool)) return script;
  if (tool === 'pytest') return 'test';
  if (tool === 'ruff') return 'lint';
  return sub || tool;
}

/**
 * The commands the order's required checks stand for, derived from the base commit's tooling
 * (never from what a capsule names): a bare check (`test`) is every detected command that answers
 * to it (`npm test` when package.json has a `test` script, `make test` for a Makefile target); a
 * check with a space (`terraform plan`) is that command itself. `unavailable`: bare checks the
 * repository defines no command for.
 *
 * @example
 * checkCommandsFor(['test'], { package_managers: ['npm'], test_commands: ['npm test', 'npm run lint'], files: ['package.json'] });
 * // { commands: [{ check: 'test', command: 'npm test', argv: ['npm', 'test'] }], unavailable: [] }
 */
export function checkCommandsFor(
  required: readonly string[],
  tooling: DetectedTooling,
): { commands: CheckCommand[]; unavailable: string[] } {
  const commands: CheckCommand[] = [];
  const unavailable: string[] = [];
  const of = (check: string, command: string) => ({ check, command, argv: command.split(' ') });
  for (const check of required) {
    const words = check.trim().split(/\s+/);
    if (words.length > 1) {
      commands.push(of(check, words.join(' ')));
      continue;
    }
    const found = tooling.test_commands.filter((c) => c === check || checkNameOf(c) === check);
    if (found.length === 0) unavailable.push(check);
    for (const command of found) commands.push(of(check, command));
  }
  return { commands, unavailable };
}

/** Whom the organization trusts to run its checks: its own node, a verified TEE node, or neither. */
export type NodeTrust = 'own' | 'tee_verified' | 'untrusted';

export type Certification = 'certified' | 'needs_review' | 'blocked';

export interface Decision {
  certification: Certification;
  /** Why, one line per finding, in a stable order. */
  reasons: string[];
  forbidden_changes: string[];
  outside_allowed: string[];
  missing_checks: string[];
  failed_checks: string[];
  /** Changed files that define the required checks (package.json, Makefile...): a person looks. */
  check_files_changed: string[];
  /** The commands required checks were matched to (derived from the base commit's tooling). */
  check_commands: { check: string; command: string }[];
  /** The node that ran the work, and whether the organization trusts it to run checks. */
  node_id: string | null;
  node_trust: NodeTrust;
  /** What each input to the decision rests on. */
  basis: { changed_paths: string; checks: string };
  /** True when the trust tier and the node let a certified order go ahead without a person. */
  auto_approve: boolean;
}

/** What {@link certify} decides on. */
export interface CertifyInput {
  policy: WorkPolicy;
  /** The paths the commit changes, computed by the server from the bundles. */
  changedPaths: readonly string[];
  /** The checks the node reports (its signed claim). */
  checks: readonly ExecutedCheck[];
  /** The commands required checks stand for ({@link checkCommandsFor}). */
  commands: readonly CheckCommand[];
  /** The base's tooling files (where those commands are defined). */
  checkFiles: readonly string[];
  trustTier: TrustTier;
  node: { id: string | null; trust: NodeTrust };
}

export const BASIS = {
  changed_paths: 'recomputed by the server from the base and work bundles',
  checks: "the node's signed claim: the server does not re-run checks",
} as const;

const matcher = (globs: readonly string[]) => (globs.length === 0 ? () => false : picomatch([...globs], { dot: true }));

/**
 * Certifies what a capsule did against the order's policy: a forbidden path changed, or a
 * required check missing or failed -> `blocked`; every changed path inside `allowed_paths`, no
 * file defining a required check changed, and every check passed -> `certified`; anything else
 * (a path outside the allowed ones, nothing allowed at all, no change) -> `needs_review`. A
 * required check passes when every command derived for it ran, by that exact command, and exited
 * 0. A certified order goes ahead without a person only under the `certified` trust tier and from
 * a node the organization trusts (its own, or a verified TEE node): the checks are the node's claim.
 *
 * @example
 * certify({ policy, changedPaths: ['src/a.ts'], checks: [{ command: 'npm test', exit_code: 0 }], commands: [{ check: 'test', command: 'npm test', argv: ['npm', 'test'] }], checkFiles: ['package.json'], trustTier: 'certified', node: { id: 'node_1', trust: 'own' } }).certification; // 'certified'
 */
export function certify(input: CertifyInput): Decision {
  const { policy, changedPaths, checks, node } = input;
  const isForbidden = matcher(policy.forbidden_paths);
  const isAllowed = matcher(policy.allowed_paths);
  const forbidden = changedPaths.filter((p) => isForbidden(p));
  const outside = changedPaths.filter((p) => !isForbidden(p) && !isAllowed(p));
  const definitions =
    policy.required_checks.length === 0 ? [] : changedPaths.filter((p) => input.checkFiles.includes(p));
  const missing: string[] = [];
  const failed: string[] = [];
  const checkReasons: string[] = [];
  for (const required of policy.required_checks) {
    const commands = input.commands.filter((c) => c.check === required);
    if (commands.length === 0) {
      missing.push(required);
      checkReasons.push(`required check not run: ${required} (the repository defines no command for it)`);
      continue;
    }
    for (const { command } of commands) {
      const ran = checks.filter((c) => c.command === command);
      if (ran.length === 0) {
        if (!missing.includes(required)) missing.push(required);
        checkReasons.push(`required check not run: ${required} (${command})`);
      } else if (ran.some((c) => c.exit_code !== 0)) {
        if (!failed.includes(required)) failed.push(required);
        checkReasons.push(`required check failed: ${required} (${command})`);
      }
    }
  }
  const reasons = [
    ...forbidden.map((p) => `forbidden path changed: ${p}`),
    ...checkReasons,
    ...outside.map((p) => `outside the allowed paths: ${p}`),
    ...definitions.map((p) => `changes ${p}, which defines the required checks`),
  ];
  let certification: Certification;
  if (forbidden.length > 0 || missing.length > 0 || failed.length > 0) certification = 'blocked';
  else if (changedPaths.length > 0 && outside.length === 0 && definitions.length === 0) certification = 'certified';
  else certification = 'needs_review';
  if (certification === 'needs_review' && changedPaths.length === 0) reasons.push('the capsule changed nothing');
  if (certification === 'certified')
    reasons.push(
      `every changed path is allowed and every required check passed (${changedPaths.length} paths, ${checks.length} checks)`,
    );
  const trusted = node.trust !== 'untrusted';
  if (certification === 'certified' && input.trustTier === 'certified' && !trusted)
    reasons.push(
      `not approved automatically: node ${node.id ?? 'unknown'} is neither the organization's own nor a verified TEE node, and its check results are its claim; an owner or admin decides`,
    );
  return {
    certification,
    reasons,
    forbidden_changes: forbidden,
    outside_allowed: outside,
    missing_checks: missing,
    failed_checks: failed,
    check_files_changed: definitions,
    check_commands: input.commands.map(({ check, command }) => ({ check, command })),
    node_id: node.id,
    node_trust: node.trust,
    basis: { ...BASIS },
    auto_approve: certification === 'certified' && input.trustTier === 'certified' && trusted,
  };
}
