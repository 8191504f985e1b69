// Issue 31 end to end: `tidegate dev` (the compiled CLI, a real process) with controller.strategy "lt-hpa" under a
// ramp its planner can forecast. The demand history in dev's data directory says that on each of the last 7 days the
// current 10-minute window carried 28,000 tokens/s of llama3.2-3b and every other window 1,500 (one instance serves
// ≈ 11,000 at the SLO: planner/capacity.ts). Then, driven as a user would (the admin listing and `POST /plans/now`
// with the key dev prints, the OpenAI client, `/metrics`):
// 1. the start-up plan's floor for this window is 3 instances, and the endpoint has 3 serving before any request;
// 2. the ramp's load (scaled down for a 2-core box) is served, spread over the instances the floor started;
// 3. once dev's clock is in the next window, the start-up plan's next forecast step (1,500 tokens/s) is the floor: it
//    falls to the minimum and the HPA (3 s scale-down stabilization) scales in to 1; a plan made then agrees (target 1);
// 4. `/metrics` (tidegate_region_slo_*) and the listing's `slo` entry count every request of step 2 and their attainment.
// Forecast windows are aligned to the epoch (planner/plan.ts WINDOW_MS), so dev runs with its wall clock moved ahead
// (shifted-clock.ts) to start LEAD_MS before a window boundary (room for a slow start on a loaded box): the test takes
// about 2 minutes whatever the time of day.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { RegionListing } from "../../region/gateway/slo-book.js";
import type { PlanReport } from "../../planner/report.js";
import { WINDOW_MS } from "../../planner/plan.js";
import { REPO_ROOT, regionListing, spawnScript, stopAll, type DevProc } from "./procs.js";

const MODEL = "llama3.2-3b";
const REGION = "us-east";
const GPU = "h100-80gb";
const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** The ramp window's and every other window's interactive tokens/s in the seeded days. */
const RAMP_TOKENS_PER_S = 28_000;
const BASE_TOKENS_PER_S = 1_500;
/**
 * Instances the start-up plan's floor asks for in the ramp window: ⌈28,000 / 11,476⌉ (capacity at the SLO below for
 * the planner's default mix, 1155/211 tokens; the point forecast is the seeded value, its band has no width).
 */
const RAMP_INSTANCES = 3;
/** Dev's clock starts this long before a forecast-window boundary (its first plan is made well within it). */
const LEAD_MS = 110_000;
const SHIFTED_CLI = resolve(REPO_ROOT, "dist/test/e2e/shifted-clock.js");
/**
 * ≈ 280 tokens, different from its first block on for every request (`prompt(n)`): the ramp's clients are different
 * users. With one shared prompt the default prefix-aware routing rightly keeps an unsaturated crowd on the instance
 * that holds it (region/gateway/scoring/plugins.ts), and the spread checked below would not be the floor's doing.
 */
const prompt = (n: number): string => `request ${n}: ${"the tide comes in and the gate holds ".repeat(30)}`;
let sent = 0;

let dir: string;
let dev: DevProc;
let client: OpenAI;
/** Dev's clock minus the real one (shifted-clock.ts). */
let offsetMs: number;
/** The window boundary of dev's clock after which its plans forecast the low window (dev clock ms). */
let boundaryMs: number;
/** The start-up plan (made before the boundary). */
let firstPlan: PlanReport;
/** When the first request of the ramp's load was sent, and what the load did (dev clock ms). */
let loadStartedAtMs: number;
let served = 0;

const devNow = (): number => Date.now() + offsetMs;
const listing = async (): Promise<RegionListing> => (await regionListing(dev, REGION)) as RegionListing;
const serving = (l: RegionListing) => l.instances.filter((i) => i.model === MODEL && i.state === "serving");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const auth = () => ({ authorization: `Bearer ${dev.key}`, accept: "application/json" });

