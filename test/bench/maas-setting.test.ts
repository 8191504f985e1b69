import { describe, expect, it } from "vitest";
import { MODEL_SPECS, baseModelOf } from "../../core/models.js";
import { getProfile } from "../../core/perf/model.js";
import { HighsSolver } from "../../core/solver.js";
import { coldStartsOf, maasConfig, maasModels, maasWorkload, runMaas, zipfShares } from "./maas-setting.js";
import type { RequestRecord } from "../../sim/replay/stats.js";

describe("the model-as-a-service setting", () => {
  it("names fine-tunes of a base that share its architecture and profile, each a model of its own", () => {
    const [a, b] = maasModels("llama3.1-8b", 2);
    expect([a, b]).toEqual(["llama3.1-8b:m00", "llama3.1-8b:m01"]);
    expect(MODEL_SPECS[a!]).toMatchObject({ name: a, layers: 32, params: 8e9 });
    expect(MODEL_SPECS["nope:m00"]).toBeUndefined();
    expect(baseModelOf(b!)).toBe("llama3.1-8b");
    expect(getProfile(a!, "h100-80gb", 2).prefillMs(1000, 1)).toBe(getProfile("llama3.1-8b", "h100-80gb", 2).prefillMs(1000, 1));
    const config = maasConfig({ base: "llama3.1-8b", models: [a!, b!], gpus: 8, maxInstances: 2, kvCapacityTokens: 1000, idleMs: 2000 });
    expect(config.regions[0]!.endpoints.map((e) => [e.model, e.minInstances, e.instances])).toEqual([[a, 0, 0], [b, 0, 0]]);
    expect(config.controller.scaleToZero.idleMs).toBe(2000);
  });

  it("Zipf shares: 1/k normalized", () => {
    const s = zipfShares(3, 1);
    expect(s[0]! / s[1]!).toBeCloseTo(2);
    expect(s[0]! / s[2]!).toBeCloseTo(3);
    expect(s.reduce((x, y) => x + y, 0)).toBeCloseTo(1);
  });

  it("the workload thins the compressed trace per model to its share, shifted per model, within the span", () => {
    const trace = { name: "t", requests: Array.from({ length: 4000 }, (_, i) => ({ arrivalMs: i * 100, promptTokens: 10, outputTokens: 5 })), spanMs: 399_900 };
    const models = maasModels("llama3.1-8b", 4);
    const w = maasWorkload(trace, models, 1, 2, 3);
    const counts = models.map((m) => w.requests.filter((r) => r.model === m).length);
    const shares = zipfShares(4, 1);
    counts.forEach((c, k) => expect(Math.abs(c - 4000 * shares[k]!)).toBeLessThan(4 * Math.sqrt(4000 * shares[k]!)));
    expect(w.requests.every((r, i) => r.arrivalMs <= 199_950 && (i === 0 || r.arrivalMs >= w.requests[i - 1]!.arrivalMs))).toBe(true);
    expect(maasWorkload(trace, models, 1, 2, 3)).toEqual(w);
  });

  it("finds cold starts and the requests that arrived while their model had no serving instance", () => {
    const m = "llama3.1-8b:m00";
    const changes = [
      { atMs: 0, id: "i1", model: m, state: "provisioning" as const, actionAtMs: 0 },
      { atMs: 600, id: "i1", model: m, state: "serving" as const, actionAtMs: 0 },
      { atMs: 5000, id: "i1", model: m, state: "draining" as const, actionAtMs: 5000 },
      { atMs: 5001, id: "i1", model: m, state: "spot" as const, actionAtMs: 5000 },
      { atMs: 9000, id: "i1", model: m, state: "provisioning" as const, actionAtMs: 9000 },
      { atMs: 9500, id: "i1", model: m, state: "serving" as const, actionAtMs: 9000 },
    ];
    const rec = (arrivalMs: number): RequestRecord => ({ model: m, clientRegion: "maas", region: "maas", arrivalMs, firstTokenMs: arrivalMs + 1, doneMs: arrivalMs + 2, outputTokens: 1, promptTokens: 1 });
    const c = coldStartsOf({ changes, records: [rec(0), rec(700), rec(8999), rec(9600)] });
    expect(c.loadMs).toEqual([600, 500]);
    expect(c.coldRequest).toEqual([true, false, true, false]);
  });

  it("a cold start under blitzscale prefills its held request behind the arriving blocks: the first token one block's compute after the last block", async () => {
    const [m] = maasModels("llama3.1-8b", 1);
    const fleet = { base: "llama3.1-8b" as const, models: [m!], gpus: 4, maxInstances: 1, kvCapacityTokens: 48_000, idleMs: 2000 };
    const workload = { name: "one", requests: [{ arrivalMs: 1000, promptTokens: 2000, outputTokens: 4, model: m! }], spanMs: 1000 };
    const policy = { name: "demand", params: { instanceTokensPerS: 10_000, scaleDownAfterMs: 2000 } };
    const solver = await HighsSolver.create();
    const served = async (source: "blitzscale" | "network") => {
      const r = await runMaas(fleet, workload, policy, { source, solver }, 1);
      const rec = r.records[0]!;
      const load = r.changes.find((c) => c.state === "loading")!;
      const serving = r.changes.find((c) => c.state === "serving")!;
      expect(rec.error).toBeUndefined();
      return { first: rec.firstTokenMs, loadStart: load.atMs, loaded: serving.atMs, behind: r.counters.behindBlocks };
    };
    const blitz = await served("blitzscale");
    const network = await served("network");
    // the same load (the origin's copy over the network) under both; the instance serves when its last block lands
    expect(blitz.loaded - blitz.loadStart).toBeCloseTo(network.loaded - network.loadStart, 6);
    expect(blitz.behind).toBe(1);
    expect(network.behind).toBe(0);
    // stop-the-world: load, then the prefill; behind the blocks: the first token lands within one block's compute of the last block
    const P = getProfile(m!, "h100-80gb", 2).prefillMs(2000, 1);
    expect(network.first).toBeGreaterThanOrEqual(network.loaded + P - 1e-6);
    // (32 layers, one block each: the prefill ran while the load did, all but its last block's share)
    expect(blitz.first).toBeGreaterThan(blitz.loaded);
    expect(blitz.first).toBeLessThanOrEqual(blitz.loaded + P / 32 + 1e-6);
    expect(blitz.first).toBeLessThan(network.first);
  });
});
