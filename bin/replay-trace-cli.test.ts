/** `tidegate replay --trace` as a user runs it: the compiled CLI (npm test builds first). */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { CLI, REPO_ROOT } from "../test/e2e/procs.js";
import type { TraceSummary } from "../sim/replay/summary.js";

const run = promisify(execFile);

describe("tidegate replay --trace", () => {
  it("prints percentiles per model and region, utilization and req/wall s, a progress bar on stderr, and JSON", async () => {
    const { stdout, stderr } = await run(process.execPath, [CLI, "replay", "--trace", "azure-conv", "--limit", "400", "--seed", "5", "--json"], { cwd: REPO_ROOT, timeout: 60_000 });
    expect(stderr).toMatch(/replay azure-conv \[#+-*\]/);
    expect(stdout).toMatch(/^trace azure-conv: 400 requests over \d+ s \(seed 5\); served 400/m);
    for (const model of ["llama2-70b", "bloom-176b", "llama3.1-8b", "llama3.2-3b"]) {
      for (const region of ["us-east", "us-central", "us-west"]) expect(stdout).toContain(`${model}@${region}`);
    }
    expect(stdout).toMatch(/simulated requests per wall second/);
    const summary = JSON.parse(stdout.trim().split("\n").at(-1)!) as TraceSummary;
    expect(summary.served).toBe(400);
    expect(summary.groups.find((g) => g.key === "*@*")!.requests).toBe(400);
    expect(summary.utilization.length).toBe(12);
  });

  it("rejects an unknown trace with a clear message and exit code 2", async () => {
    await expect(run(process.execPath, [CLI, "replay", "--trace", "no-such.csv"], { cwd: REPO_ROOT, timeout: 30_000 })).rejects.toMatchObject({ code: 2, stderr: expect.stringMatching(/--trace: cannot read no-such\.csv/) });
  });
});
