import { defineConfig } from "vitest/config";
import { SummaryReporter } from "./test/helpers/summary-reporter.js";

// Tests live next to the code they test (`*.test.ts`) and in test/ for cross-tier suites.
// Integration tests spawn compiled processes from dist/, so `npm test` builds first.
export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", "dist/**", "native/build/**"],
    reporters: ["default", new SummaryReporter()],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
