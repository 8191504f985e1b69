/**
 * `tidegate dev` (compiled CLI) as a newcomer meets it: it prints the URL to open and a key that stays the same
 * on the same data directory, logs where its seeded history came from (never the key), and its first plan has a
 * forecast for every (model, region) of the embedded default and a page with a chart for each.
 */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { spawnTidegate, stopAll, type Proc } from "../test/e2e/procs.js";
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

/** The log lines (JSON on stderr) of a process's output. */
const logLines = (p: Proc) => p.output().split("\n").filter((l) => l.startsWith("{"));

async function firstPlan(url: string, key: string): Promise<PlanReport> {
  const auth = { authorization: `Bearer ${key}`, accept: "application/json" };
  for (let i = 0; i < 100; i++) {
    const list = (await (await fetch(`${url}/plans`, { headers: auth })).json()) as { data: { id: string }[] };
    if (list.data.length > 0) return (await (await fetch(`${url}/plans/${list.data.at(-1)!.id}.json`, { headers: auth })).json()) as PlanReport;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("no plan after 20 s");
}

describe("tidegate dev's plans", () => {
  it("prints a stable key and the URL; its first plan forecasts every (model, region)", async () => {
    const dev = await spawnTidegate("dev", ["dev", "--config", configFile], READY, 60_000);
    const [, url, key] = dev.match as unknown as [string, string, string];
    expect(statSync(join(dir, "data", "planner", "admin.key")).mode & 0o777).toBe(0o600);
    const report = await firstPlan(url, key);
    const pairs = config.regions.flatMap((r) => r.endpoints.map((e) => `${e.model}@${r.name}`)).sort();
    expect(report.forecasts.map((f) => `${f.model}@${f.region}`).sort()).toEqual(pairs);
    for (const f of report.forecasts) {
      expect(f.peak.mean).toBeGreaterThan(0);
      expect(f.historyWindows.filter(Number.isFinite).length).toBeGreaterThanOrEqual(144);
    }
    expect(report.warnings.filter((w) => /no interactive history/.test(w))).toEqual([]);
    const page = await (await fetch(`${url}/plans/${report.id}`, { headers: { authorization: `Bearer ${key}` } })).text();
    expect(page.match(/<svg class="chart forecast"/g)).toHaveLength(pairs.length);
    expect(page).not.toContain(key);
    const logs = logLines(dev);
    expect(logs.filter((l) => l.includes("seeded planner history")).length).toBe(config.models.length);
    expect(logs.some((l) => l.includes(key))).toBe(false);
    expect(await dev.stop()).toBe(0);

    const again = await spawnTidegate("dev", ["dev", "--config", configFile], READY, 60_000);
    expect(again.match[2]).toBe(key);
    expect((await fetch(`${again.match[1]}/plans`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    await again.stop();
  });
});
