import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Names the run's directory where the first browser test builds the dashboard (`stack.ts`). */
export const DASHBOARD_RUN_ENV = 'SVC_TEST_DASHBOARD_RUN_DIR';

/**
 * Vitest's global setup: a directory for this run's dashboard build, which the first browser test
 * file that needs it makes and the others share (`dashboardBuild` in stack.ts); removed at the
 * end. Nothing is built here, so a run without browser tests pays nothing.
 */
export function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'svc-dashboard-run-'));
  process.env[DASHBOARD_RUN_ENV] = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
