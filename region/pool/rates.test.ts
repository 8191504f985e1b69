import { describe, expect, it } from "vitest";
import { announcementFromWire, announcementToWire } from "../../nodes/agent/agent-proto.js";
import type { NodeAnnouncement } from "../../nodes/agent/handle.js";
import { LinkRates } from "./rates.js";
import { DEFAULT_MULTICAST, nodeLinks, planTransfer } from "./transfer.js";

const MODEL = { model: "m", totalBytes: 64 << 20, blockCount: 8 };
const policy = { ...DEFAULT_MULTICAST, linkBytesPerS: 1e9 };

describe("what the chain planner is told of each node (BlitzScale §5.1, Algorithm 1)", () => {
  it("orders targets by the data plane's measured rate, else the announced one, else the policy's", () => {
    const rates = new LinkRates();
    const announced: Record<string, { linkBytesPerS?: number; nvlinkDomain?: string }> = { t1: { linkBytesPerS: 5e8 }, t2: {}, t3: { linkBytesPerS: 2e9 } };
    const d = { policy, rates, topology: (n: string) => announced[n] };
    expect(nodeLinks(d, "t1")).toEqual({ inBytesPerS: 5e8, outBytesPerS: 5e8 });
    expect(nodeLinks(d, "t2")).toEqual({ inBytesPerS: 1e9, outBytesPerS: 1e9 });
    // Lines 4–12: one source feeds the fastest target, which feeds the next fastest: t3 → t2 → t1.
    expect(planTransfer(MODEL, ["s"], ["t1", "t2", "t3"], policy, (n) => nodeLinks(d, n)).chains).toEqual([["s", "t3", "t2", "t1"]]);
    // t1 was measured receiving at 4 GB/s: the measurement, not the announcement, orders it now.
    rates.observe("t1", 4e9, 1000);
    expect(nodeLinks(d, "t1").inBytesPerS).toBe(4e9);
    expect(planTransfer(MODEL, ["s"], ["t1", "t2", "t3"], policy, (n) => nodeLinks(d, n)).chains).toEqual([["s", "t1", "t3", "t2"]]);
    rates.forget("t1");
    expect(rates.inBytesPerS("t1")).toBeUndefined();
  });

  it("line 2: leaves out a source whose outbound link carries KV (a serving prefill instance's node; BlitzScale Figure 8 d), unless none would be left", () => {
    const d = { policy, sendsKv: (n: string) => n === "p" };
    expect(nodeLinks(d, "p")).toEqual({ inBytesPerS: 1e9, outBytesPerS: 1e9, servingOutbound: true });
    expect(nodeLinks(d, "dec")).toEqual({ inBytesPerS: 1e9, outBytesPerS: 1e9 });
    // Two sources: the prefill node's copy is not used; the decode node feeds every target.
    expect(planTransfer(MODEL, ["p", "dec"], ["t1", "t2"], policy, (n) => nodeLinks(d, n)).chains).toEqual([["dec", "t1", "t2"]]);
    // Without KV on its link, both sources feed a chain each.
    expect(planTransfer(MODEL, ["p", "dec"], ["t1", "t2"], policy, (n) => nodeLinks({ policy }, n)).chains!.map((c) => c[0]).sort()).toEqual(["dec", "p"]);
    // The prefill node is the only source: the transfer goes on from it.
    expect(planTransfer(MODEL, ["p"], ["t1"], policy, (n) => nodeLinks(d, n)).chains).toEqual([["p", "t1"]]);
  });

  it("groups targets of one announced NVLink domain: one loads over the network, the other from it", () => {
    const d = { policy, topology: (n: string) => ({ nvlinkDomain: n === "t3" ? "" : "nvl-0" }) };
    const plan = planTransfer(MODEL, ["s"], ["t1", "t2", "t3"], policy, (n) => nodeLinks(d, n));
    expect(plan.chains!.flat().sort()).toEqual(["s", "t1", "t3"]);
    expect(plan.transfers.filter((t) => t.medium === "nvlink").map((t) => `${t.from}>${t.to}`)).toEqual(new Array(8).fill("t1>t2"));
  });

  it("an agent's NVLink domain and link rate survive the wire; absent, they stay absent", () => {
    const a: NodeAnnouncement = { nodeId: "n", dataHost: "h", dataPort: 1, transport: "tcp", fallback: "", memoryBytes: 1, grpcAddress: "h:2", region: "r", gpuType: "h100-80gb", gpuSlots: 8, stores: [], engines: [] };
    expect(announcementFromWire(announcementToWire(a))).toEqual(a);
    const b = { ...a, nvlinkDomain: "rack-7", linkBytesPerS: 12.5e9 };
    expect(announcementFromWire(announcementToWire(b))).toEqual(b);
  });
});
