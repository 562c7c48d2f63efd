import { appendFileSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { afterAll, expect } from 'vitest';

// Per test file: the CPU its worker spent (user + system), and the CPU of the child processes it
// started and that ended (svc serve, svc node, chromium...), from /proc/self/stat in clock ticks.
// scripts/test.mjs lists the files that cost the most CPU, which is what bounds the suite on 2 CPUs.
const dir = process.env.SVC_TEST_REPORT_DIR;

function ticks(): { self: number; children: number } | undefined {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 to 17 of proc(5): utime, stime, cutime, cstime; f[0] is field 3.
    return { self: Number(f[11]) + Number(f[12]), children: Number(f[13]) + Number(f[14]) };
  } catch {
    return undefined;
  }
}

if (dir) {
  // Setup files run before each test file is imported, so its imports count too.
  const start = ticks();
  afterAll(() => {
    const end = ticks();
    const file = expect.getState().testPath;
    if (!start || !end || !file) return;
    appendFileSync(
      `${dir}/cpu.jsonl`,
      JSON.stringify({
        file: relative(process.cwd(), file),
        selfMs: (end.self - start.self) * 10,
        childrenMs: (end.children - start.children) * 10,
      }) + '\n',
    );
  });
}
