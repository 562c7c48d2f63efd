/**
 * Job kind 9 (`repository_work`): the work item's payload and the result the node signs. Shared
 * by the server (which builds the payload and certifies the result) and the node agent (which
 * runs it). Types only, no IO.
 */

/** What the capsule is told about its order (written to a JSON file it reads). */
export interface CapsuleOrder {
  work_order_id: string;
  goal: string;
  title: string | null;
  architecture_plan: string | null;
  model: string | null;
  base_branch: string;
  work_branch: string;
  allowed_paths: string[];
  forbidden_paths: string[];
  required_checks: string[];
  /** Detected on the clone before the capsule starts. */
  tooling: DetectedTooling;
  /**
   * The commands (argv) the server derived from the base commit's tooling for `required_checks`
   * (`test` -> `npm test` when package.json has a `test` script). The agent runs each after the
   * capsule's own checks; certification matches required checks to these commands only.
   */
  check_commands?: string[][];
}

export interface RepositoryWorkPayload {
  mode: 'preflight' | 'execute';
  /** A git bundle of the base branch, served by the control plane (the node never sees a host token). */
  bundle_url: string;
  base_branch: string;
  base_commit: string;
  timeout_seconds: number;
  /** preflight: tools the buyer needs present. */
  tooling?: string[];
  /** execute: the order the capsule carries out. */
  order?: CapsuleOrder;
}

/** Package managers and check commands found in a checkout's files. */
export interface DetectedTooling {
  /** e.g. `npm`, `pnpm`, `yarn`, `pip`, `poetry`, `cargo`, `go`, `make`. */
  package_managers: string[];
  /** Commands a check could run, e.g. `npm test`, `npm run lint`, `cargo test`, `make test`. */
  test_commands: string[];
  /** The files they were read from. */
  files: string[];
}

/** One command the agent ran after the capsule, as certified. */
export interface CheckRun {
  command: string;
  argv: string[];
  exit_code: number | null;
  timed_out: boolean;
  duration_ms: number;
  /** SHA-256 (hex) of stdout followed by stderr, as captured. */
  output_sha256: string;
  /** The last 2,000 characters of that output. */
  output_tail: string;
}

export interface PreflightResult {
  mode: 'preflight';
  base_branch: string;
  base_commit: string;
  tooling: DetectedTooling;
  requested: string[];
  missing: string[];
  status: 'ready' | 'blocked';
}

export interface ExecuteResult {
  mode: 'execute';
  base_branch: string;
  base_commit: string;
  work_branch: string;
  /** The commit the capsule's changes became; null when it changed nothing. */
  commit_sha: string | null;
  changed_paths: string[];
  /** `git diff base_commit commit_sha`, cut at 1 MiB (`diff_truncated`). */
  diff: string;
  diff_truncated: boolean;
  capsule: {
    exit_code: number | null;
    timed_out: boolean;
    duration_ms: number;
    output_sha256: string;
    output_tail: string;
    summary: string | null;
  };
  checks: CheckRun[];
  /** `git bundle create - base_commit..work_branch`, base64; null without a commit. */
  bundle_base64: string | null;
}

export type RepositoryWorkResult = PreflightResult | ExecuteResult;
