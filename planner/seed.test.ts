/**
 * `tidegate dev`'s first plan: history seeded from a day of the shipped ServeGen data (planner/seed.ts) gives a
 * plan with a forecast for every (model, region) of the embedded default, and a page with a chart for each.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { MemoryHistory } from "../forecasts/history.js";
import { createForecaster } from "../forecasts/registry.js";
import { defaultDataDir } from "../core/paths.js";
import { fleetFromConfig } from "./fleet.js";
import { renderPlanHtml } from "./html.js";
import { runPlan } from "./plan.js";
import { seedDevHistory, servegenSeedSamples } from "./seed.js";
import { HighsSolver } from "../core/solver.js";

const config = parseConfig(DEFAULT_CONFIG_JSON);
const nowMs = Date.UTC(2026, 10, 23, 15, 7);

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
    const r = await seedDevHistory(history, config, { dataDir: defaultDataDir(), nowMs });
    expect(r.seeded).toBe(true);
    expect(r.lines).toHaveLength(config.models.length);
    expect(r.lines[0]).toMatch(/llama2-70b ← ServeGen language_m-mid \(1 day\), scaled ×/);
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
});
