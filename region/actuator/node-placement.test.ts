import { describe, expect, it } from "vitest";
import { isTidegateError } from "../../core/errors.js";
import type { AgentHandle, NodeAnnouncement } from "../agent/handle.js";
import type { NodeEntry } from "./nodes.js";
import { freeGpus, freeSlots, pickNode, type PlacementView } from "./node-placement.js";

function node(nodeId: string, gpuSlots: number, gpuType = "h100-80gb", lost = false): NodeEntry {
  const announcement: NodeAnnouncement = { nodeId, dataHost: "127.0.0.1", dataPort: 1, transport: "tcp", fallback: "", memoryBytes: 1 << 30, grpcAddress: "", region: "r", gpuType, gpuSlots, stores: [], engines: [] };
  return { nodeId, handle: {} as AgentHandle, announcement, lastSeenAtMs: 0, lost };
}

type Inst = { node: string; model: string; gpus: number; state: "provisioning" | "loading" | "serving" | "draining" | "spot" };

function view(nodes: NodeEntry[], instances: Inst[], copies: Record<string, boolean> = {}): PlacementView {
  return { live: nodes.filter((n) => !n.lost), instances, copy: (n, m) => (`${n}/${m}` in copies ? { complete: copies[`${n}/${m}`]! } : undefined) };
}

function conflict(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    if (isTidegateError(err, "conflict")) return (err as Error).message;
    throw err;
  }
  throw new Error("no conflict thrown");
}

describe("node placement", () => {
  it("counts slots held by instances in any state, spot included; a lost node has none", () => {
    const a = node("a", 4);
    const instances: Inst[] = [{ node: "a", model: "m", gpus: 1, state: "serving" }, { node: "a", model: "m", gpus: 2, state: "spot" }, { node: "b", model: "m", gpus: 1, state: "loading" }];
    expect(freeSlots(a, instances)).toBe(1);
    expect(freeSlots(node("a", 4, "h100-80gb", true), instances)).toBe(0);
    expect(freeSlots(undefined, instances)).toBe(0);
    expect(freeGpus(view([a, node("b", 2), node("c", 8, "a100-40gb")], instances), "h100-80gb")).toBe(2);
  });

  it("spreads: a node not running the model first, then one holding its blocks (complete before filling), then the most free slots", () => {
    const nodes = [node("a", 8), node("b", 2), node("c", 2), node("d", 2)];
    // a runs m (not spot): the others win even with fewer free slots.
    expect(pickNode("r", view(nodes, [{ node: "a", model: "m", gpus: 1, state: "serving" }]), "m", "h100-80gb", 1)).toBe("b");
    // a spot instance of m does not count as running it.
    expect(pickNode("r", view(nodes, [{ node: "a", model: "m", gpus: 1, state: "spot" }]), "m", "h100-80gb", 1)).toBe("a");
    // holding a copy beats free slots; a complete copy beats one being filled.
    expect(pickNode("r", view(nodes, [], { "c/m": false }), "m", "h100-80gb", 1)).toBe("c");
    expect(pickNode("r", view(nodes, [], { "c/m": false, "d/m": true }), "m", "h100-80gb", 1)).toBe("d");
    // equal scores: the smallest node id.
    expect(pickNode("r", view([node("y", 2), node("x", 2)], []), "m", "h100-80gb", 2)).toBe("x");
  });

  it("refuses when no node of the GPU type is live, or none has the slots", () => {
    expect(conflict(() => pickNode("r", view([node("a", 2, "a100-40gb"), node("b", 2, "h100-80gb", true)], []), "m", "h100-80gb", 1))).toBe("r: no live node agent with h100-80gb GPUs has announced itself");
    expect(conflict(() => pickNode("r", view([node("a", 2), node("b", 4)], [{ node: "b", model: "x", gpus: 3, state: "spot" }]), "m", "h100-80gb", 3))).toBe("r: no node has 3 free h100-80gb slots for m (free/total: a 2/2, b 1/4)");
  });
});
