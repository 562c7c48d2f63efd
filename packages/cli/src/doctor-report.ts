/** How one doctor check went: `skip` when it does not apply to this machine (no GPU, no engine named). */
export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  status: CheckStatus;
  /** What was found, one sentence. */
  detail: string;
  /** What to do about it, for `warn` and `fail`. */
  fix?: string;
}

/** One check of `svc node doctor`: `required` ones decide the exit code. */
export interface DoctorCheck {
  name: string;
  required: boolean;
  run(): Promise<CheckResult>;
}

const LABEL: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'warn', fail: 'FAIL', skip: 'skip' };

/**
 * One line for a check: status, name, what was found, and the fix when it did not pass. A failed
 * optional check reads `warn`: it limits what the node can do, it does not stop it.
 *
 * @example
 * formatCheck({ name: 'clock', required: true }, { status: 'fail', detail: '75 s behind', fix: 'enable NTP' });
 * // 'FAIL clock    75 s behind; fix: enable NTP'
 */
export function formatCheck(check: Pick<DoctorCheck, 'name' | 'required'>, result: CheckResult): string {
  const status = result.status === 'fail' && !check.required ? 'warn' : result.status;
  const fix = result.fix !== undefined && (status === 'fail' || status === 'warn') ? `; fix: ${result.fix}` : '';
  return `${LABEL[status]} ${check.name.padEnd(8)} ${result.detail}${fix}`;
}

/**
 * Runs every check in order (a check that throws fails with its message), writes one line each,
 * and answers the exit code: 0 when no required check failed, else 1.
 *
 * @example
 * process.exitCode = await runDoctor(checks, (line) => process.stdout.write(`${line}\n`));
 */
export async function runDoctor(checks: readonly DoctorCheck[], write: (line: string) => void): Promise<number> {
  let failed = false;
  for (const check of checks) {
    const result = await check.run().catch((err: unknown): CheckResult => ({
      status: 'fail',
      detail: `the check itself failed: ${err instanceof Error ? err.message : String(err)}`,
    }));
    if (result.status === 'fail' && check.required) failed = true;
    write(formatCheck(check, result));
  }
  return failed ? 1 : 0;
}
