/**
 * `tidegate dev`'s first plan: history seeded from a day of the shipped ServeGen data (planner/seed.ts) gives a
 * plan with a forecast for every (model, region) of the embedded default, and a page with a chart for each.
 */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { MemoryHistory, MINUTE_MS } from "../forecasts/history.js";
import { createForecaster } from "../forecasts/registry.js";
import { defaultDataDir, shippedDataDir } from "../core/paths.js";
import { fleetFromConfig } from "./fleet.js";
import { renderPlanHtml } from "./html.js";
import { runPlan } from "./plan.js";
import { servegenSeedSamples } from "./seed.js";
import { seedDevHistoryOnce } from "./seed-once.js";
import { HighsSolver } from "../core/solver.js";

const config = parseConfig(DEFAULT_CONFIG_JSON);
const nowMs = Date.UTC(2026, 10, 23, 15, 7);
const dir = mkdtempSync(join(tmpdir(), "tidegate-seed-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let lists = 0;
const listFile = () => join(dir, `seeded-${++lists}.json`);

describe("dev seed", () => {
  it("maps a day of ServeGen onto the last 24 h of every (model, region), scaled to the dev fleet", () => {
    const { samples, seeded } = servegenSeedSamples(config, { dataDir: defaultDataDir(), nowMs });
    expect(seeded.map((s) => s.model)).toEqual(config.models.map((m) => m.name));
    const pairs = new Set(samples.map((s) => `${s.model}@${s.region}`));
    expect(pairs.size).toBe(config.models.length * config.regions.length);
    const times = samples.map((s) => s.minuteMs);
    expect(Math.max(...times)).toBe(Math.floor(nowMs / 600_000) * 600_000 - 60_000);
    expect(Math.min(...times)).toBeGreaterThanOrEqual(Math.floor(nowMs / 600_000) * 600_000 - 86_400_000);
    const fleet = fleetFromConfig(config);
    for (const s of seeded) for (const [region, peak] of Object.entries(s.peakTokensPerS)) {
      const ep = config.regions.find((r) => r.name === region)!.endpoints.find((e) => e.model === s.model)!;
      expect(peak).toBeCloseTo(0.7 * ep.instances * fleet.models[s.model]![ep.gpu]!.tokensPerS, 3);
    }
  });

  it("gives the first plan a forecast for every (model, region) and a chart for each on its page", async () => {
    const history = new MemoryHistory();
    expect(defaultDataDir()).toBe(shippedDataDir());
    const r = await seedDevHistoryOnce(history, config, { dataDir: defaultDataDir(), nowMs, listFile: listFile() });
    expect(r.seeded).toHaveLength(12);
    expect(r.lines).toHaveLength(config.models.length);
    expect(r.lines[0]!.msg).toMatch(/^seeded planner history: llama2-70b ← ServeGen language_m-mid \(1 day\), scaled ×/);
    const forecaster = createForecaster({ name: "blend" });
    try {
      const report = await runPlan({ fleet: fleetFromConfig(config), history, forecaster, solver: await HighsSolver.create(), nowMs, decisionId: 1 });
      expect(report.forecasts).toHaveLength(config.models.length * config.regions.length);
      for (const f of report.forecasts) {
        expect(f.forecastSteps.length).toBe(6);
        expect(f.peak.mean).toBeGreaterThan(0);
        expect(f.historyWindows.filter(Number.isFinite).length).toBe(144);
      }
      expect(report.warnings.filter((w) => /no interactive history/.test(w))).toEqual([]);
      const html = renderPlanHtml(report);
      expect(html.match(/<svg class="chart forecast"/g)).toHaveLength(12);
      console.log(report.forecasts.map((f) => `${f.model}@${f.region} ${f.method} ${f.peak.mean.toFixed(0)} [${f.peak.lower.toFixed(0)},${f.peak.upper.toFixed(0)}] ${f.fallbackReason ?? ""}`).join("\n"));
      console.log(report.actions.map((a) => `${a.model}@${a.region} ${a.current}->${a.target}`).join("\n"), report.cost, report.solver.objective);
    } finally {
      await forecaster.close();
    }
  });

  it("seeds each (model, region) once, only into minutes with no recorded load; a history recorded without a seed is seeded when the data is there", async () => {
    const history = new MemoryHistory();
    const key = { kind: "iw" as const, model: "llama2-70b", region: "us-east" };
    // Load recorded by an earlier start that had no seed data: the last 30 minutes at 123 tokens/s.
    const endMinute = Math.floor(nowMs / 600_000) * 600_000;
    await history.add(Array.from({ length: 30 }, (_, i) => ({ ...key, minuteMs: endMinute - (i + 1) * MINUTE_MS, tokensPerS: 123 })));
    const file = listFile();
    const missing = await seedDevHistoryOnce(history, config, { dataDir: join(dir, "no-data"), nowMs, listFile: file });
    expect(missing.seeded).toEqual([]);
    expect(missing.lines.map((l) => l.level)).toEqual(["warn"]);
    expect(missing.lines[0]!.msg).toMatch(/no ServeGen aggregates at .*no-data\/servegen\/aggregate: .*the first start that finds them .* seeds the history/);
    // The data is there now: every series is seeded, the recorded minutes keep their value (never added to).
    const r = await seedDevHistoryOnce(history, config, { dataDir: shippedDataDir(), nowMs, listFile: file });
    expect(r.seeded).toHaveLength(12);
    expect(r.lines.at(-1)!.msg).toMatch(/only where it had no load: \d+ seeded minutes, 30 minutes kept as recorded/);
    const day = await history.series(key, endMinute - 86_400_000, endMinute);
    expect(day.slice(-30)).toEqual(Array(30).fill(123));
    expect(day.slice(0, -30).filter(Number.isFinite).length).toBeGreaterThan(1000);
    expect(JSON.parse(readFileSync(file, "utf8")).series).toHaveLength(12);
    // A restart on the same data directory seeds nothing again.
    const again = await seedDevHistoryOnce(history, config, { dataDir: shippedDataDir(), nowMs, listFile: file });
    expect(again.seeded).toEqual([]);
    expect(again.lines.map((l) => l.msg)).toEqual([expect.stringMatching(/planner history not seeded: every \(model, region\) was seeded at an earlier start/)]);
    expect(await history.series(key, endMinute - 86_400_000, endMinute)).toEqual(day);
    // Another config on the same data directory (a fourth region) seeds only its new series.
    const wider = parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), regions: [...(DEFAULT_CONFIG_JSON as { regions: { name: string; proximity: string[] }[] }).regions, { name: "eu-west", utcOffsetH: 1, proximity: [], gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama3.2-3b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 2 }], grpcAddress: "127.0.0.1:50060" }] });
    const more = await seedDevHistoryOnce(history, wider, { dataDir: shippedDataDir(), nowMs, listFile: file });
    expect(more.seeded).toEqual(["llama3.2-3b@eu-west"]);
    expect(more.lines.map((l) => l.msg)).toEqual([expect.stringMatching(/^seeded planner history: llama3\.2-3b ← ServeGen language_m-small \(1 day\), .*: eu-west \d+ tokens\/s$/)]);
    // A history holding every minute of the day (planted, or recorded all day) gets nothing, and says so.
    const full = new MemoryHistory();
    const seedDay = servegenSeedSamples(config, { dataDir: shippedDataDir(), nowMs }).samples;
    await full.add(seedDay.map((x) => ({ ...x, tokensPerS: 7 })));
    const none = await seedDevHistoryOnce(full, config, { dataDir: shippedDataDir(), nowMs, listFile: listFile() });
    expect(none.lines.map((l) => l.msg)).toEqual(["planner history not seeded: its 12 (model, region) series hold recorded load for every minute a seed would fill"]);
    expect((await full.series(key, endMinute - 86_400_000, endMinute)).filter((v) => v !== 7)).toEqual([]);
    // An unreadable seed list is said, and seeding goes on where the history has no load.
    const bad = listFile();
    writeFileSync(bad, "{not json");
    const fresh = new MemoryHistory();
    const r2 = await seedDevHistoryOnce(fresh, config, { dataDir: shippedDataDir(), nowMs, listFile: bad });
    expect(r2.lines[0]).toMatchObject({ level: "warn", msg: expect.stringMatching(/could not be read/) });
    expect(r2.seeded).toHaveLength(12);
  });
});
