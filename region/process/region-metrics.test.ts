import { afterEach, describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";
import { createRegistry } from "../../core/metrics.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { collect } from "../../test/helpers/streams.js";
import type { RegionListing } from "../gateway/slo-book.js";
import { buildRegion, type Region } from "../runtime/build-region.js";
import { fixedEngines } from "../runtime/static-host.js";
import { startSimRegion } from "../runtime/sim-region.js";
import { RegionMetrics } from "./region-metrics.js";
import "../config-sections.js";

const MODEL = "llama3.1-8b";
const HOUR_MS = 3_600_000;

let open: Pick<Region, "close"> | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});

/** The sample lines of `name` in an exposition text. */
function series(text: string, name: string): string[] {
  return text.split("\n").filter((l) => l.startsWith(`${name}{`));
}

describe("region metrics: SLO attainment", () => {
  it("exports judged requests by outcome, the last hour's attainment, the targets and the hours in violation; the listing shows them", async () => {
    const clock = new VirtualClock(0);
    const config = parseConfig({
      ...(DEFAULT_CONFIG_JSON as Record<string, unknown>),
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "r", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1 }] }],
      slo: { ttftMs: 150, tpotMs: 100, percentile: 0.9 },
    });
    const metrics = new RegionMetrics({ r: [MODEL] }, createRegistry(false));
    const region = buildRegion({ config, region: "r", clock, metrics: metrics.sink("r"), host: fixedEngines(async (s) => new FakeEngine({ instanceId: s.instanceId, model: s.model, clock, tokenDelayMs: 100 })) });
    open = region;
    await region.ready();
    const l = `region="r",model="${MODEL}"`;

    // From the first scrape: every outcome at 0, no attainment yet (NaN, not 0), the targets. prom-client spells NaN
    // "Nan"; Prometheus reads special values case-insensitively.
    let text = await metrics.registry.metrics();
    expect(series(text, "tidegate_region_slo_requests_total")).toEqual([`tidegate_region_slo_requests_total{${l},outcome="met"} 0`, `tidegate_region_slo_requests_total{${l},outcome="missed"} 0`, `tidegate_region_slo_requests_total{${l},outcome="unserved"} 0`]);
    expect(series(text, "tidegate_region_slo_attainment")).toEqual([`tidegate_region_slo_attainment{${l}} Nan`]);
    expect(series(text, "tidegate_region_slo_target_seconds")).toEqual([`tidegate_region_slo_target_seconds{${l},kind="ttft"} 0.15`, `tidegate_region_slo_target_seconds{${l},kind="tpot"} 0.1`]);
    expect(series(text, "tidegate_region_slo_violations")).toEqual([`tidegate_region_slo_violations{${l}} 0`]);

    // Tokens at 100, 200 and 300 ms: TTFT 100, TPOT 100 → met. Then nothing serving → unserved.
    const req = { id: "a", model: MODEL, kind: "chat" as const, promptTokens: 10, maxTokens: 3, priority: 0 as const, body: {} };
    const p = collect(region.gateway.generate(req));
    await clock.advanceBy(1000);
    await p;
    const id = region.gateway.instances()[0]!.instanceId;
    region.gateway.setInstanceState(id, "draining");
    expect(region.gateway.submit({ ...req, id: "b" }, {})).toBeUndefined();
    text = await metrics.registry.metrics();
    expect(series(text, "tidegate_region_slo_requests_total")).toEqual([`tidegate_region_slo_requests_total{${l},outcome="met"} 1`, `tidegate_region_slo_requests_total{${l},outcome="missed"} 0`, `tidegate_region_slo_requests_total{${l},outcome="unserved"} 1`]);
    expect(series(text, "tidegate_region_slo_attainment")).toEqual([`tidegate_region_slo_attainment{${l}} 0.5`]);
    const listing = region.runtime.service.listing() as RegionListing;
    expect(listing.slo).toEqual([{ model: MODEL, ttftMs: 150, tpotMs: 100, percentile: 0.9, met: 1, missed: 0, unserved: 1, lastHourRequests: 2, lastHourMet: 1, lastHourAttainment: 0.5, judgedHours: 0, violatedHours: 0 }]);

    // The first clock hour ends at 0.5 < 0.9: one hour in violation; its requests have left the rolling hour.
    await clock.advanceTo(HOUR_MS);
    text = await metrics.registry.metrics();
    expect(series(text, "tidegate_region_slo_violations")).toEqual([`tidegate_region_slo_violations{${l}} 1`]);
    expect(series(text, "tidegate_region_slo_attainment")).toEqual([`tidegate_region_slo_attainment{${l}} Nan`]);
    expect((region.runtime.service.listing() as RegionListing).slo?.[0]).toMatchObject({ lastHourRequests: 0, lastHourAttainment: null, judgedHours: 1, violatedHours: 1 });
  });
});

