import { defineConfig } from "vitest/config";
import { SummaryReporter } from "./test/helpers/summary-reporter.js";

// Tests live next to the code they test (`*.test.ts`) and in test/ for cross-tier suites.
// Integration tests spawn compiled processes from dist/, so `npm test` builds first.
// The soft-RoCE VM suite (test/native/verbs-vm.test.ts) runs last and alone: its emulated CPUs share this box's
// cores, and its timing bounds (a killed peer detected within 1 s) are about the transport, not about a neighbour
// test file's load.
const VM_SUITE = "test/native/verbs-vm.test.ts";
const EXCLUDE = ["node_modules/**", "dist/**", "native/build/**"];

export default defineConfig({
  test: {
    reporters: ["default", new SummaryReporter()],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: "main", include: ["**/*.test.ts"], exclude: [...EXCLUDE, VM_SUITE] } },
      { extends: true, test: { name: "vm", include: [VM_SUITE], exclude: EXCLUDE, sequence: { groupOrder: 1 } } },
    ],
  },
});
