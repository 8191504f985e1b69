// The region runtime in one process: real NodeAgents (native stores, loopback TCP transfers) with simulated
// engines, the controller pacing targets through the TargetsStore, the agents actuator and the parameter pool.
import { afterEach, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import { parseConfig, type TidegateConfig } from "../../core/config.js";
import { TidegateError } from "../../core/errors.js";
import { createLogger, type Logger } from "../../core/log.js";
import type { RegionTargets } from "../../core/ports.js";
import type { SimEngine } from "../../engines/sim/sim-engine.js";
import { startInProcessRegion, type InProcessRegion } from "./in-process-region.js";
import { bootstrapSurplus } from "./runtime.js";

const MiB = 1 << 20;
const MODEL = "llama3.2-3b";

function config(over: { slotsTotal?: number; origin?: "pattern" | "none"; instances?: number; maxInstances?: number; loading?: unknown } = {}): TidegateConfig {
  return parseConfig({
    models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
    regions: [{ name: "r", gpus: [{ type: "h100-80gb", count: over.slotsTotal ?? 6 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: over.instances ?? 1, minInstances: 1, maxInstances: over.maxInstances ?? 3 }] }],
    controller: { strategy: "lt-i", reconcileIntervalMs: 100, retryInitialMs: 200, retryMaxMs: 400, agentLostAfterMs: 1500, ...(over.loading === undefined ? {} : { loading: over.loading }) },
    engines: { timeScale: 0.01, startTimeoutMs: 3000 },
    parameters: { blockCount: 16, models: { [MODEL]: { bytes: 8 * MiB, origin: over.origin ?? "pattern", seed: 9 } } },
  });
}

/** A logger that keeps every line (so tests can check what an operator would read). */
function recordingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger("info", {}, (l) => lines.push(l)), lines };
}

const plan = (decisionId: number, instances: number): RegionTargets => ({ decisionId, region: "r", madeAtMs: Date.now(), advisory: false, endpoints: [{ model: MODEL, gpu: "h100-80gb", instances, forecastTokensPerS: 100 }] });

