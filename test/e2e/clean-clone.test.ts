/**
 * A clone with nothing beside it (issue 49, item 1): the repository's files alone (`git ls-files`: tracked, plus
 * untracked files git does not ignore) copied to a temporary folder that has no `../shared`, with this checkout's
 * node_modules linked and its compiled dist/ and native addon copied in (what `npm install` would build). `tidegate
 * dev` there seeds its planner from the data the repository ships (core/data) and its first plan forecasts every
 * (model, region) of the embedded default from that history.
 */
import { afterAll, describe, expect, it } from "vitest";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";
import { REPO_ROOT, firstPlan, forecastProblems, spawnScript, stopAll } from "./procs.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-clone-"));
const clone = join(dir, "tidegate");

afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

/** Copies the files git would put in a clone (tracked or not ignored) from the checkout to `to`. */
function copyRepository(to: string): number {
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: REPO_ROOT, encoding: "utf8" }).split("\0")
    // A worktree's node_modules may be a symlink, which `node_modules/` in .gitignore does not match: npm makes it.
    .filter((f) => f !== "" && f !== "node_modules" && existsSync(join(REPO_ROOT, f)));
  for (const f of files) {
    mkdirSync(dirname(join(to, f)), { recursive: true });
    cpSync(join(REPO_ROOT, f), join(to, f));
  }
  return files.length;
}

describe("a clone with no ../shared beside it", () => {
  it("`tidegate dev` makes a first plan with forecasts for every (model, region) from the shipped history", async () => {
    expect(copyRepository(clone)).toBeGreaterThan(100);
    expect(existsSync(join(clone, "..", "shared"))).toBe(false);
    expect(existsSync(join(clone, "core/data/servegen/aggregate/language_m-mid_total_rate_600s.csv"))).toBe(true);
    symlinkSync(join(REPO_ROOT, "node_modules"), join(clone, "node_modules"));
    cpSync(join(REPO_ROOT, "dist"), join(clone, "dist"), { recursive: true });
    cpSync(join(REPO_ROOT, "native/build"), join(clone, "native/build"), { recursive: true });
    const dataDir = join(dir, "data");
    writeFileSync(join(dir, "dev.json"), JSON.stringify({ router: { port: 0 }, queue: { dataDir } }));

    const dev = await spawnScript("dev", join(clone, "dist/bin/tidegate.js"), ["dev", "--config", join(dir, "dev.json")], /plan reports: open (http:\/\/\S+)\/login and sign in with the admin key (\S+)/, 90_000, 65536, clone);
    const [, url, key] = dev.match as unknown as [string, string, string];
    const report = await firstPlan(url, key);
    const config = parseConfig(DEFAULT_CONFIG_JSON);
    expect(report.forecasts).toHaveLength(12);
    expect(forecastProblems(report, config)).toEqual([]);
    const pairs = config.regions.flatMap((r) => r.endpoints.map((e) => `${e.model}@${r.name}`)).sort();
    // The seed came from the clone's own core/data, and nothing said the data was missing.
    expect(JSON.parse(readFileSync(join(dataDir, "planner", "seeded.json"), "utf8"))).toEqual({ series: pairs, source: join(clone, "core/data/servegen/aggregate") });
    const log = readFileSync(join(dataDir, "dev.log"), "utf8");
    expect(log.match(/seeded planner history: /g)).toHaveLength(config.models.length);
    expect(log).not.toMatch(/no ServeGen/);
    expect(await dev.stop()).toBe(0);
  });

  it("`tidegate replay --workload week` runs from the shipped data (ServeGen's per-client series, packed)", () => {
    // The clone the test above made: nothing beside it, its own core/data.
    expect(existsSync(join(clone, "dist/bin/tidegate.js"))).toBe(true);
    const r = spawnSync(process.execPath, [join(clone, "dist/bin/tidegate.js"), "replay", "--workload", "week", "--days", "0.01", "--quiet", "--out", join(dir, "week")], { cwd: clone, encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/predictive-hpa: \d+ requests in .* instance-hours/);
  });
});
