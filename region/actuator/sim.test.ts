import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { isTidegateError } from "../../core/errors.js";
import { Ledger } from "./ledger.js";
import { SAGESERVE_DELAYS, SimActuator, sampleSpotMs } from "./sim.js";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

describe("SimActuator", () => {
  it("spot reclaim times have a median near 1 min and never exceed 5 min (SageServe §7.1)", () => {
    const r = rng(7);
    const xs = Array.from({ length: 4001 }, () => sampleSpotMs(SAGESERVE_DELAYS, r)).sort((a, b) => a - b);
    expect(xs[2000]!).toBeGreaterThan(50_000);
    expect(xs[2000]!).toBeLessThan(70_000);
    expect(xs[xs.length - 1]!).toBeLessThanOrEqual(300_000);
  });

  it("walks provisioning → loading → serving, redeploys local in ~10 min and remote in ~2 h, and accounts GPU time", () => {
    const clock = new VirtualClock();
    const ledger = new Ledger();
    const a = new SimActuator({ region: "r", clock, delays: { ...SAGESERVE_DELAYS, spotSigma: 0 }, capacity: { "h100-80gb": 16 }, weightsInRegion: ["m1"], random: rng(1), onChange: (i, from) => ledger.record(i, clock.now(), from) });
    const vm = a.provision("m1", "h100-80gb", 4);
    expect(a.instances().find((i) => i.id === vm.id)!.state).toBe("provisioning");
    clock.advanceToSync(300_000);
    expect(a.instances().find((i) => i.id === vm.id)!.state).toBe("loading");
    clock.advanceToSync(900_000);
    expect(a.instances().find((i) => i.id === vm.id)!.state).toBe("serving");
    const s1 = a.seed("m2", "h100-80gb", 4, "spot");
    const s2 = a.seed("m3", "h100-80gb", 4, "spot");
    a.redeploy(s1.id, "m1", 4);
    a.redeploy(s2.id, "m4", 4);
    clock.advanceToSync(900_000 + 660_000);
    expect(a.instances().find((i) => i.id === s1.id)!.state).toBe("serving");
    expect(a.instances().find((i) => i.id === s2.id)!.state).toBe("loading");
    clock.advanceToSync(900_000 + 60_000 + 7_200_000);
    expect(a.instances().find((i) => i.id === s2.id)!.state).toBe("serving");
    expect(a.freeGpus("h100-80gb")).toBe(4);
    ledger.closeAt(clock.now());
    expect(ledger.totals("m1").instanceMs.provisioning).toBe(300_000);
    expect(ledger.totals("m1").instanceMs.loading).toBe(600_000 + 660_000);
    expect(ledger.totals("m1").ops.vm).toBe(1);
    expect(ledger.totals("m1").ops["redeploy-local"]).toBe(1);
    expect(ledger.totals("m4").ops["redeploy-remote"]).toBe(1);
    expect(ledger.totals("m4").instanceMs.loading).toBe(60_000 + 7_200_000);
    expect(ledger.totals("m2").instanceMs.loading).toBe(0);
  });

  it("drains to spot when the last in-flight request finishes, and rejects wrong-state operations", () => {
    const clock = new VirtualClock();
    const a = new SimActuator({ region: "r", clock, delays: SAGESERVE_DELAYS, capacity: { "h100-80gb": 8 }, weightsInRegion: ["m1"], random: rng(2), drainDoneAtMs: () => clock.now() + 12_000 });
    const s = a.seed("m1", "h100-80gb", 4, "serving");
    a.drainToSpot(s.id);
    clock.advanceToSync(11_999);
    expect(a.instances()[0]!.state).toBe("draining");
    clock.advanceToSync(12_000);
    expect(a.instances()[0]!.state).toBe("spot");
    let err: unknown;
    try {
      a.drainToSpot(s.id);
    } catch (e) {
      err = e;
    }
    expect(isTidegateError(err, "conflict")).toBe(true);
    expect(() => a.provision("m1", "h100-80gb", 8)).toThrow(/free h100-80gb GPUs/);
    expect(() => new SimActuator({ region: "z", clock, delays: SAGESERVE_DELAYS, capacity: { "h100-80gb": 0 }, weightsInRegion: [], random: rng(1) })).toThrow(/capacity of h100-80gb/);
  });

  it("with a loading source: loads that start at one instant are one scale-out, each target serving at the time it gives; a reclaimed spot instance loads again", () => {
    const clock = new VirtualClock();
    const calls: { model: string; targets: string[]; atMs: number }[] = [];
    const a = new SimActuator({
      region: "r",
      clock,
      delays: { ...SAGESERVE_DELAYS, vmProvisionMs: 0, spotMedianMs: 0, spotMaxMs: 0, spotSigma: 0 },
      capacity: { "h100-80gb": 16 },
      weightsInRegion: ["m1"],
      random: rng(1),
      loading: {
        begin: (model, _gpu, targets) => {
          calls.push({ model, targets: targets.map((t) => t.id), atMs: clock.now() });
          return targets.map((_, i) => 1000 * (i + 1));
        },
        expectedLoadMs: () => 1500,
      },
    });
    expect(a.expectedScaleOutMs("m1", "h100-80gb")).toBe(1500);
    const x = a.provision("m1", "h100-80gb", 4);
    const y = a.provision("m1", "h100-80gb", 4);
    clock.advanceToSync(0);
    expect(calls).toEqual([{ model: "m1", targets: [x.id, y.id], atMs: 0 }]);
    clock.advanceToSync(1000);
    expect(a.get(x.id)!.state).toBe("serving");
    expect(a.get(y.id)!.state).toBe("loading");
    expect(a.get(y.id)!.readyAtMs).toBe(2000);
    clock.advanceToSync(2000);
    expect(a.get(y.id)!.state).toBe("serving");
    a.drainToSpot(x.id);
    clock.advanceToSync(3000);
    expect(a.get(x.id)!.state).toBe("spot");
    a.reclaimSpot(x.id);
    clock.advanceToSync(3000);
    expect(a.get(x.id)!.state).toBe("loading");
    expect(calls.at(-1)).toEqual({ model: "m1", targets: [x.id], atMs: 3000 });
    clock.advanceToSync(4000);
    expect(a.get(x.id)!.state).toBe("serving");
  });
});

describe("Ledger", () => {
  it("a redeploy that renames the instance (formerId) closes the span opened under its old id", () => {
    const ledger = new Ledger();
    const base = { region: "r", gpu: "h100-80gb", gpus: 4 } as const;
    ledger.record({ ...base, id: "r/n0/m1/a", model: "m1", state: "spot", enteredAtMs: 0, via: "drain" }, 0, "draining");
    ledger.record({ ...base, id: "r/n0/m2/b", formerId: "r/n0/m1/a", model: "m2", state: "loading", enteredAtMs: 1000, via: "redeploy-local" }, 1000, "spot");
    ledger.closeAt(3000);
    expect(ledger.totals("m1").instanceMs.spot).toBe(1000);
    expect(ledger.totals("m2").instanceMs.loading).toBe(2000);
    expect(ledger.totals("m2").ops["redeploy-local"]).toBe(1);
  });
});
