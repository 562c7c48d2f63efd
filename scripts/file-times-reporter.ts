import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import type { Reporter } from 'vitest/reporters';

/** One test file's cost: importing it and its dependencies (`collect`), then running it (`run`). */
export interface FileTime {
  file: string;
  collectMs: number;
  runMs: number;
}

/**
 * A Vitest reporter that writes each file's time to a JSON file, for scripts/test.mjs's "slowest
 * files" list. Vitest's JSON reporter only gives the span of a file's tests, without its hooks (a
 * `beforeAll` that opens a store) or its imports.
 */
export class FileTimesReporter implements Reporter {
  constructor(private readonly out: string) {}

  onFinished(
    files: readonly { filepath: string; collectDuration?: number; result?: { duration?: number } }[] = [],
  ): void {
    const times: FileTime[] = files.map((f) => ({
      file: relative(process.cwd(), f.filepath),
      collectMs: Math.round(f.collectDuration ?? 0),
      runMs: Math.round(f.result?.duration ?? 0),
    }));
    writeFileSync(this.out, JSON.stringify(times));
  }
}
