/**
 * Batch work for a model at zero (issue 33; router/dispatch/cold-wake.ts), in virtual time: one simulated region
 * (the real runtime — controller with controller.scaleToZero, gateway with its cold hold, sim actuator loading over
 * the network) behind an in-process RegionLink, and the real Dispatcher on an embedded queue holding one batch for a
 * model with no instance. With the cold wake, nothing runs until waiting would miss the batch's deadline; then one
 * request goes to the region, is held there while an instance comes up, and the batch completes before its deadline;
 * the model drains back to zero after its idle window. Without it (the control), the batch waits for warm capacity
 * that never comes. With two regions, the wake goes to the one whose cold start is soonest among those the batch
 * may run in (its `allowedRegions`).
 */
import { afterEach, describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";
import { InProcessRegionLink } from "../../region/link/in-process-link.js";
import { startSimRegion, type SimRegion } from "../../region/runtime/sim-region.js";
import { Dispatcher } from "../../router/dispatch/dispatcher.js";
import { encodePayload } from "../../router/dispatch/lines.js";
import { DirFileStore } from "../../router/queue/dir-files.js";
import { EmbeddedQueueStore } from "../../router/queue/embedded.js";

const MODEL = "llama3.1-8b";
const REQUESTS = 20;
const DEADLINE_MS = 120_000;
const MARGIN_MS = 30_000;
const PER_REQUEST_MS = 100;
const IDLE_MS = 5000;
const NO_DELAYS = { spotMedianMs: 0, spotMaxMs: 0, spotSigma: 0, redeployLocalMs: 0, redeployRemoteMs: 0, vmProvisionMs: 0 };

let open: { regions: SimRegion[]; dispatcher: Dispatcher } | undefined;
afterEach(async () => {
  await open?.dispatcher.stop();
  for (const r of open?.regions ?? []) await r.close();
  open = undefined;
});

/**
 * The batch on one region "r" (network loading), or with `pair` on "near" (allcache: its cold start is expected
 * sooner) and "far" (network), the batch kept within `allowed` when given.
 */
async function run(wake: boolean, o: { pair?: boolean; allowed?: string[] } = {}) {
  const clock = new VirtualClock(0);
  const names = o.pair === true ? ["near", "far"] : ["r"];
  const configOf = (source: string) => parseConfig({
    ...(DEFAULT_CONFIG_JSON as Record<string, unknown>),
    models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
    regions: names.map((name) => ({ name, gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 0, minInstances: 0, maxInstances: 1 }] })),
    controller: { strategy: "reactive", actuator: "sim", reconcileIntervalMs: 1000, scaleToZero: { idleMs: IDLE_MS, holdMs: 60_000, maxHeld: 8, retryAfterS: 3 }, loading: { source } },
  });
  const regions = names.map((name) => startSimRegion({ config: configOf(name === "near" ? "allcache" : "network"), region: name, clock, delays: NO_DELAYS, weightsInRegion: [MODEL], random: () => 0.5 }));
  const region = regions[regions.length - 1]!;
  const links = regions.map((r) => new InProcessRegionLink(r.runtime.service, { clock, telemetryIntervalMs: 500 }));
  const store = new EmbeddedQueueStore(null);
  await store.createBatch({ id: "batch_cold", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: DEADLINE_MS, ...(o.allowed === undefined ? {} : { allowedRegions: o.allowed }) });
  await store.stage("batch_cold", Array.from({ length: REQUESTS }, (_, i) => ({ index: i, payload: encodePayload({ custom_id: `c${i}`, url: "/v1/completions", body: { model: MODEL, prompt: "x".repeat(400), max_tokens: 16 } }) })));
  await store.activate("batch_cold", MODEL, REQUESTS, 0);
  const dispatcher = new Dispatcher({
    store, files: new DirFileStore(null), clock, links, models: [MODEL],
    thresholds: { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5 }, promoteAfterMs: 36_000_000, leaseMs: 600_000,
    ...(wake ? { coldWake: { marginMs: MARGIN_MS, maxWaitMs: 0, perRequestMs: () => PER_REQUEST_MS } } : {}),
  });
  open = { regions, dispatcher };
  dispatcher.start();
  let doneAtMs: number | undefined;
  let firstSentAtMs: number | undefined;
  for (let t = 0; t <= DEADLINE_MS + 30_000; t += 500) {
    await clock.advanceTo(t, 100);
    if (firstSentAtMs === undefined && (dispatcher.sentByRegion.get(names[names.length - 1]!) ?? 0) > 0) firstSentAtMs = t;
    if (doneAtMs === undefined && ((await store.getBatch("batch_cold"))?.completed ?? 0) >= REQUESTS) doneAtMs = t;
  }
  return { region, regions, dispatcher, firstSentAtMs, doneAtMs, batch: await store.getBatch("batch_cold") };
}

