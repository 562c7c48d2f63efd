import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';
import { FileTimesReporter } from './scripts/file-times-reporter.js';
import { classifyTests, type TestClasses } from './scripts/store-tests.js';

// `npm test` runs the suite on two stores at once; scripts/test.mjs names in SVC_TEST_LEAVE_OUT the
// classes of files (scripts/store-tests.ts) each pass leaves to the other: the PGlite pass the
// files that cannot see the store, the PostgreSQL pass those that declare one store enough.
const leaveOut = (process.env.SVC_TEST_LEAVE_OUT ?? '').split(',').filter(Boolean) as (keyof TestClasses)[];
const classes = leaveOut.length > 0 ? classifyTests() : undefined;
// scripts/test.mjs reads the counts and each file's time from here.
const reportDir = process.env.SVC_TEST_REPORT_DIR;

export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'scripts/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...leaveOut.flatMap((name) => classes?.[name] ?? [])],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One process per worker runs its files one after another and keeps their imports: importing
    // the server's module graph afresh for each file cost 2 to 6 s of a file's time ("collect"),
    // more than most files' tests. A file therefore must leave no state behind that another one
    // could see (close what it opens, restore timers and globals). SVC_TEST_ISOLATE=1 gives each
    // file its own process again, to tell whether a failure comes from a neighbour.
    isolate: process.env.SVC_TEST_ISOLATE === '1',
    // Vitest's default is one worker per CPU but one, so a single worker on 2 CPUs: test files
    // spend much of their time waiting (on child processes, sockets, timers), so two overlap well.
    maxWorkers: Number(process.env.SVC_TEST_WORKERS) || Math.max(2, availableParallelism() - 1),
    // Records each file's CPU for scripts/test.mjs (only when it asks, with SVC_TEST_REPORT_DIR).
    setupFiles: ['scripts/file-cpu-setup.ts'],
    // Builds the migrated store every test copies (packages/server/test/store-template.ts),
    // compiles the `svc` the CLI tests spawn (packages/cli/test/cli-bundle.ts) and makes the
    // directory of the run's one dashboard build (packages/dashboard/test/stack.ts).
    globalSetup: [
      'packages/server/test/global-setup.ts',
      'packages/cli/test/global-setup.ts',
      'packages/dashboard/test/global-setup.ts',
    ],
    reporters: reportDir
      ? [
          'default',
          ['json', { outputFile: `${reportDir}/report.json` }],
          new FileTimesReporter(`${reportDir}/files.json`),
        ]
      : ['default'],
  },
});
