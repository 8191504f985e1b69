/**
 * The plans site in a real headless Chromium (Debian's /usr/bin/chromium), served by the global router
 * (router/server.ts GlobalRouter, with the site mounted as `tidegate dev` mounts it): sign in through the login
 * form, read the index, follow a plan whose hour has passed, walk to the newest (advisory) plan and approve it,
 * then "Plan now" within the same hour: its last-hour error is "not yet" (never 0). Every chart must have labelled
 * time and value axes (the forecast error's in percent); the forecast band and the actual load must be drawn; the
 * changes table must list every endpoint; the cost line must carry its unit; every term links to the page's glossary
 * with its meaning as a tooltip; no console errors. Then the site is restarted on the same plan directory
 * (planner/file-store.ts): the same plans are served, and new ones continue their ids. Last, a plan made by the
 * planner's own round (planRound over the default config, with region telemetry in its SLO window) shows each
 * model's SLO, its capacity per instance at the SLO with the correction factor, and last hour's attainment ("no
 * requests" where none ended). Every step waits on what the page shows (URLs, elements), not on time. A screenshot
 * of each page is written to out/test/plan-pages/.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { VirtualClock, WallClock } from "../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { silentLogger } from "../core/log.js";
import { FakeRegionLink } from "../test/helpers/fake-link.js";
import { GlobalRouter } from "../router/server.js";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { ADMIN_KEY, sampleSite, type SampleSite } from "../test/helpers/plans.js";
import { REPO_ROOT } from "../test/e2e/procs.js";
import type { ModelTelemetry, RegionTelemetry } from "../core/ports.js";
import { HighsSolver } from "../core/solver.js";
import { createForecaster } from "../forecasts/registry.js";
import { samplePlanInputs } from "../test/helpers/plans.js";
import { fleetFromConfig } from "./fleet.js";
import { planRound } from "./service.js";
import { SloWindow } from "./slo-window.js";

const CHROMIUM = "/usr/bin/chromium";
const SHOTS = join(REPO_ROOT, "out", "test", "plan-pages");

// Generous ceilings for a loaded machine: every wait ends as soon as its condition holds.
const STEP_MS = 60_000;
const TEST_MS = 240_000;

let s: SampleSite;
let router: GlobalRouter;
let base: string;
let context: BrowserContext;
const profile = mkdtempSync(join(tmpdir(), "tidegate-chromium-"));
const plansDir = mkdtempSync(join(tmpdir(), "tidegate-plan-page-store-"));

/** Serves `site` through a global router on a free port; returns its base URL. */
async function serve(site: SampleSite): Promise<string> {
  const config = parseConfig(DEFAULT_CONFIG_JSON);
  router = new GlobalRouter({ config, links: config.regions.map((r) => new FakeRegionLink(r.name)), clock: new WallClock(), logger: silentLogger, defaultMetrics: false, mounts: [{ path: "/", app: site.site.app }] });
  const addr: AddressInfo = await router.listen("127.0.0.1", 0);
  return `http://127.0.0.1:${addr.port}`;
}

