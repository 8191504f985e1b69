import { describe, expect, it } from "vitest";
import { HOST_KV_LOAD_BYTES_PER_MS } from "../../engines/sim/core.js";
import { describeBandwidths, KeepAliveCache, layerArrivals, loadingSource, LOADING_SOURCES, NCCL_GROUP_SETUP_MS, TABLE1_CLUSTER_A } from "./sources.js";

// llama2-70b in fp16: 140 GB, 80 layers, moved in 16 blocks (8.75 GB each)
const llama70 = { bytes: 140e9, layers: 80, blocks: 16 };
const last = (rows: number[][]) => rows.map((r) => r[r.length - 1]!);

describe("loading sources as named configurations (BlitzScale Table 1 bandwidths)", () => {
  it("the defaults are BlitzScale's Table 1, cluster A, and print as such", () => {
    expect(TABLE1_CLUSTER_A).toEqual({ nvlinkBitsPerS: 1.6e12, rdmaBitsPerS: 100e9, pcieBitsPerS: 128e9, ssdBitsPerS: 10e9 });
    expect(describeBandwidths(TABLE1_CLUSTER_A)).toBe("NVLink 1.6 Tbps in a host, RDMA 100 Gbps between hosts, PCIe 128 Gbps host→GPU, SSD 10 Gbps SSD→GPU");
    expect(Object.keys(LOADING_SOURCES)).toEqual(["ssd", "allcache", "network", "blitzscale", "lambdascale", "faasnet-tree", "nccl-ring"]);
    expect(LOADING_SOURCES.blitzscale.scheduler).toBe("zigzag");
    expect(LOADING_SOURCES.lambdascale.scheduler).toBe("lambda-pipelines");
    expect(() => loadingSource("nfs")).toThrow(/unknown loading source "nfs" \(one of ssd, allcache, network, blitzscale, lambdascale, faasnet-tree, nccl-ring\)/);
  });

  it("host memory over PCIe: 140 GB at 16 GB/s = 8.75 s for the last layer; an SSD miss 112 s; a keep-alive hit is PCIe again", () => {
    expect(last(layerArrivals("allcache", llama70, { targets: 2 }))).toEqual([8750, 8750]);
    const ssd = layerArrivals("ssd", llama70, { targets: 2, hostCached: [true, false] });
    expect(last(ssd)).toEqual([8750, 112_000]);
    expect(ssd[1]![0]).toBe(1400); // layer 1: 1.75 GB at 1.25 GB/s
  });

  it("network: a chain over 100 Gbps RDMA — M/B + (N − 2)·(M/b)/B for the tail (11.2 s + 2 × 0.7 s for three new instances)", () => {
    const net = layerArrivals("network", llama70, { targets: 3 });
    expect(last(net).map((x) => Math.round(x))).toEqual([11_200, 11_900, 12_600]);
    // layer 1 is in block 0: the head has it after one block time (8.75 GB at 12.5 GB/s)
    expect(Math.round(net[0]![0]!)).toBe(700);
    expect(layerArrivals("blitzscale", llama70, { targets: 3 })).toEqual(net);
  });

  it("lambdascale: a 1 → 3 binomial pipeline ends in b + ⌈log₂ 4⌉ − 1 = 17 block times; 2 → 4 sends each sub-group its own half first", () => {
    const l = layerArrivals("lambdascale", llama70, { targets: 3 });
    expect(Math.max(...last(l).map((x) => Math.round(x)))).toBe(11_900);
    const two = layerArrivals("lambdascale", llama70, { targets: 4, servingSources: 2 });
    // t0, t1 (sub-group 0) get layers 1–40 (blocks 0–7) first; t2, t3 (sub-group 1) layers 41–80 (blocks 8–15)
    expect(Math.round(two[0]![39]!)).toBeLessThan(Math.round(two[0]![79]!));
    expect(Math.round(two[2]![79]!)).toBeLessThan(Math.round(two[2]![39]!));
    expect(Math.round(two[2]![79]!)).toBe(5600); // eight blocks, one per step
  });

  it("ServerlessLLM's keep-alive: a model used within 5 minutes is still in the host's memory", () => {
    const c = new KeepAliveCache();
    expect(c.holds("h1", "m", 0)).toBe(false);
    c.touch("h1", "m", 1000);
    expect(c.holds("h1", "m", 1000 + 300_000)).toBe(true);
    expect(c.holds("h1", "m", 1000 + 300_001)).toBe(false);
    expect(c.holds("h2", "m", 1000)).toBe(false);
  });

  it("a host whose memory holds two models evicts the least recently used when a third comes", () => {
    const c = new KeepAliveCache(300_000, 2);
    c.touch("h1", "a", 0);
    c.touch("h1", "b", 10);
    c.touch("h1", "a", 20); // a is now the most recent
    c.touch("h1", "c", 30); // evicts b
    expect([c.holds("h1", "a", 40), c.holds("h1", "b", 40), c.holds("h1", "c", 40)]).toEqual([true, false, true]);
    c.touch("h2", "b", 40); // another host's memory is its own
    expect(c.holds("h2", "b", 50)).toBe(true);
    expect(() => new KeepAliveCache(1000, 0)).toThrow(RangeError);
  });

  it("λScale's baselines: FaaSNet's binary tree ≈ 2·M/B for 8 new instances, NCCL's ring the chain's time after its group set-up; both from one source", () => {
    const blockMs = (140e9 / 16 / 12.5e9) * 1000; // 700 ms
    const tree = last(layerArrivals("faasnet-tree", llama70, { targets: 8, servingSources: 4 }));
    // internal uplinks carry every block twice: ≈ 2·M/B + 2·(⌊log₂9⌋ − 1)·(M/b)/B = 22.4 s + 2.8 s (ideal.ts's estimate), within 10%
    const ideal = 22_400 + 2 * 2 * blockMs;
    expect(Math.max(...tree)).toBeGreaterThan(0.9 * ideal);
    expect(Math.max(...tree)).toBeLessThanOrEqual(1.1 * ideal);
    const ring = last(layerArrivals("nccl-ring", llama70, { targets: 3, servingSources: 2 }));
    expect(ring.map((x) => Math.round(x))).toEqual([11_200, 11_900, 12_600].map((x) => x + NCCL_GROUP_SETUP_MS));
    // λScale's binomial pipeline over the same 8 targets from one source: b + ⌈log₂9⌉ − 1 steps.
    const lambda = last(layerArrivals("lambdascale", llama70, { targets: 8 }));
    expect(Math.max(...lambda)).toBeLessThan(Math.max(...tree) / 1.5);
  });

  it("bad input is refused", () => {
    expect(() => layerArrivals("network", { bytes: 0, layers: 1, blocks: 1 }, { targets: 1 })).toThrow(RangeError);
    expect(() => layerArrivals("network", llama70, { targets: 0 })).toThrow(/targets must be a positive integer/);
    expect(() => new KeepAliveCache(-1)).toThrow(RangeError);
  });
});

describe("engine-sim's host KV tier load rate", () => {
  it("is Table 1 cluster A's host → GPU PCIe figure, in bytes per ms", () => {
    expect(HOST_KV_LOAD_BYTES_PER_MS).toBe(TABLE1_CLUSTER_A.pcieBitsPerS / 8 / 1000);
  });
});
