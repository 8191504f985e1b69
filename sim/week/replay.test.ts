import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_WORKLOAD_JSON, parseWorkload, workloadDataDirs } from "../workload/spec.js";
import { shippedDataDir } from "../../core/paths.js";
import { namedLoading } from "../../region/liveload/liveload-config.js";
import { DEFAULT_FLEET_JSON, parseFleet, withLoading } from "./fleet.js";
import { createPlanner } from "./planner.js";
import { runWeek } from "./replay.js";
import { writeReports } from "./report.js";

const fleet = parseFleet(DEFAULT_FLEET_JSON);
// ServeGen's per-client series of the week's sources ship packed (core/data/README.txt §3).
const workload = parseWorkload({ ...DEFAULT_WORKLOAD_JSON, ...workloadDataDirs(shippedDataDir()), days: 0.125, targetRequests: 15_000, bursts: [{ startMs: 2 * 3_600_000 + 40 * 60_000, durationMs: 20 * 60_000, factor: 8, model: "llama2-70b" }] }, fleet.config);
const dir = mkdtempSync(join(tmpdir(), "tidegate-week-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("week replay (3 h, real policies)", () => {
  it("accounts for every request, acknowledges every plan, and the strategies differ", async () => {
    const reactive = await runWeek({ fleet, workload, strategy: "reactive", planner: await createPlanner(fleet), minuteSeries: true });
    const ltua = await runWeek({ fleet, workload, strategy: "lt-ua", planner: await createPlanner(fleet), minuteSeries: true });
    for (const r of [reactive, ltua]) {
      const served = Object.values(r.models).reduce((s, m) => s + m.ttftMs.count, 0);
      expect(served + r.requests.interactiveUnserved).toBe(r.requests.interactive);
      expect(r.requests.interactiveUnserved).toBe(0);
      expect(r.requests.total).toBeGreaterThan(13_000);
      expect(r.batch.done).toBe(r.batch.submitted);
      expect(r.batch.allWithinDeadline).toBe(true);
      expect(r.plans).toBe(3);
      expect(r.planAcks).toBe(9);
      expect(r.totals.instanceHours).toBeGreaterThan(0);
      expect(r.interactive.ttftMs.p95).toBeGreaterThanOrEqual(r.interactive.ttftMs.p50);
      expect(r.minuteP95TtftMs?.["llama2-70b"]).toHaveLength(180);
      // Every interactive request is judged against its model's SLO once (an unserved one as a miss), hour by hour.
      for (const m of Object.values(r.models)) {
        expect(m.slo.requests).toBe(m.ttftMs.count);
        expect(m.slo.metRequests).toBeLessThanOrEqual(m.slo.requests);
        expect(m.tpotMs.count).toBeGreaterThan(0);
        expect(m.slo.met).toBe(m.slo.ttftAtPercentileMs <= m.slo.ttftMs && m.slo.tpotAtPercentileMs <= m.slo.tpotMs && m.slo.failedAfterFirstToken === 0);
      }
      const judged = Object.values(r.models).reduce((s, m) => s + m.slo.requests, 0);
      const met = Object.values(r.models).reduce((s, m) => s + m.slo.metRequests, 0);
      expect(judged).toBe(r.requests.interactive);
      expect(r.slo.attainment).toBeCloseTo(met / judged, 4);
      expect(r.slo.met).toBe(r.slo.unmetModels.length === 0);
      expect(Object.values(r.hourly.models)[0]!.sloAttainment).toHaveLength(3);
    }
    // The reactive baseline scales on every utilization swing; the forecast-paced strategy does not.
    expect(reactive.totals.actionsByReason["util-above"]).toBeGreaterThan(0);
    expect(ltua.totals.actionsByReason["util-above"]).toBeUndefined();
    expect(reactive.totals.provisioningGpuHours).toBeGreaterThan(ltua.totals.provisioningGpuHours);
    // Same seed, same workload: identical request counts.
    expect(ltua.requests).toEqual(reactive.requests);
    const files = writeReports(dir, [reactive, ltua]);
    expect(files).toContain(join(dir, "comparison.html"));
    const html = readFileSync(join(dir, "lt-ua.html"), "utf8");
    expect(html).toContain("<svg");
    expect(html).toContain("instance-hours");
    expect(JSON.parse(readFileSync(join(dir, "reactive.json"), "utf8")).strategy).toBe("reactive");
  });

  it("the CLI rejects a bad fleet file with the field's path", () => {
    const bad = structuredClone(DEFAULT_FLEET_JSON);
    bad.fleet.regions[0]!.gpus[0]!.count = 0;
    bad.fleet.regions[0]!.endpoints.forEach((e) => ((e.instances = 0), (e.minInstances = 0)));
    const file = join(dir, "bad-fleet.json");
    writeFileSync(file, JSON.stringify(bad));
    const cli = join(process.cwd(), "dist/bin/tidegate.js");
    expect(existsSync(cli)).toBe(true);
    const r = spawnSync(process.execPath, [cli, "replay", "--workload", "week", "--fleet", file, "--quiet"], { encoding: "utf8" });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/fleet\.regions\[0\]\.gpus\[0\]\.count: region us-east has zero h100-80gb capacity/);
    const w = join(dir, "bad-workload.json");
    writeFileSync(w, JSON.stringify({ ...DEFAULT_WORKLOAD_JSON, models: [{ name: "llama2-70b", source: "language/m-mid", share: 0, tokens: "conv" }] }));
    const r2 = spawnSync(process.execPath, [cli, "replay", "--workload", "week", "--workload-file", w, "--quiet"], { encoding: "utf8" });
    expect(r2.status).toBe(2);
    expect(r2.stderr).toMatch(/models\[0\]\.share: must be > 0/);
    const r3 = spawnSync(process.execPath, [cli, "replay", "--workload", "week", "--loading", "nfs", "--quiet"], { encoding: "utf8" });
    expect(r3.status).toBe(2);
    expect(r3.stderr).toMatch(/--loading: must be one of ssd, allcache, network, blitzscale, lambdascale, faasnet-tree, nccl-ring, none, got "nfs"/);
    // Without --data-dir the week reads the shipped data (ServeGen's per-client series packed in core/data).
    const r4 = spawnSync(process.execPath, [cli, "replay", "--workload", "week", "--days", "0.01", "--quiet", "--out", join(dir, "shipped")], { encoding: "utf8" });
    expect(r4.status, r4.stderr).toBe(0);
    expect(r4.stdout).toMatch(/predictive-hpa: \d+ requests in/);
    // A data folder without the series, in either form (the Azure traces only): one line names both paths.
    const partial = join(dir, "partial");
    mkdirSync(partial);
    symlinkSync(join(shippedDataDir(), "azure_llm_2023"), join(partial, "azure_llm_2023"));
    const r5 = spawnSync(process.execPath, [cli, "replay", "--workload", "week", "--days", "0.01", "--quiet", "--data-dir", partial, "--out", join(dir, "none")], { encoding: "utf8" });
    expect(r5.status).toBe(2);
    expect(r5.stderr.trim().split("\n")).toHaveLength(1);
    expect(r5.stderr).toMatch(/no ServeGen per-client series at .*servegen\/data\/language\/m-mid, nor their packed form .*m-mid\.csv\.gz/);
  });

  it("with controller.loading (the --loading flag) every region loads layer-wise: zigzag pairs on the burst, books balanced", async () => {
    const loaded = withLoading(fleet, namedLoading("blitzscale", "--loading"));
    expect(loaded.config.controller.loading?.source).toBe("blitzscale");
    const r = await runWeek({ fleet: loaded, workload, strategy: "lt-ua", planner: await createPlanner(loaded) });
    expect(r.loading?.sources).toEqual(["blitzscale/zigzag"]);
    const c = r.loading!.counters;
    expect(c.scaleOuts).toBeGreaterThan(0);
    expect(c.instancesLoaded).toBeGreaterThanOrEqual(c.scaleOuts);
    // each new instance pairs with a serving one while it loads, and the pair plans the prefills it shares
    // (zigzag's ILP only for episodes of several batches: a one-batch episode takes best effort's split)
    expect(c.pairs).toBeGreaterThan(0);
    expect(c.episodes).toBeGreaterThan(0);
    expect(c.zigzagEpisodes).toBeLessThanOrEqual(c.episodes);
    const served = Object.values(r.models).reduce((s, m) => s + m.ttftMs.count, 0);
    expect(served + r.requests.interactiveUnserved).toBe(r.requests.interactive);
    expect(r.requests.interactiveUnserved).toBe(0);
    expect(r.batch.allWithinDeadline).toBe(true);
    // none = the fleet's constant delays: no loading books
    const plain = withLoading(loaded, namedLoading("none", "--loading"));
    expect(plain.config.controller.loading).toBeUndefined();
  });
});
