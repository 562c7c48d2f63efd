import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NO_RUNNER, runJob, WorkError, type RunContext, type WorkItem } from '../src/index.js';
import { eventually } from './helpers.js';

const node = process.execPath;

function job(runnerArgs: string[], extra: Record<string, unknown> = {}, kind = 5): WorkItem {
  return {
    work_id: 'wrk_p1',
    job_id: 'job_p1',
    type: 'job',
    kind,
    model: null,
    payload: { runner_args: runnerArgs, ...extra },
    stream: false,
    lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
  };
}

function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  // A zombie (killed, not yet reaped by init) is gone for our purpose.
  const status = existsSync(`/proc/${pid}/status`) ? readFileSync(`/proc/${pid}/status`, 'utf8') : '';
  return /^State:\s+Z/m.test(status);
}

describe('process runner (kinds 5 and 6)', () => {
  let dataDir: string;
  let ctx: RunContext;
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'svc-node-proc-'));
    ctx = { engines: new Map(), dataDir, allowProcessRunner: true, signal: new AbortController().signal };
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('captures stdout, stderr and the exit code, in a scratch dir with a minimal environment, without a shell', async () => {
    const script =
      "process.stdout.write(JSON.stringify({ cwd: process.cwd(), env: process.env, arg: process.argv[1] })); process.stderr.write('warn')";
    const out = await runJob(job([node, '-e', script, '$(echo injected); rm -rf /']), ctx);
    const result = JSON.parse(out.bytes.toString()) as {
      exit_code: number;
      signal: null;
      stdout: string;
      stderr: string;
      duration_ms: number;
      truncated: boolean;
      timed_out: boolean;
    };
    expect(result).toMatchObject({ exit_code: 0, signal: null, stderr: 'warn', truncated: false, timed_out: false });
    const seen = JSON.parse(result.stdout) as { cwd: string; env: Record<string, string>; arg: string };
    const scratch = join(dataDir, 'scratch', 'wrk_p1');
    expect(seen.cwd).toBe(scratch);
    expect(seen.arg).toBe('$(echo injected); rm -rf /');
    expect(Object.keys(seen.env).sort()).toEqual(['HOME', 'LANG', 'PATH', 'TMPDIR']);
    expect(seen.env.HOME).toBe(scratch);
    expect(await readdir(join(dataDir, 'scratch'))).toEqual([]);
    expect(out).toMatchObject({
      engine: 'process',
      exit_code: 0,
      content_type: 'application/json',
      metering_units: Math.ceil(result.duration_ms / 1000),
    });
    expect(out.metering_units).toBeGreaterThanOrEqual(1);
  });

  it('reports a non-zero exit as a result, not a failure', async () => {
    const out = await runJob(job([node, '-e', "console.log('partial'); process.exit(3)"], {}, 6), ctx);
    expect(JSON.parse(out.bytes.toString())).toMatchObject({ exit_code: 3, stdout: 'partial\n', timed_out: false });
    expect(out.exit_code).toBe(3);
  });

  it('runs kind 7 (confidential training) the same way, metered in whole GPU-seconds', async () => {
    const out = await runJob(job([node, '-e', 'setTimeout(() => {}, 1100)'], {}, 7), ctx);
    expect(out.metering_units).toBe(2);
    expect(out.engine).toBe('process');
  });

  it('kills the whole process group at the wall-clock limit', async () => {
    // The job starts a grandchild that would sleep for 30 s, prints its pid, then sleeps itself.
    const script = [
      "const { spawn } = require('node:child_process');",
      "const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });",
      'console.log(child.pid);',
      'setTimeout(() => {}, 30000);',
    ].join('\n');
    const started = Date.now();
    const out = await runJob(job([node, '-e', script], { timeout_seconds: 1 }), ctx);
    const elapsed = Date.now() - started;
    const result = JSON.parse(out.bytes.toString()) as {
      exit_code: number | null;
      signal: string;
      stdout: string;
      timed_out: boolean;
    };
    expect(result).toMatchObject({ exit_code: null, signal: 'SIGKILL', timed_out: true });
    expect(elapsed).toBeLessThan(5_000);
    const grandchild = Number(result.stdout.trim());
    expect(grandchild).toBeGreaterThan(0);
    // Killed with its group: gone well before its own 30 s sleep would end.
    await eventually(() => isGone(grandchild), 'the grandchild to be killed');
    expect(out.metering_units).toBeGreaterThanOrEqual(1);
    expect(out.exit_code).toBeUndefined();
  });

  it('truncates stdout past 1 MiB with a marker', async () => {
    const out = await runJob(job([node, '-e', "process.stdout.write('x'.repeat(1536 * 1024))"]), ctx);
    const result = JSON.parse(out.bytes.toString()) as { stdout: string; truncated: boolean };
    expect(result.truncated).toBe(true);
    expect(result.stdout.startsWith('x'.repeat(1024 * 1024))).toBe(true);
    expect(result.stdout.slice(1024 * 1024)).toBe('\n[svc: output truncated at 1048576 bytes, 524288 bytes dropped]');
  });

  it('kills the process when the work is aborted and rejects', async () => {
    const controller = new AbortController();
    const running = runJob(job([node, '-e', 'setTimeout(() => {}, 30000)']), { ...ctx, signal: controller.signal });
    setTimeout(() => controller.abort(new Error('cancelled')), 200);
    await expect(running).rejects.toThrow('cancelled');
    expect(await readdir(join(dataDir, 'scratch'))).toEqual([]);
  });

  it('refuses without --allow-process-runner, and refuses bad payloads, non-retryably', async () => {
    const refused = await runJob(job([node, '-e', '1']), { ...ctx, allowProcessRunner: false }).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(WorkError);
    expect(refused).toMatchObject({ message: NO_RUNNER, retryable: false });
    await expect(runJob(job([]), ctx)).rejects.toMatchObject({
      retryable: false,
      message: expect.stringContaining('runner_args'),
    });
    await expect(runJob(job([node], { timeout_seconds: -1 }), ctx)).rejects.toMatchObject({ retryable: false });
    await expect(runJob(job(['/nonexistent/program']), ctx)).rejects.toMatchObject({
      retryable: true,
      message: 'cannot start /nonexistent/program: ENOENT',
    });
  });
});
