import { describe, expect, it } from "vitest";
import { isTidegateError } from "../../core/errors.js";
import type { AgentHandle, EngineInfo, NodeAnnouncement } from "../../nodes/agent/handle.js";
import type { NodeEntry } from "./nodes.js";
import { freeGpus, freeSlots, pickNode, type PlacementView } from "./node-placement.js";

function node(nodeId: string, gpuSlots: number, gpuType = "h100-80gb", lost = false, engines: EngineInfo[] = []): NodeEntry {
  const announcement: NodeAnnouncement = { nodeId, dataHost: "127.0.0.1", dataPort: 1, transport: "tcp", fallback: "", memoryBytes: 1 << 30, grpcAddress: "", region: "r", gpuType, gpuSlots, stores: [], engines };
  return { nodeId, handle: {} as AgentHandle, announcement, lastSeenAtMs: 0, lost };
}

type Inst = { id: string; node: string; model: string; gpus: number; state: "provisioning" | "loading" | "serving" | "draining" | "spot" };

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
    const instances: Inst[] = [{ id: "i1", node: "a", model: "m", gpus: 1, state: "serving" }, { id: "i2", node: "a", model: "m", gpus: 2, state: "spot" }, { id: "i3", node: "b", model: "m", gpus: 1, state: "loading" }];
    expect(freeSlots(a, instances)).toBe(1);
    expect(freeSlots(node("a", 4, "h100-80gb", true), instances)).toBe(0);
    expect(freeSlots(undefined, instances)).toBe(0);
    expect(freeGpus(view([a, node("b", 2), node("c", 8, "a100-40gb")], instances), "h100-80gb")).toBe(2);
  });

  it("spreads: a node not running the model first, then one holding its blocks (complete before filling), then the most free slots", () => {
    const nodes = [node("a", 8), node("b", 2), node("c", 2), node("d", 2)];
    // a runs m (not spot): the others win even with fewer free slots.
    expect(pickNode("r", view(nodes, [{ id: "i4", node: "a", model: "m", gpus: 1, state: "serving" }]), "m", "h100-80gb", 1)).toBe("b");
    // a spot instance of m does not count as running it.
    expect(pickNode("r", view(nodes, [{ id: "i5", node: "a", model: "m", gpus: 1, state: "spot" }]), "m", "h100-80gb", 1)).toBe("a");
    // holding a copy beats free slots; a complete copy beats one being filled.
    expect(pickNode("r", view(nodes, [], { "c/m": false }), "m", "h100-80gb", 1)).toBe("c");
    expect(pickNode("r", view(nodes, [], { "c/m": false, "d/m": true }), "m", "h100-80gb", 1)).toBe("d");
    // equal scores: the smallest node id.
    expect(pickNode("r", view([node("y", 2), node("x", 2)], []), "m", "h100-80gb", 2)).toBe("x");
  });

  it("refuses when no node of the GPU type is live, or none has the slots", () => {
    expect(conflict(() => pickNode("r", view([node("a", 2, "a100-40gb"), node("b", 2, "h100-80gb", true)], []), "m", "h100-80gb", 1))).toBe("r: no live node agent with h100-80gb GPUs has announced itself");
    expect(conflict(() => pickNode("r", view([node("a", 2), node("b", 4)], [{ id: "i6", node: "b", model: "x", gpus: 3, state: "spot" }]), "m", "h100-80gb", 3))).toBe("r: no node has 3 free h100-80gb slots for m (free/total: a 2/2, b 1/4)");
  });

  it("stage processes (keystage.stageProcesses): each holds its slot on its own node, the pipeline's head none", () => {
    const engine = (instanceId: string, gpus: number, state: EngineInfo["state"] = "running"): EngineInfo => ({ instanceId, model: "m", gpu: "h100-80gb", gpus, url: "", pid: 1, state, startedAtMs: 0, detail: "" });
    // The head of r/m-1 runs on a (its agent-side record holds 0 slots); its 8 GPUs are stage processes: 3 on a, 4 on b,
    // one on b that exited (holds nothing); c runs a stage process of another pipeline.
    const head: Inst = { id: "r/m-1", node: "a", model: "m", gpus: 8, state: "serving" };
    const a = node("a", 8, "h100-80gb", false, [engine("r/m-1", 0), ...[0, 1, 2].map((k) => engine(`stage/r/m-1/0/${k}`, 1))]);
    const b = node("b", 8, "h100-80gb", false, [...[3, 4, 5, 6].map((k) => engine(`stage/r/m-1/${k % 4}/${k}`, 1)), engine("stage/r/m-1/1/7", 1, "exited")]);
    const c = node("c", 2, "h100-80gb", false, [engine("stage/r/other-1/0/0", 1)]);
    expect([freeSlots(a, [head]), freeSlots(b, [head]), freeSlots(c, [head])]).toEqual([5, 4, 1]);
    // An instance still starting (no running engine announced) holds its booked slots; so does a spot one.
    expect(freeSlots(node("d", 8), [{ id: "r/m-2", node: "d", model: "m", gpus: 8, state: "loading" }])).toBe(0);
    // Refused starts follow: 6 slots fit nowhere (a 5, b 4, c 1), 5 only on a.
    expect(conflict(() => pickNode("r", view([a, b, c], [head]), "x", "h100-80gb", 6))).toBe("r: no node has 6 free h100-80gb slots for x (free/total: a 5/8, b 4/8, c 1/2)");
    expect(pickNode("r", view([a, b, c], [head]), "x", "h100-80gb", 5)).toBe("a");
    expect(freeGpus(view([a, b, c], [head]), "h100-80gb")).toBe(10);
  });
});