describe("region metrics: scale from zero", () => {
  it("counts a cold start by its source, the held request's TTFT and a refused hold; the gauge of held requests follows telemetry", async () => {
    const clock = new VirtualClock(0);
    const config = parseConfig({
      ...(DEFAULT_CONFIG_JSON as Record<string, unknown>),
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "r", gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 0, minInstances: 0, maxInstances: 1 }] }],
      controller: { strategy: "reactive", actuator: "sim", reconcileIntervalMs: 1000, scaleToZero: { idleMs: 5000, holdMs: 30_000, maxHeld: 1, retryAfterS: 3 }, loading: { source: "network" } },
    });
    const metrics = new RegionMetrics({ r: [MODEL] }, createRegistry(false));
    const sink = metrics.sink("r");
    const zero = { spotMedianMs: 0, spotMaxMs: 0, spotSigma: 0, redeployLocalMs: 0, redeployRemoteMs: 0, vmProvisionMs: 0 };
    const region = startSimRegion({ config, region: "r", clock, metrics: sink, delays: zero, weightsInRegion: [MODEL], random: () => 0.5 });
    open = region;
    const l = `region="r",model="${MODEL}"`;
    let text = await metrics.registry.metrics();
    expect(series(text, "tidegate_region_cold_starts_total")).toEqual(["host", "peer", "origin"].map((s) => `tidegate_region_cold_starts_total{${l},source="${s}"} 0`));
    expect(series(text, "tidegate_region_cold_start_ttft_seconds_count")).toEqual([`tidegate_region_cold_start_ttft_seconds_count{${l}} 0`]);

    const req = { id: "a", model: MODEL, kind: "chat" as const, promptTokens: 10, maxTokens: 3, priority: 0 as const, body: {} };
    const served = collect(region.gateway.generate(req));
    // A second request beyond maxHeld (1) is refused at once.
    const refused = await collect(region.gateway.generate({ ...req, id: "b" })).catch((e: unknown) => e);
    expect(String(refused)).toMatch(/maxHeld/);
    await clock.advanceBy(1);
    sink.observe(region.runtime.service.snapshot(), undefined);
    expect(series(await metrics.registry.metrics(), "tidegate_region_cold_held")).toEqual([`tidegate_region_cold_held{${l}} 1`]);
    await clock.advanceBy(10_000);
    expect((await served).at(-1)?.type).toBe("done");
    text = await metrics.registry.metrics();
    expect(series(text, "tidegate_region_cold_starts_total")).toEqual([`tidegate_region_cold_starts_total{${l},source="host"} 0`, `tidegate_region_cold_starts_total{${l},source="peer"} 1`, `tidegate_region_cold_starts_total{${l},source="origin"} 0`]);
    expect(series(text, "tidegate_region_cold_start_ttft_seconds_count")).toEqual([`tidegate_region_cold_start_ttft_seconds_count{${l}} 1`]);
    expect(series(text, "tidegate_region_cold_refused_total")).toEqual([
      `tidegate_region_cold_refused_total{${l},reason="full"} 1`,
      ...["timeout", "no_capacity", "not_placed", "cold_start_failed"].map((reason) => `tidegate_region_cold_refused_total{${l},reason="${reason}"} 0`),
    ]);
    const listing = region.runtime.service.listing() as RegionListing;
    expect(listing.cold?.starts.map((c) => c.source)).toEqual(["peer"]);
  });
});

