/**
 * The plan page in a real headless Chromium (Debian's /usr/bin/chromium): a plan made by runPlan from a week of
 * synthetic history is served by the global router (router/server.ts GlobalRouter, with the plansRoutes sub-app
 * mounted as `tidegate dev` and `tidegate global` mount it); the page must show its SVG charts and log no console
 * errors. The admin key is required.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { WallClock } from "../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { silentLogger } from "../core/log.js";
import { FakeRegionLink } from "../router/fake-link.js";
import { GlobalRouter } from "../router/server.js";
import { chromium, type BrowserContext } from "playwright-core";
import { MemoryHistory, type DemandSample } from "../forecasts/history.js";
import { createForecaster } from "../forecasts/registry.js";
import type { Fleet } from "./fleet.js";
import { runPlan } from "./plan.js";
import { plansRoutes } from "./routes.js";
import { HighsSolver } from "./solver.js";
import { MemoryPlanStore } from "./store.js";

const ADMIN = "admin-key-for-tests";
const CHROMIUM = "/usr/bin/chromium";

/** A 2-region, 2-model fleet and 8 days of per-minute history with a daily cycle. */
export async function samplePlanInputs(): Promise<{ fleet: Fleet; history: MemoryHistory; nowMs: number }> {
  const fleet: Fleet = {
    alpha: 0.8,
    beta: 0.2,
    gpus: { "h100-80gb": { holdPerGpu: 5, vmStartPerGpu: 0.4 } },
    models: { "llama2-70b": { "h100-80gb": { gpusPerInstance: 4, tokensPerS: 5000, modelStartCost: 0.5 } }, "llama3.1-8b": { "h100-80gb": { gpusPerInstance: 2, tokensPerS: 18000, modelStartCost: 0.3 } } },
    regions: ["us-east", "us-west"].map((name) => ({
      name,
      capacity: { "h100-80gb": 64 },
      endpoints: [
        { model: "llama2-70b", gpu: "h100-80gb", instances: 4, minInstances: 1, maxInstances: 16, spotInstances: 1 },
        { model: "llama3.1-8b", gpu: "h100-80gb", instances: 2, minInstances: 1, maxInstances: 16, spotInstances: 0 },
      ],
    })),
  };
  const history = new MemoryHistory();
  const start = 100 * 86_400_000;
  const minutes = 8 * 1440;
  const samples: DemandSample[] = [];
  for (let i = 0; i < minutes; i++) {
    const day = Math.sin((2 * Math.PI * i) / 1440);
    for (const [model, base] of [["llama2-70b", 20000], ["llama3.1-8b", 30000]] as const) {
      for (const [region, shift] of [["us-east", 0], ["us-west", 0.3]] as const) {
        samples.push({ kind: "iw", model, region, minuteMs: start + i * 60_000, tokensPerS: base * (1 + 0.5 * day + shift + 0.05 * Math.sin(i / 7)) });
        samples.push({ kind: "niw", model, region, minuteMs: start + i * 60_000, tokensPerS: base * 0.1 });
      }
    }
  }
  await history.add(samples);
  return { fleet, history, nowMs: start + minutes * 60_000 };
}

let router: GlobalRouter;
let base: string;
let context: BrowserContext;
let planId: string;
const profile = mkdtempSync(join(tmpdir(), "tidegate-chromium-"));

beforeAll(async () => {
  const { fleet, history, nowMs } = await samplePlanInputs();
  const forecaster = createForecaster({ name: "blend" });
  const solver = await HighsSolver.create();
  const store = new MemoryPlanStore();
  const first = await runPlan({ fleet, history, forecaster, solver, nowMs: nowMs - 3_600_000, decisionId: 1 });
  await store.put(first);
  const report = await runPlan({ fleet, history, forecaster, solver, nowMs, decisionId: 2, previous: first, strategy: "lt-ua" });
  await store.put(report);
  planId = report.id;
  const config = parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), router: { adminKeys: [ADMIN] } });
  router = new GlobalRouter({
    config,
    links: config.regions.map((r) => new FakeRegionLink(r.name)),
    clock: new WallClock(),
    logger: silentLogger,
    defaultMetrics: false,
    mounts: [{ path: "/", app: plansRoutes({ store, adminKeys: config.router.adminKeys }) }],
  });
  const addr: AddressInfo = await router.listen("127.0.0.1", 0);
  base = `http://127.0.0.1:${addr.port}`;
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
  // A fresh --user-data-dir: playwright passes `profile` as Chromium's --user-data-dir.
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    extraHTTPHeaders: { authorization: `Bearer ${ADMIN}` },
  });
});

afterAll(async () => {
  await context?.close();
  await router?.close();
  rmSync(profile, { recursive: true, force: true });
});

describe("plan pages", () => {
  it("need an admin bearer key", async () => {
    const none = await fetch(`${base}/plans`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    const wrong = await fetch(`${base}/plans/${planId}`, { headers: { authorization: "Bearer not-admin" } });
    expect(wrong.status).toBe(403);
    const json = await fetch(`${base}/plans/${planId}.json`, { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(json.status).toBe(200);
    const body = (await json.json()) as { id: string; decisionId: number; forecasts: { lastHour: unknown }[] };
    expect(body.id).toBe(planId);
    expect(body.forecasts[0]!.lastHour).not.toBeNull();
    expect((await fetch(`${base}/plans/nope`, { headers: { authorization: `Bearer ${ADMIN}` } })).status).toBe(404);
  });

  it("render in Chromium with their SVG charts and no console errors", async () => {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${base}/plans`);
    await page.click(`a[href="/plans/${planId}"]`);
    await page.waitForURL(`${base}/plans/${planId}`);
    expect(await page.title()).toContain(planId);
    expect(await page.locator("svg.chart.forecast").count()).toBe(4);
    expect(await page.locator("svg.chart.forecast polyline").count()).toBe(8);
    expect(await page.locator("svg.chart.forecast polygon").count()).toBe(4);
    expect(await page.locator("svg.chart.bars").count()).toBe(3);
    const box = await page.locator("svg.chart.forecast").first().boundingBox();
    expect(box!.width).toBeGreaterThan(100);
    expect(await page.locator("h2", { hasText: "Solver" }).count()).toBe(1);
    expect(errors).toEqual([]);
    await page.close();
  });
});