describe("batch work for a model at zero (virtual time, sim region)", () => {
  it("waits while its deadline allows, then wakes the region through the cold hold; the batch completes in time and the model returns to zero", async () => {
    const r = await run(true);
    const starts = r.region.runtime.coldStarts;
    const expectedMs = starts[0]?.tookMs ?? Number.NaN;
    console.log(`first batch request sent at ${r.firstSentAtMs} ms, cold start ${starts.map((s) => `${s.source} ${Math.round(s.tookMs)} ms at ${Math.round(s.atMs)} ms`).join(", ")}, batch done at ${r.doneAtMs} ms (deadline ${DEADLINE_MS} ms)`);
    // Not before it had to: the wake is due once deadline − now < the expected cold start + 20 × 100 ms + 30 s; the
    // expected cold start is the actuator's figure, the one the cold start then took (no delays, network loading).
    expect(starts).toHaveLength(1);
    expect(r.firstSentAtMs).toBeDefined();
    expect(r.firstSentAtMs!).toBeGreaterThanOrEqual(DEADLINE_MS - MARGIN_MS - REQUESTS * PER_REQUEST_MS - expectedMs - 1000);
    expect(r.firstSentAtMs!).toBeLessThanOrEqual(DEADLINE_MS - MARGIN_MS - REQUESTS * PER_REQUEST_MS - expectedMs + 1500);
    expect(starts[0]!.atMs).toBeGreaterThan(r.firstSentAtMs! - 1);
    expect(Number.isFinite(expectedMs)).toBe(true);
    expect(r.doneAtMs).toBeDefined();
    expect(r.doneAtMs!).toBeLessThanOrEqual(DEADLINE_MS);
    expect(r.batch?.completed).toBe(REQUESTS);
    // Back at zero after its idle window.
    expect(r.region.runtime.actions.some((a) => a.model === MODEL && a.kind === "drain" && a.reason === "idle")).toBe(true);
    expect(r.region.gateway.instances().filter((i) => i.model === MODEL && i.state === "serving")).toHaveLength(0);
  }, 120_000);

  it("wakes the region with the soonest cold start among those the batch may run in (allowedRegions)", async () => {
    // The control: unrestricted, the wake goes to near, whose cold start (allcache, 500 ms) is expected sooner than far's (network, 640 ms).
    const free = await run(true, { pair: true });
    const [near, far] = free.regions;
    expect(near!.runtime.coldStarts).toHaveLength(1);
    expect(far!.runtime.coldStarts).toHaveLength(0);
    expect(free.batch?.completed).toBe(REQUESTS);
    await open?.dispatcher.stop();
    for (const r of open?.regions ?? []) await r.close();
    open = undefined;
    // Kept within far: the wake goes to far, the whole batch runs there, near never sees it.
    const kept = await run(true, { pair: true, allowed: ["far"] });
    const [near2, far2] = kept.regions;
    console.log(`kept within far: cold starts near ${near2!.runtime.coldStarts.length}, far ${far2!.runtime.coldStarts.map((s) => `${s.source} ${Math.round(s.tookMs)} ms`).join(", ")}; batch done at ${kept.doneAtMs} ms`);
    expect(near2!.runtime.coldStarts).toHaveLength(0);
    expect(far2!.runtime.coldStarts).toHaveLength(1);
    expect(kept.dispatcher.sentByRegion.get("near") ?? 0).toBe(0);
    expect(kept.dispatcher.sentByRegion.get("far")).toBe(REQUESTS);
    expect(kept.doneAtMs).toBeDefined();
    expect(kept.doneAtMs!).toBeLessThanOrEqual(DEADLINE_MS);
    expect(kept.batch?.completed).toBe(REQUESTS);
  }, 120_000);

  it("without the cold wake the batch waits for warm capacity that never comes (the control)", async () => {
    const r = await run(false);
    expect(r.firstSentAtMs).toBeUndefined();
    expect(r.region.runtime.coldStarts).toHaveLength(0);
    expect(r.batch?.completed).toBe(0);
  }, 120_000);
});