/** Polls `probe` every 200 ms until it returns a value; throws with dev's log tail after `timeoutMs`. */
async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms\n--- dev log (tail) ---\n${dev.log().slice(-4000)}`);
    await sleep(200);
  }
}

/**
 * Writes `<dataDir>/planner/history/` as planner/file-history.ts reads it: one hour file per UTC hour, the IW minutes
 * of (MODEL, REGION) in [fromMs, toMs) from `tokensPerS`, null elsewhere.
 */
function seedHistory(dataDir: string, fromMs: number, toMs: number, tokensPerS: (minuteMs: number) => number): void {
  const hdir = join(dataDir, "planner", "history");
  mkdirSync(hdir, { recursive: true });
  for (let hourMs = Math.floor(fromMs / 3_600_000) * 3_600_000; hourMs < toMs; hourMs += 3_600_000) {
    const minutes = Array.from({ length: 60 }, (_, m) => {
      const t = hourMs + m * MINUTE_MS;
      return t >= fromMs && t < toMs ? tokensPerS(t) : null;
    });
    const series = [{ kind: "iw", model: MODEL, region: REGION, tokensPerS: minutes }];
    writeFileSync(join(hdir, `${new Date(hourMs).toISOString().slice(0, 13)}.json`), JSON.stringify({ format: "tidegate-history-hour-1", hourMs, series }));
  }
}

/** The newest stored plan report (GET /plans, then its JSON). */
async function newestPlan(): Promise<PlanReport | undefined> {
  const list = (await (await fetch(`${dev.url}/plans`, { headers: auth() })).json()) as { data: { id: string }[] };
  const id = list.data[0]?.id;
  return id === undefined ? undefined : ((await (await fetch(`${dev.url}/plans/${id}.json`, { headers: auth() })).json()) as PlanReport);
}

const forecastOf = (r: PlanReport) => r.forecasts.find((f) => f.model === MODEL && f.region === REGION)!;
const targetOf = (r: PlanReport) => r.actions.find((a) => a.model === MODEL && a.region === REGION && a.gpu === GPU)!.target;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-slo-ramp-"));
  const dataDir = join(dir, "data");
  // Dev's clock: LEAD_MS before the next window boundary that leaves that much time.
  const realNow = Date.now();
  boundaryMs = Math.ceil((realNow + LEAD_MS) / WINDOW_MS) * WINDOW_MS;
  offsetMs = boundaryMs - LEAD_MS - realNow;
  const rampStartMs = boundaryMs - WINDOW_MS;
  const startMinuteMs = Math.floor((boundaryMs - LEAD_MS) / MINUTE_MS) * MINUTE_MS;
  // 7 days and the hour before them, up to the minute dev starts in: the ramp window's time of day is high every day.
  const sinceRamp = (t: number) => (((t - rampStartMs) % DAY_MS) + DAY_MS) % DAY_MS;
  seedHistory(dataDir, rampStartMs - 7 * DAY_MS - 3_600_000, startMinuteMs, (t) => (sinceRamp(t) < WINDOW_MS ? RAMP_TOKENS_PER_S : BASE_TOKENS_PER_S));
  const config = {
    models: [{ name: MODEL, gpusPerInstance: { [GPU]: 2 } }],
    regions: [{ name: REGION, gpus: [{ type: GPU, count: 16 }], endpoints: [{ model: MODEL, gpu: GPU, instances: 1, minInstances: 1, maxInstances: 4 }] }],
    controller: {
      strategy: "lt-hpa",
      reconcileIntervalMs: 250,
      // HPA evaluations every second on a 5 s window; a scale-in waits 3 s of lower recommendations (default 5 min).
      strategyParams: { syncPeriodMs: 1000, metricWindowMs: 5000, scaleDownStabilizationMs: 3000 },
    },
    engines: { timeScale: 1, kvCapacityTokens: 24_000 },
    parameters: { models: { [MODEL]: { bytes: 16 * 1024 * 1024 } } },
    // Targets with room for a loaded 2-core box; the planner sizes instances at them.
    slo: { ttftMs: 2000, tpotMs: 200, percentile: 0.9 },
    router: { port: 0 },
    queue: { dataDir },
  };
  const file = join(dir, "dev.json");
  writeFileSync(file, JSON.stringify(config));
  const proc = await spawnScript("dev", SHIFTED_CLI, [String(offsetMs), "dev", "--config", file, "--port", "0", "--log-level", "info"], /tidegate dev: serving (http:\/\/\S+)[\s\S]*admin key (tg-admin-\S+)[\s\S]*\nlog: (\S+) /, 60_000);
  const logFile = proc.match[3]!;
  dev = { proc, url: proc.match[1]!, key: proc.match[2]!, logFile, log: () => readFileSync(logFile, "utf8") };
  client = new OpenAI({ baseURL: `${dev.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe("tidegate dev with lt-hpa under a forecast ramp", () => {
  it("pre-scales to the forecast's floor: 3 instances serve before any request is sent", async () => {
    // The start-up round (dev plans once at start, before its regions report) saw the seeded history.
    firstPlan = await until("the start-up plan", 20_000, newestPlan);
    expect(firstPlan.madeAtMs).toBeLessThan(boundaryMs);
    const f = forecastOf(firstPlan);
    expect(f.forecastSteps[0]!.mean).toBeCloseTo(RAMP_TOKENS_PER_S, -2);
    expect(f.forecastSteps[1]!.mean).toBeCloseTo(BASE_TOKENS_PER_S, -2);
    expect(targetOf(firstPlan)).toBe(RAMP_INSTANCES);

    const l = await until(`${RAMP_INSTANCES} serving instances`, 60_000, async () => {
      const x = await listing();
      return serving(x).length >= RAMP_INSTANCES ? x : undefined;
    });
    // The floor started them, not the HPA (nothing has been sent: the region judged no request yet). The configured
    // instance is the initial deployment when the region's first pass ran before the plan arrived, else the floor's.
    const provisions = l.actions.filter((a) => a.model === MODEL && a.kind === "provision");
    expect(provisions).toHaveLength(RAMP_INSTANCES);
    const byFloor = provisions.filter((a) => a.reason !== "initial-deployment");
    expect(byFloor.length).toBeGreaterThanOrEqual(RAMP_INSTANCES - 1);
    expect(byFloor.map((a) => [a.reason, a.desired])).toEqual(byFloor.map(() => ["forecast-floor", RAMP_INSTANCES]));
    const slo = l.slo?.find((s) => s.model === MODEL);
    expect(slo).toMatchObject({ met: 0, missed: 0, unserved: 0 });
    expect(serving(l)).toHaveLength(RAMP_INSTANCES);
    console.log(`slo-ramp: ${RAMP_INSTANCES} serving ${((devNow() - firstPlan.madeAtMs) / 1000).toFixed(1)} s after the start-up plan, before any request`);
  }, 90_000);

  it("serves the ramp's load on the instances the floor started", async () => {
    loadStartedAtMs = devNow();
    const before = await listing();
    const ids = new Set(serving(before).map((i) => i.id));
    // 6 streaming clients for 12 s (a scaled-down ramp; each request ≈ 280 prompt + 40 output tokens).
    const until = Date.now() + 12_000;
    let failed = 0;
    const errors: string[] = [];
    let running = true;
    const load = Promise.all(
      Array.from({ length: 6 }, async () => {
        while (Date.now() < until) {
          try {
            const s = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: prompt(sent++) }], stream: true, max_tokens: 40 });
            let text = "";
            for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
            if (text.length === 0) throw new Error("an empty answer");
            served++;
          } catch (err) {
            failed++;
            errors.push(err instanceof Error ? err.message : String(err));
          }
        }
      }),
    ).finally(() => (running = false));
    // Which instances carry requests while the load runs.
    const busy = new Set<string>();
    while (running) {
      for (const i of serving(await listing())) if (Number(/(\d+) in flight/.exec(i.detail)?.[1] ?? 0) > 0) busy.add(i.id);
      await sleep(100);
    }
    await load;
    expect(errors.slice(0, 3)).toEqual([]);
    expect(failed).toBe(0);
    expect(served).toBeGreaterThan(20);
    // Requests spread over the pre-scaled instances: at least one besides the configured first instance took some.
    const seen = [...busy].filter((id) => ids.has(id));
    expect(seen.length).toBeGreaterThanOrEqual(2);
    console.log(`slo-ramp: ${served} requests served in 12 s; ${seen.length} of ${ids.size} pre-scaled instances seen busy`);
  }, 60_000);

  it("scales in once the forecast steps down to the base load at the window boundary, and a new plan agrees", async () => {
    // The start-up plan's next forecast step (the window after the boundary) is the base load: once dev's clock passes
    // the boundary its floor drops and the HPA scales in. Then ask for a plan (as an operator would: POST /plans/now).
    const waitMs = boundaryMs + 1000 - devNow();
    if (waitMs > 0) await sleep(waitMs);
    const res = await fetch(`${dev.url}/plans/now`, { method: "POST", headers: auth() });
    expect(res.status).toBe(200);
    const plan = (await res.json()) as PlanReport;
    expect(plan.madeAtMs).toBeGreaterThanOrEqual(boundaryMs);
    expect(plan.acks).toEqual([expect.objectContaining({ region: REGION, accepted: true })]);
    expect(forecastOf(plan).forecastSteps[0]!.mean).toBeCloseTo(BASE_TOKENS_PER_S, -2);
    expect(targetOf(plan)).toBe(1);

    const l = await until("the scale-in to 1 instance", 30_000, async () => {
      const x = await listing();
      const mine = x.instances.filter((i) => i.model === MODEL && (i.state === "serving" || i.state === "provisioning" || i.state === "loading"));
      return mine.length === 1 && serving(x).length === 1 ? x : undefined;
    });
    const drains = l.actions.filter((a) => a.model === MODEL && a.kind === "drain" && a.atMs >= boundaryMs);
    expect(drains).toHaveLength(RAMP_INSTANCES - 1);
    expect(drains.every((a) => a.reason !== "forecast-floor")).toBe(true);
    // Nothing drained before the boundary: the floor held the ramp's instances through the load.
    expect(l.actions.filter((a) => a.model === MODEL && a.kind === "drain" && a.atMs < boundaryMs)).toEqual([]);
    console.log(`slo-ramp: back to 1 instance ${((Math.max(...drains.map((a) => a.atMs)) - boundaryMs) / 1000).toFixed(1)} s after the forecast stepped down (${drains.map((a) => a.reason).join(", ")})`);
  }, 200_000);

  it("reports SLO attainment in /metrics and in the admin listing", async () => {
    const slo = (await listing()).slo?.find((s) => s.model === MODEL);
    expect(slo).toBeDefined();
    // Every request of the load was judged (none cancelled), and this dev process served no other.
    expect(slo!.met + slo!.missed + slo!.unserved).toBe(served);
    expect(slo!.met).toBeGreaterThan(0);
    expect(slo!.unserved).toBe(0);
    expect(slo).toMatchObject({ ttftMs: 2000, tpotMs: 200, percentile: 0.9, lastHourRequests: served, lastHourMet: slo!.met });
    expect(slo!.lastHourAttainment).toBeCloseTo(slo!.met / served, 9);

    const text = await (await fetch(`${dev.url}/metrics`)).text();
    const at = { region: REGION, model: MODEL };
    expect(sample(text, "tidegate_region_slo_requests_total", { ...at, outcome: "met" })).toBe(slo!.met);
    expect(sample(text, "tidegate_region_slo_requests_total", { ...at, outcome: "missed" })).toBe(slo!.missed);
    expect(sample(text, "tidegate_region_slo_requests_total", { ...at, outcome: "unserved" })).toBe(0);
    expect(sample(text, "tidegate_region_slo_attainment", at)).toBeCloseTo(slo!.lastHourAttainment!, 9);
    expect(sample(text, "tidegate_region_slo_target_seconds", { ...at, kind: "ttft" })).toBe(2);
    expect(sample(text, "tidegate_region_slo_target_seconds", { ...at, kind: "tpot" })).toBe(0.2);
    expect(sample(text, "tidegate_region_slo_violations", at)).toBe(slo!.violatedHours);
    console.log(`slo-ramp: ${slo!.met}/${served} requests met the SLO (attainment ${slo!.lastHourAttainment!.toFixed(3)}); load from ${new Date(loadStartedAtMs).toISOString()} on dev's clock`);
  });
});

/** The value of the Prometheus sample `name{labels…}` in an exposition (labels in any order, extra labels not allowed). */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)\{([^}]*)\} (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const got = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!]));
    if (Object.keys(got).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}
