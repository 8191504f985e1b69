/**
 * Plans of different configurations in one store (issue 49): the fingerprint tells fleets apart (and ignores what
 * does not change a plan), and the index lists the running configuration's plans, counts the others and shows them
 * on request (`?fleet=all`), in HTML and JSON.
 */
import { describe, expect, it } from "vitest";
import { join } from "node:path";
import { DEFAULT_CONFIG_JSON, loadConfig, parseConfig } from "../core/config.js";
import "../region/config-sections.js"; // the example's region sections (controller strategy)
import { REPO_ROOT } from "../test/e2e/procs.js";
import { createForecaster } from "../forecasts/registry.js";
import { HighsSolver } from "../core/solver.js";
import { samplePlanInputs } from "../test/helpers/plans.js";
import { planFleet, sameFleet } from "./fingerprint.js";
import { runPlan } from "./plan.js";
import { plansSite } from "./routes.js";
import { MemoryPlanStore } from "./store.js";

const dev = parseConfig(DEFAULT_CONFIG_JSON);
// The case: `tidegate dev`, then `tidegate dev --config deploy/examples/dev-scaling.json`, one data directory.
const scaling = loadConfig(join(REPO_ROOT, "deploy/examples/dev-scaling.json"));
const KEY = "admin-key-for-fleet-tests";

describe("plan fleets", () => {
  it("one fingerprint per fleet: order, ports and tuning do not change it; regions, GPUs and endpoints do", () => {
    const a = planFleet(dev);
    expect(a.fingerprint).toMatch(/^[0-9a-f]{12}$/);
    expect(a.regions).toEqual(["us-central", "us-east", "us-west"]);
    expect(planFleet({ ...dev, regions: [...dev.regions].reverse().map((r) => ({ ...r, grpcAddress: "10.0.0.1:1", endpoints: r.endpoints.map((e) => ({ ...e, maxInstances: e.maxInstances + 3 })) })) }).fingerprint).toBe(a.fingerprint);
    expect(planFleet(scaling).fingerprint).not.toBe(a.fingerprint);
    expect(planFleet({ ...dev, regions: dev.regions.map((r, i) => (i === 0 ? { ...r, gpus: r.gpus.map((g) => ({ ...g, count: g.count + 8 })) } : r)) }).fingerprint).not.toBe(a.fingerprint);
    // A model's pools (issue 48) are endpoints of their own: swapping which pool an endpoint is changes nothing, making
    // one colocated endpoint a pool does.
    const pools = loadConfig(join(REPO_ROOT, "deploy/examples/dev-pd.json"));
    const p = planFleet(pools).fingerprint;
    expect(planFleet({ ...pools, regions: pools.regions.map((r) => ({ ...r, endpoints: [...r.endpoints].reverse() })) }).fingerprint).toBe(p);
    expect(planFleet({ ...pools, regions: pools.regions.map((r) => ({ ...r, endpoints: r.endpoints.map(({ role: _r, ...e }) => e) })) }).fingerprint).not.toBe(p);
    expect(sameFleet({}, a.fingerprint)).toBe(true); // a report from before fingerprints goes with every fleet
    expect(sameFleet({ fleet: planFleet(scaling) }, a.fingerprint)).toBe(false);
  });

  it("the index shows the running configuration's plans and says how many of another it keeps", async () => {
    const { fleet, history, nowMs } = await samplePlanInputs();
    const forecaster = createForecaster({ name: "seasonal-naive" });
    const solver = await HighsSolver.create();
    const store = new MemoryPlanStore();
    try {
      const made = [];
      for (const [i, f] of [planFleet(scaling), planFleet(scaling), planFleet(dev)].entries()) {
        const r = await runPlan({ fleet, history, forecaster, solver, nowMs: nowMs + i * 3_600_000, decisionId: i + 1 });
        r.fleet = f;
        await store.put(r);
        made.push(r);
      }
      const site = plansSite({ store, adminKeys: [KEY], fleet: planFleet(dev) });
      const get = (path: string, accept: string) => site.app.request(path, { headers: { authorization: `Bearer ${KEY}`, accept } });
      const page = await (await get("/plans", "text/html")).text();
      expect(page).toContain(`href="/plans/${made[2]!.id}"`);
      expect(page).not.toContain(`href="/plans/${made[0]!.id}"`);
      expect(page).toMatch(/2 plans made for another configuration in this store are not shown: <a href="\/plans\?fleet=all">show every plan<\/a>/);
      const all = await (await get("/plans?fleet=all", "text/html")).text();
      for (const r of made) expect(all).toContain(`href="/plans/${r.id}"`);
      expect(all).toContain(`<a href="/plans">Only this configuration's</a>`);
      const json = (await (await get("/plans", "application/json")).json()) as { data: { id: string }[] };
      expect(json.data.map((x) => x.id)).toEqual([made[2]!.id]);
      const jsonAll = (await (await get("/plans?fleet=all", "application/json")).json()) as { data: { id: string }[] };
      expect(jsonAll.data).toHaveLength(3);
    } finally {
      await forecaster.close();
    }
  });
});
