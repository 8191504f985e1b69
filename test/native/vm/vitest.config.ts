import { defineConfig } from "vitest/config";
import { SummaryReporter } from "../../helpers/summary-reporter.js";

// The verbs suite that runs inside softroce-vm (test/native/verbs-vm.test.ts starts it there): its own files
// (`*.vmtest.ts`, which the main suite does not pick up), one worker (the VM has two emulated cores), every test
// listed (verbose), and the plain summary line the host test reads.
export default defineConfig({
  test: {
    root: new URL("../../..", import.meta.url).pathname,
    include: ["test/native/vm/*.vmtest.ts"],
    reporters: ["verbose", new SummaryReporter()],
    pool: "forks",
    maxWorkers: 1,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
