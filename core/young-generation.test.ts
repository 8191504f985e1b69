import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../test/e2e/procs.js";

/**
 * A child process allocates with survivors (the pattern that makes V8 grow its new space) in a fixed number of
 * event-loop turns and prints the largest new space it saw; with the cap it must stay within it, without it V8 grows past it
 * (the control that shows the workload would grow it).
 */
async function largestNewSpaceMiB(capMiB: number): Promise<number> {
  const script = `
    import { capYoungGeneration, newSpaceBytes } from "./dist/core/young-generation.js";
    capYoungGeneration(${capMiB});
    let keep = [], most = newSpaceBytes();
    for (let round = 0; round < 1500; round++) {
      for (let i = 0; i < 2000; i++) { keep.push({ i, s: "x" + i, b: [i, i] }); if (keep.length > 50000) keep = keep.slice(25000); }
      // A server's work comes in event-loop turns; the GC observer runs between them.
      await new Promise((r) => setTimeout(r, 0));
      most = Math.max(most, newSpaceBytes());
    }
    console.log(most / 2 ** 20);
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { cwd: REPO_ROOT, timeout: 120_000 });
  return Number(stdout.trim());
}

describe("capYoungGeneration", () => {
  it("keeps V8's new space within the cap where it would otherwise grow past it", async () => {
    const [uncapped, capped] = await Promise.all([largestNewSpaceMiB(0), largestNewSpaceMiB(8)]);
    expect(uncapped).toBeGreaterThan(8);
    expect(capped).toBeGreaterThan(0);
    expect(capped).toBeLessThanOrEqual(8);
  }, 120_000);

  it("refuses a negative cap", async () => {
    const { capYoungGeneration } = await import("./young-generation.js");
    expect(() => capYoungGeneration(-1)).toThrow(/≥ 0 MiB/);
  });
});
