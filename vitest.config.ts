import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';
import { FileTimesReporter } from './scripts/file-times-reporter.js';
import { classifyTests } from './scripts/store-tests.js';

// `npm test` runs the suite once per store; after the first pass, scripts/test.mjs sets
// SVC_TEST_STORE_ONLY so the later ones skip the files that cannot see which store runs
// (the rule is in scripts/store-tests.ts).
const storeOnly = process.env.SVC_TEST_STORE_ONLY === '1';
// scripts/test.mjs reads the counts and each file's time from here.
const reportDir = process.env.SVC_TEST_REPORT_DIR;

export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'scripts/**/*.test.ts'],
    exclude: [...configDefaults.exclude, ...(storeOnly ? classifyTests().independent : [])],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default is one worker per CPU but one, so a single worker on 2 CPUs: test files
    // spend much of their time waiting (on child processes, sockets, timers), so two overlap well.
    maxWorkers: Number(process.env.SVC_TEST_WORKERS) || Math.max(2, availableParallelism() - 1),
    // Builds the migrated store every test copies (packages/server/test/store-template.ts).
    globalSetup: ['packages/server/test/global-setup.ts'],
    reporters: reportDir
      ? [
          'default',
          ['json', { outputFile: `${reportDir}/report.json` }],
          new FileTimesReporter(`${reportDir}/files.json`),
        ]
      : ['default'],
  },
});
