import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { mergeOverDefault, parseConfig } from "../../core/config.js";
import type { Logger } from "../../core/log.js";
import { silentLogger } from "../../core/log.js";
import { SAGESERVE_DELAYS } from "../actuator/sim.js";
import "../config-sections.js";
import type { RegionListing } from "../gateway/slo-book.js";
import { startSimFleet } from "./sim-region.js";

/** A logger that keeps its warnings. */
function recording(): { log: Logger; warnings: { msg: string; fields: Record<string, unknown> }[] } {
  const warnings: { msg: string; fields: Record<string, unknown> }[] = [];
  const log: Logger = { ...silentLogger, warn: (msg: string, fields?: Record<string, unknown>) => void warnings.push({ msg, fields: fields ?? {} }), child: () => log };
  return { log, warnings };
}

/**
 * One region, llama3.1-8b, flooded for `minutes` of virtual time with long prompts far past one instance: its SLO is
 * missed throughout. Returns the listing and the region's warnings.
 */
async function flooded(endpoint: Record<string, unknown>, controller: Record<string, unknown>, minutes: number, perS = 40): Promise<{ listing: RegionListing; warnings: { msg: string; fields: Record<string, unknown> }[] }> {
  const config = parseConfig(mergeOverDefault({
    models: [{ name: "llama3.1-8b", gpusPerInstance: { "h100-80gb": 2 } }],
    regions: [{ name: "a", utcOffsetH: 0, gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama3.1-8b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1, ...endpoint }] }],
    controller: { actuator: "sim", ...controller },
  }));
  const clock = new VirtualClock(0);
  const { log, warnings } = recording();
  // Free GPUs and a 5-s model load: a scale-out lands within a pass or five.
  const [region] = startSimFleet({ config, clock, log, delays: { ...SAGESERVE_DELAYS, vmProvisionMs: 0, redeployLocalMs: 5000 }, random: () => () => 0.5 });
  try {
    let n = 0;
    // `perS` requests a second of 4,000-token prompts, spread over ten sends a second: 40 is far past one instance's prefill.
    const send = () => {
      for (let k = 0; k < perS / 10; k++) region!.link.submit({ id: `r${n++}`, model: "llama3.1-8b", kind: "completion", promptTokens: 4000, maxTokens: 50, priority: 0, body: { prompt: "x" } }, { onFirstToken: () => undefined, onDone: () => undefined, onError: () => undefined });
    };
    const timer = clock.every(100, send);
    await clock.advanceTo(minutes * 60_000 + 1);
    timer.cancel();
    return { listing: region!.sim.runtime.service.listing() as RegionListing, warnings };
  } finally {
    await region!.sim.close();
  }
}

describe("say why (issue 46): an SLO missed while the endpoint does not scale out is logged once a minute and listed", () => {
  it("a strategy that holds: its decision, reason and utilization", async () => {
    // reactive-hpa at a target utilization no load reaches never scales out.
    const { listing, warnings } = await flooded({ maxInstances: 4 }, { strategy: "reactive-hpa", strategyParams: { targetUtilization: 2 } }, 4);
    const held = listing.holding?.find((h) => h.model === "llama3.1-8b");
    expect(held).toMatchObject({ gpu: "h100-80gb", strategy: "reactive-hpa", current: 1, blocked: "" });
    expect(held!.desired).toBeLessThanOrEqual(1);
    expect(held!.reason).toMatch(/^hpa-/);
    expect(held!.attainment).toBeLessThan(held!.percentile);
    expect(held!.atMs - held!.sinceMs).toBeGreaterThanOrEqual(60_000);
    // Once a minute, not once a pass.
    const said = warnings.filter((w) => w.msg === "SLO missed and not scaling out");
    expect(said.length).toBeGreaterThanOrEqual(2);
    expect(said.length).toBeLessThanOrEqual(4);
    expect(said[0]!.fields).toMatchObject({ model: "llama3.1-8b", strategy: "reactive-hpa", current: 1 });
  });

  it("a strategy that wants more and cannot have it: the block", async () => {
    const { listing } = await flooded({ maxInstances: 1 }, { strategy: "reactive-hpa", strategyParams: { targetUtilization: 0.5 } }, 3);
    const held = listing.holding?.find((h) => h.model === "llama3.1-8b");
    // The HPA clamps its answer to the maximum: it would have more.
    expect(held).toMatchObject({ current: 1, desired: 1, blocked: "at-max" });
  });

  it("an endpoint that has scaled out and meets its SLO again is no longer listed", async () => {
    const { listing, warnings } = await flooded({ maxInstances: 16 }, { strategy: "reactive-hpa", strategyParams: { targetUtilization: 0.5 } }, 5, 10);
    expect(listing.holding ?? [], JSON.stringify(listing.holding)).toEqual([]);
    // While memory utilization lagged the prefill queue the HPA held for a minute or two, and said so; not since.
    const said = warnings.filter((w) => w.msg === "SLO missed and not scaling out");
    expect(said.length).toBeLessThanOrEqual(3);
  });
});