describe("region metrics: batch fill and preemptions (issue 37)", () => {
  it("exports the preemptible share of KV and counts what the engines' preemption total grew by, once", async () => {
    const metrics = new RegionMetrics({ r: [MODEL] }, createRegistry(false));
    const sink = metrics.sink("r");
    const counts = { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 };
    const report = (preemptionsTotal: number | undefined, preemptible: number) =>
      sink.observe({ region: "r", seq: 1, atMs: 0, models: [{ model: MODEL, effectiveMemoryUtilization: 0.8, preemptibleMemoryUtilization: preemptible, ...(preemptionsTotal === undefined ? {} : { preemptionsTotal }), tokensPerS: 0, running: 0, waiting: 0, instances: counts, endpoints: [] }] }, undefined);
    const l = `region="r",model="${MODEL}"`;
    expect(series(await metrics.registry.metrics(), "tidegate_region_preemptions_total")).toEqual([`tidegate_region_preemptions_total{${l}} 0`]);
    report(3, 0.6);
    report(3, 0.5);
    report(5, 0.5);
    report(1, 0.5); // an engine restarted: nothing counted twice
    report(2, 0.4);
    const text = await metrics.registry.metrics();
    expect(series(text, "tidegate_region_preemptions_total")).toEqual([`tidegate_region_preemptions_total{${l}} 6`]);
    expect(series(text, "tidegate_region_preemptible_memory_utilization")).toEqual([`tidegate_region_preemptible_memory_utilization{${l}} 0.4`]);
  });
});

describe("region metrics: prefix caching (issue 34)", () => {
  it("exports each instance's prefix-cache queries and hits as its engine counts them", async () => {
    const { SimEngine } = await import("../../engines/sim/sim-engine.js");
    const clock = new VirtualClock(0);
    const config = parseConfig({
      ...(DEFAULT_CONFIG_JSON as Record<string, unknown>),
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "r", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 2 }] }],
      routing: { policy: "prefix-aware" },
    });
    const metrics = new RegionMetrics({ r: [MODEL] }, createRegistry(false));
    const region = buildRegion({ config, region: "r", clock, metrics: metrics.sink("r"), host: fixedEngines(async (s) => new SimEngine({ instanceId: s.instanceId, model: s.model, gpu: "h100-80gb", tp: 2, clock, events: "coalesced" })) });
    open = region;
    await region.ready();
    const body = { model: MODEL, messages: [{ role: "user", content: "p".repeat(4000) }] };
    const send = async (id: string) => {
      const done = new Promise<void>((resolve) => region.gateway.submit({ id, model: MODEL, kind: "chat", promptTokens: 1006, maxTokens: 2, priority: 0, body }, { onDone: () => resolve() }));
      for (let i = 0; i < 50; i++) await clock.advanceBy(100);
      await done;
    };
    await send("a");
    await send("b");
    const text = await metrics.registry.metrics();
    const queries = series(text, "tidegate_instance_prefix_cache_queries_tokens_total");
    const hits = series(text, "tidegate_instance_prefix_cache_hits_tokens_total");
    expect(queries).toHaveLength(2);
    // Both requests went to the same instance (the second to the one holding its prefix): 2 × 1006 queried there,
    // and the second found its 62 full 16-token blocks (the template adds characters: ⌊4040 / 64⌋ = 63, capped at 62).
    const value = (lines: string[]) => lines.map((l) => Number(l.split(" ").at(-1))).sort((a, b) => a - b);
    expect(value(queries)).toEqual([0, 2012]);
    expect(value(hits)).toEqual([0, 62 * 16]);
  });
});
