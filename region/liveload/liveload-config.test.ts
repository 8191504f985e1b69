import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { mergeOverDefault, parseConfig } from "../../core/config.js";
import { isTidegateError } from "../../core/errors.js";
import { silentLogger } from "../../core/log.js";
import { HighsSolver } from "../../core/solver.js";
import { SAGESERVE_DELAYS } from "../actuator/sim.js";
import { startInProcessRegion } from "../runtime/in-process-region.js";
import { configNeedsSolver, startSimFleet } from "../runtime/sim-region.js";
import { dataPlaneScheduler, namedLoading, parseLoadingConfig, regionLoading, schedulerOf } from "./liveload-config.js";
import { TABLE1_CLUSTER_A } from "./sources.js";

const config = (patch: unknown) => parseConfig(mergeOverDefault(patch));
const err = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  return "no error";
};

describe("the loading configuration key (controller.loading, regions[].loading)", () => {
  it("a source alone takes BlitzScale Table 1's bandwidths, a 5-minute keep-alive, one block per layer and the source's scheduler", () => {
    const c = parseLoadingConfig({ source: "blitzscale" }, "controller.loading")!;
    expect(c).toEqual({ source: "blitzscale", bandwidths: TABLE1_CLUSTER_A, keepAliveMs: 300_000, blocksPerLayer: 1 });
    expect(schedulerOf(c)).toBe("zigzag");
    expect(parseLoadingConfig(undefined, "x")).toBeUndefined();
    const custom = parseLoadingConfig({ source: "network", scheduler: "best-effort", bandwidthsGbps: { rdma: 200, ssd: 25 } }, "x")!;
    expect(custom.bandwidths).toEqual({ ...TABLE1_CLUSTER_A, rdmaBitsPerS: 200e9, ssdBitsPerS: 25e9 });
    expect(schedulerOf(custom)).toBe("best-effort");
  });

  it("a parsed config prints (--print-config: JSON) in the file's form and reads back to the same config", () => {
    const c = config({ controller: { loading: { source: "blitzscale", scheduler: "best-effort", bandwidthsGbps: { rdma: 200, ssd: 12.5 }, keepAliveMs: 1000 } } });
    const printed = JSON.parse(JSON.stringify(c)) as { controller: { loading: unknown } };
    expect(printed.controller.loading).toEqual({ source: "blitzscale", scheduler: "best-effort", bandwidthsGbps: { nvlink: 1600, rdma: 200, pcie: 128, ssd: 12.5 }, keepAliveMs: 1000, blocksPerLayer: 1 });
    expect(parseConfig(printed)).toEqual(c);
  });

  it("bad values name their field", () => {
    expect(err(() => config({ controller: { loading: { source: "nfs" } } }))).toMatch(/^controller\.loading\.source: must be one of ssd, allcache, network, blitzscale, lambdascale, faasnet-tree, nccl-ring, got "nfs"/);
    expect(err(() => config({ controller: { loading: { source: "network", scheduler: "lambda-pipelines" } } }))).toMatch(/^controller\.loading\.scheduler: lambda-pipelines runs on the lambdascale source's binomial multicast, not network/);
    expect(err(() => config({ controller: { loading: { source: "ssd", bandwidthsGbps: { ssd: 0 } } } }))).toMatch(/^controller\.loading\.bandwidthsGbps\.ssd:/);
    expect(err(() => config({ controller: { loading: { source: "ssd", bandwidthsGbps: { infiniband: 400 } } } }))).toMatch(/^controller\.loading\.bandwidthsGbps\.infiniband:/);
    expect(err(() => config({ controller: { loading: { source: "ssd", blocksPerLayer: 0 } } }))).toMatch(/^controller\.loading\.blocksPerLayer:/);
    expect(err(() => config({ regions: [{ name: "a", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama3.1-8b", gpu: "h100-80gb" }], loading: { source: "x" } }] }))).toMatch(/^regions\[0\]\.loading\.source:/);
    expect(err(() => namedLoading("disk", "--loading"))).toMatch(/^--loading: must be one of ssd, allcache, network, blitzscale, lambdascale, faasnet-tree, nccl-ring, none, got "disk"/);
    expect(namedLoading("none", "--loading")).toBeUndefined();
  });

  it("a region's own key wins over the controller's; the sim fleet loads as configured, zigzag with the fleet's HiGHS", async () => {
    const c = config({
      models: [{ name: "llama3.1-8b", gpusPerInstance: { "h100-80gb": 2 } }],
      controller: { actuator: "sim", loading: { source: "blitzscale" } },
      regions: [
        { name: "a", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama3.1-8b", gpu: "h100-80gb", instances: 1 }] },
        { name: "b", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama3.1-8b", gpu: "h100-80gb", instances: 1 }], loading: { source: "ssd" } },
      ],
    });
    expect(regionLoading(c, "a")!.source).toBe("blitzscale");
    expect(regionLoading(c, "b")!.source).toBe("ssd");
    expect(configNeedsSolver(c)).toBe(true);
    const clock = new VirtualClock(0);
    // free GPUs (no VM to provision), so a scale-out is exactly its load
    const base = { config: c, clock, delays: { ...SAGESERVE_DELAYS, vmProvisionMs: 0 }, random: () => () => 0.5 };
    // zigzag without HiGHS is a config error naming the region, not a silent fallback
    expect(err(() => startSimFleet(base))).toMatch(/^region a loading \(blitzscale\): the zigzag live scheduler needs a solver/);
    const fleet = startSimFleet({ ...base, solver: await HighsSolver.create() });
    try {
      expect(fleet.map((r) => [r.name, r.sim.loading?.settings.source, r.sim.loading?.scheduler])).toEqual([
        ["a", "blitzscale", "zigzag"],
        ["b", "ssd", "stop-the-world"],
      ]);
      // the expected scale-out the region reports (and the plan report shows) comes from its source: RDMA chain vs SSD
      const a = fleet[0]!.sim.actuator.expectedScaleOutMs("llama3.1-8b", "h100-80gb")!;
      const b = fleet[1]!.sim.actuator.expectedScaleOutMs("llama3.1-8b", "h100-80gb")!;
      // 10 Gbps SSD against 100 Gbps RDMA for the same 8 GB per GPU: 6.4 s against a 0.64 s chain hop
      expect(b).toBeCloseTo(6400, -1);
      expect(b / a).toBeCloseTo(10, 0);
    } finally {
      for (const r of fleet) await r.sim.close();
    }
    // without a key the actuator keeps its configured delays
    const plain = startSimFleet({ ...base, config: config({ controller: { actuator: "sim" } }) });
    expect(plain.every((r) => r.sim.loading === undefined)).toBe(true);
    for (const r of plain) await r.sim.close();
  });

  it("the agents actuator runs network, blitzscale (stop-the-world, best-effort, zigzag) and lambdascale (lambda-pipelines, stop-the-world) and refuses the rest, naming the region", () => {
    expect(dataPlaneScheduler("a", parseLoadingConfig({ source: "network" }, "x"))).toBe("stop-the-world");
    expect(dataPlaneScheduler("a", undefined)).toBe("stop-the-world");
    expect(dataPlaneScheduler("a", parseLoadingConfig({ source: "blitzscale" }, "x"))).toBe("zigzag");
    expect(dataPlaneScheduler("a", parseLoadingConfig({ source: "blitzscale", scheduler: "best-effort" }, "x"))).toBe("best-effort");
    expect(dataPlaneScheduler("a", parseLoadingConfig({ source: "network", scheduler: "zigzag" }, "x"))).toBe("zigzag");
    expect(dataPlaneScheduler("a", parseLoadingConfig({ source: "lambdascale" }, "x"))).toBe("lambda-pipelines");
    expect(dataPlaneScheduler("a", parseLoadingConfig({ source: "lambdascale", scheduler: "stop-the-world" }, "x"))).toBe("stop-the-world");
    for (const source of ["ssd", "allcache"]) expect(() => dataPlaneScheduler("a", parseLoadingConfig({ source }, "x"))).toThrow(/^region a: loading /);
    expect(() => dataPlaneScheduler("a", parseLoadingConfig({ source: "lambdascale", scheduler: "zigzag" }, "x"))).toThrow(/^region a: loading lambdascale\/zigzag runs only on the sim actuator/);
    const e = (() => {
      try {
        startInProcessRegion({ config: config({ controller: { loading: { source: "ssd" } } }), region: "us-east", clock: new VirtualClock(0), log: silentLogger });
      } catch (x) {
        return x;
      }
      return undefined;
    })();
    expect(isTidegateError(e, "invalid_config")).toBe(true);
    expect((e as Error).message).toMatch(/^region us-east: loading ssd\/stop-the-world runs only on the sim actuator/);
  });
});
