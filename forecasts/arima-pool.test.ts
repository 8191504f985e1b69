import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../core/paths.js";

describe("ArimaPool", () => {
  it("never keeps its process alive: a script that fits and ends without close() exits at once", () => {
    // The week replay's planner owns a pool; an error before its close (a missing data folder) left `tidegate replay`
    // hanging after its one-line message, because the workers were unref'd before their listeners re-ref'd them.
    const pool = join(repoRoot(), "dist", "forecasts", "arima-pool.js");
    const script = `import { ArimaPool } from ${JSON.stringify(pool)};
const p = new ArimaPool({ workers: 2 });
const values = Array.from({ length: 120 }, (_, i) => 100 + 10 * Math.sin(i / 4) + (i % 7));
const r = await p.run({ order: { p: 1, d: 1, q: 1, P: 0, D: 0, Q: 0, s: 0 }, values, horizonSteps: 2 });
console.log(r.mean.length);`;
    const dir = mkdtempSync(join(tmpdir(), "tidegate-arima-"));
    const file = join(dir, "fit.mjs");
    writeFileSync(file, script);
    const started = Date.now();
    const r = spawnSync(process.execPath, [file], { encoding: "utf8", timeout: 30_000 });
    rmSync(dir, { recursive: true, force: true });
    expect(r.error).toBeUndefined();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe("2");
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});
