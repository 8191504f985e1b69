/**
 * `tidegate dev` (compiled CLI) as a newcomer meets it: it prints the URL to open and a key that stays the same
 * on the same data directory, logs where its seeded history came from (never the key), and its first plan has a
 * forecast for every (model, region) of the embedded default, a page with a chart for each, and every endpoint's
 * expected scale-out. Restarted on the same data directory it still serves that plan, with its history
 * (planner/history/), and its new plans continue the ids.
 */
import { afterAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { firstPlan, forecastProblems, spawnTidegate, stopAll, type Proc } from "../test/e2e/procs.js";
import type { PlanReport } from "./report.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-dev-plans-"));
const configFile = join(dir, "config.json");
writeFileSync(configFile, JSON.stringify({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), router: { port: 0 }, queue: { dataDir: join(dir, "data") } }));
const config = parseConfig(DEFAULT_CONFIG_JSON);
const READY = /plan reports: open (http:\/\/\S+)\/login and sign in with the admin key (\S+)/;

afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * The JSON log lines of a dev process: in its output (stderr), and in its log file where dev writes one
 * (`<queue.dataDir>/dev.log`, rewritten at each start: read it before the next start).
 */
const logLines = (p: Proc) => {
  const file = join(dir, "data", "dev.log");
  return [...p.output().split("\n"), ...(existsSync(file) ? readFileSync(file, "utf8").split("\n") : [])].filter((l) => l.startsWith("{"));
};

describe("tidegate dev's plans", () => {
  it("prints a stable key and the URL; its first plan forecasts every (model, region)", async () => {
    const dev = await spawnTidegate("dev", ["dev", "--config", configFile], READY, 60_000);
    const [, url, key] = dev.match as unknown as [string, string, string];
    expect(statSync(join(dir, "data", "planner", "admin.key")).mode & 0o777).toBe(0o600);
    const report = await firstPlan(url, key);
    const pairs = config.regions.flatMap((r) => r.endpoints.map((e) => `${e.model}@${r.name}`)).sort();
    expect(forecastProblems(report, config)).toEqual([]);
    // The planner starts once the regions serve: its first plan has every endpoint's expected scale-out from them.
    for (const a of report.actions) expect(a.expectedScaleOutMs, `${a.model}@${a.region}`).toBeGreaterThan(0);
    const page = await (await fetch(`${url}/plans/${report.id}`, { headers: { authorization: `Bearer ${key}` } })).text();
    expect(page.match(/<tr class="(up|down|unchanged)">/g)).toHaveLength(pairs.length);
    expect(page).not.toMatch(/<tr class="(up|down|unchanged)">[^\n]*<td>—<\/td><\/tr>/);
    expect(page.match(/<svg class="chart forecast"/g)).toHaveLength(pairs.length);
    expect(page).not.toContain(key);
    const logs = logLines(dev);
    expect(logs.filter((l) => l.includes("seeded planner history")).length).toBe(config.models.length);
    expect(logs.some((l) => l.includes(key))).toBe(false);
    expect(await dev.stop()).toBe(0);

    expect(readdirSync(join(dir, "data", "planner", "plans"))).toContain(`${report.id}.json`);
    expect(readdirSync(join(dir, "data", "planner", "history")).filter((n) => n.endsWith(".json")).length).toBeGreaterThanOrEqual(24); // the seeded day

    const again = await spawnTidegate("dev", ["dev", "--config", configFile], READY, 60_000);
    expect(again.match[2]).toBe(key);
    const auth = { authorization: `Bearer ${key}`, accept: "application/json" };
    // The plan made before the restart is still served, and the restarted planner's own plan comes after it.
    let ids: { id: string; decisionId: number }[] = [];
    for (let i = 0; i < 300 && !ids.some((p) => p.decisionId > report.decisionId); i++) {
      ids = ((await (await fetch(`${again.match[1]}/plans`, { headers: auth })).json()) as { data: { id: string; decisionId: number }[] }).data;
      if (!ids.some((p) => p.decisionId > report.decisionId)) await new Promise((r) => setTimeout(r, 200));
    }
    expect(ids.map((p) => p.id)).toContain(report.id);
    expect(ids[0]!.decisionId).toBeGreaterThan(report.decisionId);
    expect(await (await fetch(`${again.match[1]}/plans/${report.id}.json`, { headers: auth })).json()).toEqual(report);
    // Its history was kept, not seeded again: the restarted plan forecasts from the same day.
    const restarted = (await (await fetch(`${again.match[1]}/plans/${ids[0]!.id}.json`, { headers: auth })).json()) as PlanReport;
    for (const f of restarted.forecasts) expect(f.historyWindows.filter(Number.isFinite).length).toBeGreaterThanOrEqual(144);
    await again.stop();
  });
});