async function until<T>(what: string, fn: () => T | undefined | false, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

let region: InProcessRegion | undefined;
afterEach(async () => {
  await region?.close();
  region = undefined;
});

describe("in-process region runtime (agents actuator)", () => {
  it("nodes that announce two NVLink domains: one target per domain loads over the network, the other from it (BlitzScale §5.1 line 1)", async () => {
    const clock = new WallClock();
    const { log, lines } = recordingLogger();
    // Four nodes of 2 GPUs in two NVLink domains, as `tidegate agent --nvlink-domain` announces them; 1 → 4 is three
    // targets, a chain plan. Whichever node serves first, the other domain has two targets: one group.
    const nodes = ["nvl-a", "nvl-a", "nvl-b", "nvl-b"].map((nvlinkDomain) => ({ gpuType: "h100-80gb", slots: 2, nvlinkDomain }));
    region = startInProcessRegion({ config: config({ slotsTotal: 8, maxInstances: 4 }), region: "r", clock, log, nodes, nodeMemoryBytes: 64 * MiB });
    await region.ready(10_000);
    const r = region;
    const domainOf = new Map(r.agents.map((a, i) => [a.nodeId, nodes[i]!.nvlinkDomain]));
    const source = (r.runtime.actuator.instances().find((i) => i.state === "serving") as { node: string }).node;
    expect(r.runtime.service.acceptTargets(plan(1, 4)).accepted).toBe(true);
    await until("4 serving", () => r.runtime.actuator.instances().filter((i) => i.state === "serving").length === 4, 15_000);
    const started = lines.map((l) => JSON.parse(l) as { msg: string; targets?: string[]; chains?: string[][]; nvlink?: { from: string; to: string }[] }).filter((x) => x.msg === "transfer started" && x.targets?.length === 3);
    expect(started).toHaveLength(1);
    const t = started[0]!;
    const targets = t.targets!;
    expect(targets).not.toContain(source);
    // The plan made: one NVLink hop, inside the domain that has two targets; the chains (network) skip its member.
    const pair = targets.filter((n) => domainOf.get(n) !== domainOf.get(source));
    expect(pair).toHaveLength(2);
    expect(t.nvlink).toHaveLength(1);
    const hop = t.nvlink![0]!;
    expect([hop.from, hop.to].sort()).toEqual([...pair].sort());
    const networked = new Set(t.chains!.flat());
    expect(networked.has(hop.to)).toBe(false);
    expect(networked.has(hop.from)).toBe(true);
    expect([...networked].filter((n) => n !== source).sort()).toEqual(targets.filter((n) => n !== hop.to).sort());
    // Every target holds the exact model, the member included (moved over the data plane from its representative).
    for (const a of r.agents) if (targets.includes(a.nodeId)) expect(await a.verify(MODEL, 9)).toEqual({ firstMismatch: -1, present: 16 });
    // The data plane's measured receive rates are recorded for the next plan's ordering.
    for (const n of targets) expect(r.runtime.actuator.rates.inBytesPerS(n)).toBeGreaterThan(0);
  });

  it("scales 1 → 3 with blocks multicast from the serving node, routes to the new instances, then 3 → 1 to spot", async () => {
    const clock = new WallClock();
    const { log, lines } = recordingLogger();
    region = startInProcessRegion({ config: config(), region: "r", clock, log, gpusPerNode: 2, nodeMemoryBytes: 64 * MiB });
    await region.ready(10_000);
    const r = region;
    const first = r.runtime.actuator.instances().filter((i) => i.state === "serving");
    expect(first).toHaveLength(1);
    const sourceNode = (first[0] as { node: string }).node;

    // The region reports how long its last scale-out of the endpoint took (the initial deployment's, here).
    const expected = () => r.runtime.service.snapshot().models[0]!.endpoints[0]!.expectedScaleOutMs;
    expect(expected()).toBeGreaterThan(0);
    expect(r.runtime.service.acceptTargets(plan(1, 3)).accepted).toBe(true);
    const serving = await until("3 serving", () => {
      const s = r.runtime.actuator.instances().filter((i) => i.state === "serving");
      return s.length === 3 ? s : undefined;
    });
    const nodes = new Set(serving.map((i) => (i as { node: string }).node));
    expect(expected()).toBeGreaterThan(0);
    expect(nodes.size).toBe(3); // spread over the three nodes
    // The two new nodes got their blocks over the data plane, from a pool source, and hold the exact model.
    const transfers = lines.filter((l) => l.includes('"transfer finished"')).map((l) => JSON.parse(l) as { completed: string[]; model: string });
    const moved = transfers.flatMap((t) => t.completed);
    for (const n of nodes) if (n !== sourceNode) expect(moved).toContain(n);
    for (const a of r.agents) {
      if (!nodes.has(a.nodeId)) continue;
      expect(await a.verify(MODEL, 9)).toEqual({ firstMismatch: -1, present: 16 });
    }
    // The gateway routes to every instance: requests in flight together spread over all three (JSQ).
    const routed = new Set<string>();
    const streams: Promise<void>[] = [];
    for (let k = 0; k < 30; k++) {
      const c = r.gateway.route(MODEL);
      if (c !== undefined) routed.add(c.instanceId);
      streams.push(
        (async () => {
          for await (const _ of r.gateway.generate({ id: `q${k}`, model: MODEL, kind: "chat", promptTokens: 50, maxTokens: 20, priority: 0, body: {} }));
        })(),
      );
    }
    await Promise.all(streams);
    expect(routed.size).toBe(3);
    const listing = r.runtime.service.listing();
    expect(listing.actuator).toBe("agents");
    expect(listing.actions.map((a) => a.kind)).toEqual(["provision", "provision", "provision"]);

    expect(r.runtime.service.acceptTargets(plan(2, 1)).accepted).toBe(true);
    await until("2 spot, 1 serving", () => {
      const all = r.runtime.actuator.instances();
      return all.filter((i) => i.state === "spot").length === 2 && all.filter((i) => i.state === "serving").length === 1;
    }, 20_000);
    expect(r.gateway.instances().filter((i) => i.state === "serving")).toHaveLength(1);
    // Spot instances keep their slots and their blocks (reclaim starts an engine on them again).
    const l2 = r.runtime.service.listing();
    expect(l2.instances.filter((i) => i.state === "spot")).toHaveLength(2);
    expect(l2.nodes.every((n) => n.freeSlots === 0)).toBe(true);

    expect(r.runtime.service.acceptTargets(plan(3, 2)).accepted).toBe(true);
    await until("a spot instance reclaimed", () => r.runtime.actuator.instances().filter((i) => i.state === "serving").length === 2);
    expect(r.runtime.actions.at(-1)).toMatchObject({ kind: "reclaim" });
  });

  it("a redeploy gives the instance an id naming its new model (the old one is kept as formerId); the listing says since when and for how long", async () => {
    // Two models on two nodes of 2 slots: A goes 2 → 1 (one instance to spot, slots kept), then B 0 → 1 with no free
    // slot left redeploys A's spot instance with B.
    const B = "llama3.1-8b";
    const twoModels = parseConfig({
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }, { name: B, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "r", gpus: [{ type: "h100-80gb", count: 4 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 2, minInstances: 1, maxInstances: 2 }, { model: B, gpu: "h100-80gb", instances: 0, minInstances: 0, maxInstances: 1 }] }],
      controller: { strategy: "lt-i", reconcileIntervalMs: 100, retryInitialMs: 200, retryMaxMs: 400 },
      engines: { timeScale: 0.01, startTimeoutMs: 3000 },
      parameters: { blockCount: 16, models: { [MODEL]: { bytes: 8 * MiB, origin: "pattern", seed: 9 }, [B]: { bytes: 8 * MiB, origin: "pattern", seed: 10 } } },
    });
    const clock = new WallClock();
    region = startInProcessRegion({ config: twoModels, region: "r", clock, log: recordingLogger().log, gpusPerNode: 2, nodeMemoryBytes: 64 * MiB });
    await region.ready(10_000);
    const r = region;
    const endpoint = (model: string, instances: number) => ({ model, gpu: "h100-80gb", instances, forecastTokensPerS: 100 });
    const targets = (decisionId: number, a: number, b: number): RegionTargets => ({ decisionId, region: "r", madeAtMs: Date.now(), advisory: false, endpoints: [endpoint(MODEL, a), endpoint(B, b)] });
    expect(r.runtime.service.acceptTargets(targets(1, 1, 0)).accepted).toBe(true);
    const spot = await until("one of A's instances in spot", () => r.runtime.actuator.instances().find((i) => i.state === "spot"));
    const { id: spotId, node: spotNode } = spot; // the record is live: the redeploy changes it in place
    expect(spotId).toContain(`/${MODEL}/`);
    expect(r.runtime.service.acceptTargets(targets(2, 1, 1)).accepted).toBe(true);
    const redeployed = await until("B serving", () => r.runtime.actuator.instances().find((i) => i.model === B && i.state === "serving"));
    expect(r.runtime.actions.at(-1)).toMatchObject({ kind: "redeploy", model: B, instanceId: redeployed.id });
    expect(redeployed.formerId).toBe(spotId);
    expect(redeployed.id).toMatch(new RegExp(`^r/[^/]+/${B.replace(/\./g, "\\.")}/[0-9A-Za-z]{8}$`));
    expect(redeployed.node).toBe(spotNode);
    expect(r.runtime.actuator.instances().some((i) => i.id === spotId)).toBe(false);
    // The gateway routes B to it under the new id.
    expect(r.gateway.route(B)?.instanceId).toBe(redeployed.id);
    const listed = r.runtime.service.listing().instances.find((i) => i.id === redeployed.id)!;
    expect(listed).toMatchObject({ model: B, state: "serving", enteredAtMs: redeployed.enteredAtMs });
    expect(listed.forMs).toBeGreaterThanOrEqual(0);
    expect(listed.enteredAtMs + listed.forMs).toBeLessThanOrEqual(Date.now());
  });

  it("serve while loading (loading blitzscale): the new instance pairs with the serving engine, updated at each block the data plane reports", async () => {
    const clock = new WallClock();
    const { log, lines } = recordingLogger();
    region = startInProcessRegion({ config: config({ loading: { source: "blitzscale", scheduler: "best-effort" } }), region: "r", clock, log, gpusPerNode: 2, nodeMemoryBytes: 64 * MiB });
    await region.ready(10_000);
    const r = region;
    const source = r.runtime.actuator.instances().find((i) => i.state === "serving")!;
    const engine = r.agents.map((a) => a.engine(source.id)).find((e) => e !== undefined) as SimEngine;
    expect(r.runtime.service.acceptTargets(plan(1, 2)).accepted).toBe(true);
    const target = await until("2 serving", () => r.runtime.actuator.instances().find((i) => i.state === "serving" && i.id !== source.id));
    const listing = r.runtime.actuator.listing().layerwise!;
    expect(listing.counters).toMatchObject({ pairs: 1, failed: 0, unpaired: 0 });
    // llama3.2-3b's 28 layers in 16 blocks: one update at the start, then one per block that completes a layer
    expect(listing.counters.updates).toBeGreaterThanOrEqual(2);
    const ended = engine.layerwise.status().ended!;
    expect(ended).toMatchObject({ peer: target.id, why: "loaded" });
    expect(ended.updates).toBe(listing.counters.updates);
    expect(engine.core.paired).toBe(false);
    expect(lines.some((l) => l.includes("pairing a loading instance with a serving one"))).toBe(true);
  });

  it("serve while loading (loading blitzscale), nothing to pair with: the second new instance serves behind its arriving blocks", async () => {
    const clock = new WallClock();
    const { log, lines } = recordingLogger();
    region = startInProcessRegion({ config: config({ loading: { source: "blitzscale", scheduler: "best-effort" } }), region: "r", clock, log, gpusPerNode: 2, nodeMemoryBytes: 64 * MiB });
    await region.ready(10_000);
    const r = region;
    // 1 → 3: one target pairs with the one serving engine, the other has none free (Eq. 1 with S_i = 0)
    expect(r.runtime.service.acceptTargets(plan(1, 3)).accepted).toBe(true);
    const behind = await until("serving behind its blocks", () => lines.map((l) => JSON.parse(l) as { msg: string; instanceId?: string }).find((x) => x.msg === "blitzscale cold start serving behind its arriving blocks"));
    // a request sent to it at once is answered (behind the blocks still arriving, or after them: the race is the transfer's)
    const engine = r.agents.map((a) => a.engine(behind.instanceId!)).find((e) => e !== undefined) as SimEngine;
    let done = false;
    engine.core.submit({ id: "x", promptTokens: 50, maxTokens: 2, priority: 0 }, { onDone: () => (done = true) });
    await until("answered", () => done);
    await until("3 serving", () => r.runtime.actuator.instances().filter((i) => i.state === "serving").length === 3, 15_000);
    expect(r.runtime.actuator.listing().layerwise!.counters).toMatchObject({ pairs: 1, unpaired: 1 });
    expect(lines.filter((l) => l.includes("blitzscale cold start serving behind its arriving blocks"))).toHaveLength(1);
    // its blocks are all here now: the engine left the mode
    await until("all blocks seen", () => !engine.core.behindBlocks);
  });

  it("execute while loading (loading lambdascale): 2 → 4 from k = 2 copies, the execution pipeline's head serves once its members hold every block, then switches to local mode", async () => {
    const clock = new WallClock();
    const { log, lines } = recordingLogger();
    const c = config({ loading: { source: "lambdascale" }, instances: 2, slotsTotal: 8, maxInstances: 4 });
    c.parameters.models[MODEL]!.bytes = 32 * MiB;
    // The pipeline forms only if each target holds its own chunk before the other target's copy is complete, i.e.
    // while the two sub-groups' streams run at about the same rate (equal links, as on a cluster). Unpaced, the four
    // nodes here share this host's CPUs and one stream can run twice as fast as the other (then a member holds every
    // block when the union covers and serves alone: no pipeline). Pacing every node's sends at 32 MiB/s makes the
    // emulated link the bottleneck: each chunk takes ~0.5 s, and a stream must lag by that much for the race to flip.
    region = startInProcessRegion({ config: c, region: "r", clock, log, gpusPerNode: 2, nodeMemoryBytes: 128 * MiB, paceBytesPerS: 32 * MiB });
    await region.ready(20_000);
    const r = region;
    await until("2 serving", () => r.runtime.actuator.instances().filter((i) => i.state === "serving").length === 2);
    expect(r.runtime.service.acceptTargets(plan(1, 4)).accepted).toBe(true);
    await until("4 serving", () => r.runtime.actuator.instances().filter((i) => i.state === "serving").length === 4, 20_000);
    await until("local mode", () => lines.some((l) => l.includes("λScale pipeline head switched to local mode")));
    const lambda = r.runtime.actuator.listing().lambda!;
    expect(lambda.counters).toEqual({ plans: 1, formed: 1 });
    expect(lambda.pending).toEqual([]);
    const serving = lines.filter((l) => l.includes("λScale execution pipeline serving while it loads")).map((l) => JSON.parse(l) as { instanceId: string; hops: number; passOverheadMs: number; heldBlocks: number[] });
    expect(serving).toHaveLength(1);
    // Two members, each running the chunk it received first (k-way transmission): one activation hop per pass.
    expect(serving[0]!.hops).toBe(1);
    expect(serving[0]!.passOverheadMs).toBeGreaterThan(0);
    expect(serving[0]!.heldBlocks.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(16);
    expect(Math.max(...serving[0]!.heldBlocks)).toBeLessThan(16);
    // The head serves locally now: no hop left on its engine.
    const head = r.agents.map((a) => a.engine(serving[0]!.instanceId)).find((e) => e !== undefined) as SimEngine;
    expect(head.core.passOverhead).toBe(0);
    const t = lines.filter((l) => l.includes("transfer started")).map((l) => JSON.parse(l) as { algorithm: string; sources: string[]; targets: string[] });
    expect(t.at(-1)).toMatchObject({ algorithm: "binomial" });
    expect(t.at(-1)!.sources).toHaveLength(2);
    expect(t.at(-1)!.targets).toHaveLength(2);
  });

  it("an agent that refuses to start the engine while the blocks are still on their way: the scale-out fails and is listed, the region keeps running", async () => {
    const clock = new WallClock();
    const { log } = recordingLogger();
    region = startInProcessRegion({ config: config(), region: "r", clock, log, gpusPerNode: 2, nodeMemoryBytes: 64 * MiB });
    await region.ready(10_000);
    const r = region;
    const sourceNode = (r.runtime.actuator.instances()[0] as { node: string }).node;
    for (const a of r.agents)
      if (a.nodeId !== sourceNode)
        a.startEngine = () => Promise.reject(new TidegateError("resource_exhausted", `node ${a.nodeId}: 2 GPU slots needed, 0 free`));
    expect(r.runtime.service.acceptTargets(plan(1, 2)).accepted).toBe(true);
    // The refusal comes before the transfer ends: once an unhandled rejection, which ended the region process.
    const failure = await until("the refusal listed", () => r.runtime.actuator.listing().failures.find((f) => f.message.includes("0 free")));
    expect(failure.model).toBe(MODEL);
    expect(r.runtime.actuator.instances().filter((i) => i.state === "serving")).toHaveLength(1);
  });

  it("before any plan, only a surplus not serving yet is cancelled (bootstrapSurplus); serving engines are kept", () => {
    const i = (id: string, state: string) => ({ id, state });
    // An adopted engine serving beside its replacement still loading: the replacement goes.
    expect(bootstrapSurplus([i("old", "serving"), i("adopted", "serving"), i("new", "loading")], 2)).toEqual([i("new", "loading")]);
    // A restarted region that adopted more serving engines than configured keeps them until a plan arrives.
    expect(bootstrapSurplus([i("a", "serving"), i("b", "serving"), i("c", "serving")], 1)).toEqual([]);
    expect(bootstrapSurplus([i("a", "provisioning"), i("b", "loading"), i("c", "serving")], 1)).toEqual([i("a", "provisioning"), i("b", "loading")]);
    expect(bootstrapSurplus([i("a", "serving")], 2)).toEqual([]);
  });

  it("a model with no source anywhere: a clear error in the log and the listing, retried with backoff", async () => {
    const clock = new WallClock();
    const { log, lines } = recordingLogger();
    region = startInProcessRegion({ config: config({ origin: "none" }), region: "r", clock, log, gpusPerNode: 2, nodeMemoryBytes: 64 * MiB });
    await expect(region.ready(1500)).rejects.toThrow(/did not land/);
    // Nothing measured: the region expects the data plane's ideal time for the model over one link (config
    // linkBytesPerS default 1.25 GB/s: 8 MiB in ≈ 6.7 ms).
    expect(region.runtime.service.snapshot().models[0]!.endpoints[0]!.expectedScaleOutMs).toBeCloseTo(((8 * MiB) / 1.25e9) * 1000, 3);
    const l = region.runtime.service.listing();
    expect(l.failures.some((f) => /no source of llama3\.2-3b anywhere in r/.test(f.message))).toBe(true);
    expect(lines.some((x) => x.includes("backing off"))).toBe(true);
    const tries = lines.filter((x) => x.includes('"scaling failed"') && x.includes("no source of llama3.2-3b in the region")).length;
    expect(tries).toBeGreaterThanOrEqual(2);
    expect(tries).toBeLessThan(10); // backoff, not a retry every 100 ms pass
  });

  it("a node that announces no GPU slots is named in the log and the listing; the others still serve", async () => {
    const clock = new WallClock();
    const { log } = recordingLogger();
    const c = config({ slotsTotal: 6 });
    const nodes = [{ gpuType: "h100-80gb", slots: 2 }, { gpuType: "h100-80gb", slots: 2 }, { gpuType: "h100-80gb", slots: 0 }];
    region = startInProcessRegion({ config: c, region: "r", clock, log, nodes, nodeMemoryBytes: 64 * MiB });
    await region.ready(10_000);
    await until("the no-slots failure", () => region!.runtime.service.listing().failures.find((f) => /announces no GPU slots/.test(f.message)), 3000);
    expect(region.runtime.actuator.instances().filter((i) => i.state === "serving")).toHaveLength(1);
  });

  it("a lost node: its instances go, and the pool restores its host copies from the copies that remain", async () => {
    const clock = new WallClock();
    const { log, lines } = recordingLogger();
    const c = config({ instances: 1 });
    c.parameters.minHostCopies = 2;
    region = startInProcessRegion({ config: c, region: "r", clock, log, gpusPerNode: 2, nodeMemoryBytes: 64 * MiB });
    await region.ready(10_000);
    const r = region;
    const pool = r.runtime.actuator.pool;
    // Two complete copies: the origin's, and one copied from it to a second node (the invariant at 2).
    const holders = await until("two host copies", () => (pool.sources(MODEL).length === 2 ? pool.sources(MODEL) : undefined), 10_000);
    const lost = holders[0]!;
    r.runtime.actuator.loseNode(lost, "test: agent gone");
    expect(r.runtime.actuator.instances().some((i) => (i as { node: string }).node === lost)).toBe(false);
    // The next passes restore the invariant from the copy that remains, onto the third node, over the data plane.
    const restored = await until("two host copies again", () => {
      const s = pool.sources(MODEL);
      return s.length === 2 && !s.includes(lost) ? s : undefined;
    }, 10_000);
    const third = restored.find((n) => !holders.includes(n))!;
    expect(third).toBeDefined();
    const repair = lines.map((l) => JSON.parse(l) as { msg: string; to?: string; from?: unknown }).filter((l) => l.msg === "restoring the pool's invariant" && l.to === third);
    expect(repair).toHaveLength(1);
    expect(repair[0]!.from).toEqual([holders[1]]);
    expect(await r.agents.find((a) => a.nodeId === third)!.verify(MODEL, 9)).toEqual({ firstMismatch: -1, present: 16 });
    // And the endpoint is back at its count.
    await until("1 serving", () => r.runtime.actuator.instances().filter((i) => i.state === "serving").length === 1, 10_000);
  });
});