beforeAll(async () => {
  s = await sampleSite({ dir: plansDir });
  base = await serve(s);
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
  mkdirSync(SHOTS, { recursive: true });
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1320, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

afterAll(async () => {
  await context?.close();
  await router?.close();
  await s?.close();
  rmSync(profile, { recursive: true, force: true });
  rmSync(plansDir, { recursive: true, force: true });
});

/** Signs in through the login form (a browser cannot send a header) and waits for the index. */
async function signIn(page: Page): Promise<void> {
  await page.goto(`${base}/plans`);
  await page.waitForURL(/\/login\?next=/, { timeout: STEP_MS });
  await page.fill('input[name="key"]', ADMIN_KEY);
  await page.fill('input[name="name"]', "Ana");
  await page.click('button[type="submit"]');
  await page.waitForURL(`${base}/plans`, { timeout: STEP_MS });
}

/** The page has a glossary holding `labels`, and every term on it links to an entry there and carries a tooltip. */
async function expectGlossary(page: Page, labels: readonly string[]): Promise<void> {
  await page.locator("section.glossary dl").waitFor({ timeout: STEP_MS });
  const entries = await page.locator("section.glossary dt").allTextContents();
  expect(entries).toEqual(expect.arrayContaining([...labels]));
  const terms = page.locator("a.term");
  const n = await terms.count();
  expect(n).toBeGreaterThan(0);
  for (let i = 0; i < n; i++) {
    const [href, title] = [await terms.nth(i).getAttribute("href"), await terms.nth(i).getAttribute("title")];
    expect(title?.length ?? 0, `term ${href} has a tooltip`).toBeGreaterThan(20);
    expect(await page.locator(`section.glossary dt${href!}`).count(), `term ${href} has a glossary entry`).toBe(1);
  }
}

/** Every svg.chart on the page has ≥ 2 labelled ticks on a time axis and on a value axis, and both axis titles. */
async function expectLabelledAxes(page: Page): Promise<number> {
  const charts = page.locator("svg.chart");
  const n = await charts.count();
  expect(n).toBeGreaterThan(0);
  for (let i = 0; i < n; i++) {
    const c = charts.nth(i);
    for (const axis of ["x", "y"]) {
      const ticks = await c.locator(`g.axis.${axis} text.tick`).allTextContents();
      expect(ticks.length, `chart ${i} ${axis} ticks`).toBeGreaterThanOrEqual(2);
      expect(ticks.every((t) => t.trim() !== "")).toBe(true);
      expect((await c.locator(`g.axis.${axis} text.axis-title`).first().textContent())!.trim()).not.toBe("");
    }
    expect(await c.locator("g.axis.x text.axis-title").first().textContent()).toMatch(/time \(UTC\)|hours since trace start/);
  }
  return n;
}

describe("plans site in Chromium", () => {
  it("signs in, reads the index, follows a plan, approves the newest, plans now: not yet", async () => {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    page.on("pageerror", (e) => errors.push(e.message));

    // Sign in through the form (no header: a browser cannot send one).
    await page.goto(`${base}/plans`);
    await page.waitForURL(/\/login\?next=/, { timeout: STEP_MS });
    await page.screenshot({ path: join(SHOTS, "1-login.png"), fullPage: true });
    await page.fill('input[name="key"]', ADMIN_KEY);
    await page.fill('input[name="name"]', "Ana");
    await page.click('button[type="submit"]');
    await page.waitForURL(`${base}/plans`, { timeout: STEP_MS });
    expect(await page.locator("header .who").textContent()).toContain("Ana (admin key");

    // The index: a timeline with one row per hour, charts with axes, filters.
    expect(await page.locator("table.hours tr").count()).toBe(1 + s.reports.length);
    expect(await page.locator("table.hours th").allTextContents()).toEqual(expect.arrayContaining(["cost (USD/hour)", "unmet (tokens/s)", "us-east instances", "us-west instances"]));
    await expectLabelledAxes(page);
    // The forecast error is a percentage on a percent axis.
    const errTicks = await page.locator("svg.chart", { hasText: "forecast error" }).locator("g.axis.y text.tick").allTextContents();
    expect(errTicks.length).toBeGreaterThanOrEqual(2);
    expect(errTicks.every((x) => /^[\d.]+k?%$/.test(x))).toBe(true);
    await expectGlossary(page, ["last hour's forecast error", "unmet", "advisory"]);
    await page.screenshot({ path: join(SHOTS, "2-index.png"), fullPage: true });
    await page.click('.filters a[href="/plans?model=llama2-70b"]');
    await page.waitForURL(`${base}/plans?model=llama2-70b`);
    expect(await page.locator(".filters a.on").allTextContents()).toContain("llama2-70b");

    // The oldest plan: its hour has passed, so the actual load is overlaid.
    const oldest = s.reports[0]!;
    await page.click(`table.hours a[href="/plans/${oldest.id}"]`);
    await page.waitForURL(`${base}/plans/${oldest.id}`);
    expect(await page.title()).toContain(oldest.id);
    const n = await expectLabelledAxes(page);
    expect(n).toBe(oldest.forecasts.length);
    expect(await page.locator("svg.chart.forecast polygon.band").count()).toBe(2 * n); // both panels
    expect(await page.locator("svg.chart.forecast polyline.actual").count()).toBe(2 * n);
    expect(await page.locator("svg.chart.forecast polyline.forecast").count()).toBe(2 * n);
    expect(await page.locator("table.changes tr").count()).toBe(1 + oldest.actions.length);
    for (const a of oldest.actions) expect(await page.locator("table.changes tr", { hasText: a.model }).filter({ hasText: a.region }).count()).toBe(1);
    expect(await page.locator("table.changes td", { hasText: "—" }).count()).toBe(oldest.actions.length); // expected scale-out, not yet reported
    expect(await page.locator("p.cost").textContent()).toMatch(/Cost for this hour: [\d.]+ USD = holding [\d.]+ USD/);
    expect(await page.locator("p.objective").textContent()).toContain("objective");
    // Each (model, region) row shows the default forecaster's components — the blend's predictors and ARIMA — with
    // the weight each had in the forecast and its own recent error, as the report holds them.
    expect(await page.locator("table.forecasts td.components").count()).toBe(oldest.forecasts.length);
    for (const f of oldest.forecasts) {
      const parts = f.components ?? [];
      expect(parts.map((c) => c.name)).toContain("arima");
      expect(parts.reduce((sum, c) => sum + c.weight, 0)).toBeCloseTo(1, 9);
      const row = page.locator("table.forecasts tr", { hasText: `${f.model} @ ${f.region}` });
      for (const c of parts) {
        const shown = row.locator(`span.component[data-component="${c.name}"]`);
        expect(await shown.locator(".weight").textContent()).toBe(c.weight.toFixed(2));
        expect(await shown.locator(".recent-error").textContent()).toBe(c.recentMapePct === null ? "—" : `${c.recentMapePct.toFixed(1)}%`);
      }
    }
    // ARIMA was fitted (its recent error is a figure) on every series of this 8-day history.
    expect(oldest.forecasts.every((f) => typeof f.components?.find((c) => c.name === "arima")?.recentMapePct === "number")).toBe(true);
    await expectGlossary(page, ["components: weight · recent error", "blend-arima"]);
    await page.screenshot({ path: join(SHOTS, "3-plan-passed-hour.png"), fullPage: true });

    // Later hours up to the newest, which is advisory and awaiting review.
    await page.click('a[rel="next"]');
    await page.click('a[rel="next"]');
    const newest = s.reports.at(-1)!;
    await page.waitForURL(`${base}/plans/${newest.id}`);
    expect(await page.locator(".pill.pending").count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, "4-plan-advisory.png"), fullPage: true });
    await page.click("button.approve");
    await page.waitForURL(`${base}/plans/${newest.id}?done=approved`);
    expect(await page.locator(".notice").textContent()).toContain("Approved");
    expect(await page.locator(".pill.approved").textContent()).toMatch(/approved by Ana \(admin key [0-9a-f]{8}\)/);
    expect(s.links.every((l) => l.sent.length === 1 && l.sent[0]!.decisionId === newest.decisionId)).toBe(true);
    // The plan page explains its terms: α, β, NIW buffer, the strategy, the forecast method, F.
    await expectGlossary(page, ["α (alpha)", "β (beta)", "NIW buffer", "lt-ua", "blend-arima", "F: planned for", "last hour's forecast error"]);
    expect(await page.locator('a.term[href="#g-strategy-lt-ua"]').first().textContent()).toBe("lt-ua");
    await page.screenshot({ path: join(SHOTS, "5-plan-approved.png"), fullPage: true });

    // Plan now, in the hour the newest plan covers: that hour is still running, so its error is "not yet", not 0.
    await page.goto(`${base}/plans`);
    await page.click("form.plan-now button");
    await page.waitForURL(/\/plans\/plan-\d+-[A-Za-z0-9_-]+\?done=planned$/, { timeout: STEP_MS });
    const made = (await s.store.list())[0]!;
    expect(made.decisionId).toBeGreaterThan(newest.decisionId);
    expect(made.forecasts.length).toBeGreaterThan(0);
    expect(made.forecasts.every((f) => f.lastHour === null && f.lastHourNote?.state === "not-yet")).toBe(true);
    expect(await page.locator("p.last-hour").textContent()).toMatch(/Last hour's forecast error: not yet — .*is still running: its error is computed once it ends at/);
    expect(await page.locator("table.forecasts td.pending").allTextContents()).toEqual(made.forecasts.map(() => "not yet"));
    // (The components' recent errors are other percentages: only the last-hour cells are read here.)
    expect((await page.locator("table.forecasts td:not(.components)").allTextContents()).join(" ")).not.toMatch(/[+-]?0\.0%/);
    await expectGlossary(page, ["last hour's forecast error"]);
    await page.screenshot({ path: join(SHOTS, "6-plan-now-not-yet.png"), fullPage: true });
    await page.goto(`${base}/plans`);
    await page.locator(`table.hours tr`, { hasText: "on request" }).first().waitFor({ timeout: STEP_MS });
    expect(await page.locator("table.hours tr", { has: page.locator(`a[href="/plans/${made.id}"]`) }).locator("span.not-yet").textContent()).toBe("not yet");

    expect(errors).toEqual([]);
    await page.close();
  }, TEST_MS);

  it("a restart on the same plan directory serves the same plans, and new plans continue their ids", async () => {
    const before = await s.store.list();
    expect(before.length).toBe(s.reports.length + 1); // the sample plans and the one planned now
    await router.close();
    await s.close();
    s = await sampleSite({ dir: plansDir }); // a new process: a new store, lock and loop over the same directory
    base = await serve(s);
    expect(await s.store.list()).toEqual(before);

    const page = await context.newPage();
    await signIn(page);
    expect(await page.locator("table.hours tr").count()).toBe(1 + before.length);
    const listed = await page.locator("table.hours td:first-child a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    expect(listed).toEqual(before.map((r) => `/plans/${r.id}`));
    await page.screenshot({ path: join(SHOTS, "7-after-restart-index.png"), fullPage: true });
    const approved = before.find((r) => r.review?.state === "approved")!;
    await page.goto(`${base}/plans/${approved.id}`);
    expect(await page.locator(".pill.approved").textContent()).toMatch(/approved by Ana \(admin key [0-9a-f]{8}\)/);

    await page.goto(`${base}/plans`);
    await page.click("form.plan-now button");
    await page.waitForURL(/\?done=planned$/, { timeout: STEP_MS });
    const after = await s.store.list();
    expect(after.slice(1)).toEqual(before);
    expect(after[0]!.decisionId).toBeGreaterThan(before[0]!.decisionId);
    expect(after[0]!.id.startsWith(`plan-${after[0]!.decisionId}-`)).toBe(true);
    await page.close();
  }, TEST_MS);

  it("a plan made by the planner's round shows the SLO, the capacity per instance with its correction, and last hour's attainment", async () => {
    const config = parseConfig(DEFAULT_CONFIG_JSON);
    const { history, nowMs } = await samplePlanInputs();
    const stored = await s.store.list();
    const served = (model: string, tokensPerS: number, requests: number, met: number): ModelTelemetry => ({
      model, effectiveMemoryUtilization: 0.5, tokensPerS, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 2, draining: 0, spot: 0 },
      endpoints: [{ endpointId: `${model}/h100-80gb`, gpu: "h100-80gb", effectiveMemoryUtilization: 0.5, servingInstances: 2 }],
      slo: { requests, met, finished: requests, promptTokens: 1155 * requests, outputTokens: 211 * requests },
    });
    const predicted = (model: string) => fleetFromConfig(config).models[model]!["h100-80gb"]!.tokensPerS;
    // llama2-70b missed its p95 (270 of 300) at 0.6 × the predicted load per instance: its factor moves to 0.8.
    const t: RegionTelemetry = { region: "us-east", seq: 1, atMs: nowMs, models: [served("llama2-70b", 2 * 0.6 * predicted("llama2-70b"), 300, 270), served("llama3.1-8b", 1000, 100, 100)] };
    const window = new SloWindow();
    // The region's report an hour earlier (its baseline), then this one.
    window.observe({ ...t, seq: 0, atMs: nowMs - 3_600_000, models: [served("llama2-70b", 0, 0, 0), served("llama3.1-8b", 0, 0, 0)] });
    window.observe(t);
    const forecaster = createForecaster({ name: "seasonal-naive" });
    let made;
    try {
      const plan = planRound({ config, clock: new VirtualClock(nowMs), telemetry: new Map([["us-east", t]]), history, forecaster, solver: await HighsSolver.create(), intervalMs: 3_600_000, advisory: true, sloWindow: window });
      made = await plan(stored[0]!.decisionId + 1, stored[0]);
    } finally {
      await forecaster.close();
    }
    await s.store.put(made);
    const big = made.slo!.find((x) => x.model === "llama2-70b")!;
    expect(big.correction).toMatchObject({ rule: "down", previous: 1 });
    expect(big.correction.factor).toBeCloseTo(0.8, 6);

    const page = await context.newPage();
    // The browser may still hold the previous test's session (the same site); otherwise the login form leads back here.
    await page.goto(`${base}/plans/${made.id}`);
    if (/\/login\?next=/.test(page.url())) {
      await page.fill('input[name="key"]', ADMIN_KEY);
      await page.fill('input[name="name"]', "Ana");
      await page.click('button[type="submit"]');
      await page.waitForURL(`${base}/plans/${made.id}`, { timeout: STEP_MS });
    }
    await page.locator("table.slo").waitFor({ timeout: STEP_MS });
    // One row per model: its SLO, last hour's requests / met / attainment against the target, the factor.
    expect(await page.locator("table.slo tr").count()).toBe(1 + config.models.length);
    const row = (await page.locator("table.slo tr", { hasText: "llama2-70b" }).locator("td").allTextContents()).map((x) => x.trim());
    expect(row.slice(0, 7)).toEqual(["llama2-70b", "p95 TTFT ≤ 1000 ms, TPOT ≤ 100 ms", "300", "270", "90.0%", "missed (target 95.0%)", "×0.80↓"]);
    expect(row[7]).toMatch(/^from ×1\.00: 90\.0% met \(target 95\.0%\) at [\d,]+ tokens\/s per instance, below the [\d,]+ planned: halfway toward 0\.60$/);
    expect(await page.locator("table.slo tr", { hasText: "llama3.1-8b" }).locator("td.met").textContent()).toBe("met (target 95.0%)");
    expect(await page.locator("table.slo tr", { hasText: "bloom-176b" }).locator("td.none").textContent()).toBe("no requests");
    // Capacity per instance for every (model, GPU type): planned = predicted × the factor, with how it was derived.
    const gpuEntries = config.models.reduce((n, m) => n + Object.keys(m.gpusPerInstance).length, 0);
    expect(await page.locator("table.capacity tr").count()).toBe(1 + gpuEntries);
    const cap = big.capacity.find((c) => c.gpu === "h100-80gb")!;
    expect(cap.tokensPerS).toBeCloseTo(0.8 * cap.predictedTokensPerS, 6);
    const capRow = (await page.locator("table.capacity tr", { hasText: "llama2-70b" }).filter({ hasText: "h100-80gb" }).locator("td").allTextContents()).map((x) => x.trim());
    const int = (n: number) => Math.round(n).toLocaleString("en-US");
    expect(capRow.slice(0, 8)).toEqual(["llama2-70b", "4 × h100-80gb", int(cap.tokensPerS), int(cap.predictedTokensPerS), "×0.80", cap.requestsPerS!.toFixed(2), String(cap.batch), "1,155 / 211 (reported)"]);
    expect(capRow[8]).toMatch(/^p95 TTFT ≤ 1000 ms, TPOT ≤ 100 ms for 1155\/211-token requests: batch \d+ \(bound by .*M\/M\/\d+ .* req\/s$/);
    await expectGlossary(page, ["SLO", "capacity per instance", "correction factor", "attainment"]);
    await page.screenshot({ path: join(SHOTS, "8-plan-slo.png"), fullPage: true });
    await page.close();
  }, TEST_MS);
});
