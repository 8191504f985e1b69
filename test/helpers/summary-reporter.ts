/**
 * A vitest reporter that ends every run with one plain line, `N passed, N failed` (`, N skipped` when any), after
 * the default reporter's summary, so CI and scripts can read the outcome without parsing vitest's colours. Unhandled
 * errors count as failures.
 */
import type { Reporter, TestModule } from "vitest/node";

export class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const m of testModules) {
      // A file that failed to load has no tests to count: count it as one failure.
      if (m.state() === "failed" && [...m.children.allTests()].length === 0) failed++;
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
        else skipped++;
      }
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}\n`);
  }
}
