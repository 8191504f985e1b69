// The heads `tidegate region` builds for pipelined instances under keystage.stageProcesses (stage-heads.ts): a
// pipelined StartEngine stays in the region, the head is announced on its node with 0 GPUs, other calls reach the
// agent, and a head whose instance the actuator no longer runs is closed.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";
import { silentLogger } from "../../core/log.js";
import type { AgentHandle, EngineInfo, EngineSpec, NodeAnnouncement } from "../../nodes/agent/handle.js";
import { StageHeads, stageNodeOf } from "./stage-heads.js";

const MODEL = "llama2-70b";
const GPU = "h100-80gb";

function announcement(nodeId: string, engines: EngineInfo[], complete: boolean): NodeAnnouncement {
  return { nodeId, dataHost: "127.0.0.1", dataPort: 1, transport: "tcp", fallback: "", memoryBytes: 1 << 30, grpcAddress: "", region: "us-east", gpuType: GPU, gpuSlots: 8, stores: [{ model: MODEL, blockCount: 16, totalBytes: 1 << 24, present: complete ? 16 : 3, lastUsedMs: 0 }], engines };
}

/** An agent handle that records the engines started on it. */
function agent(nodeId: string): AgentHandle & { started: EngineSpec[]; stopped: string[] } {
  const started: EngineSpec[] = [];
  const stopped: string[] = [];
  const no = () => Promise.reject(new Error("not in this test"));
  return {
    nodeId,
    started,
    stopped,
    announcement: no,
    load: no,
    run: no,
    verify: no,
    drop: no,
    startEngine: async (spec) => {
      started.push(spec);
      return { instanceId: spec.instanceId, model: spec.model, gpu: spec.gpu, gpus: spec.gpus, url: "http://127.0.0.1:1", pid: 4242, state: "starting", startedAtMs: 0, detail: "" };
    },
    stopEngine: async (id) => {
      stopped.push(id);
      return undefined;
    },
    close: () => undefined,
  };
}

describe("stage-process heads in the region (stage-heads.ts)", () => {
  it("a node as a head sees it: free slots from its engines, the stage cache once its store is complete", () => {
    const running = (gpus: number, state: EngineInfo["state"] = "running"): EngineInfo => ({ instanceId: `e${gpus}${state}`, model: MODEL, gpu: GPU, gpus, url: "", pid: 1, state, startedAtMs: 0, detail: "" });
    const a = agent("n1");
    expect(stageNodeOf(a, announcement("n1", [running(2), running(1), running(4, "exited")], true), MODEL)).toEqual({ host: a, slots: 8, freeSlots: 5, holdsModel: true });
    expect(stageNodeOf(a, announcement("n1", [], false), MODEL).holdsModel).toBe(false);
    expect(stageNodeOf(a, announcement("n1", [], true), "other-model").holdsModel).toBe(false);
  });

  it("a pipelined StartEngine builds a head in the region, announced with 0 GPUs; pruned once its instance is gone", async () => {
    const config = parseConfig(DEFAULT_CONFIG_JSON);
    const heads = new StageHeads({ config, clock: new VirtualClock(0), log: silentLogger });
    const n1 = agent("n1");
    // n1's store is incomplete: the head places no stage process yet (none starts without parameters).
    const a1 = heads.announce(n1, announcement("n1", [], false));
    expect(a1.engines).toEqual([]);
    const h = heads.wrap(n1);
    expect(heads.wrap(n1)).toBe(h); // one wrapper per handle: the node registry closes a handle that changes
    const spec: EngineSpec = { instanceId: "us-east/n1/llama2-70b/x", model: MODEL, gpu: GPU, gpus: 8, timeScale: 1, pipeline: JSON.stringify({ layersPerStage: [32, 16, 16, 16], profileTp: 4 }) };
    const info = await h.startEngine(spec);
    expect(info).toMatchObject({ instanceId: spec.instanceId, gpus: 0, url: `in-region://n1/${spec.instanceId}`, state: "running" });
    expect(n1.started).toEqual([]); // the StartEngine stayed in the region
    expect(heads.isHead(info)).toBe(true);
    expect(heads.head(spec.instanceId)?.model).toBe(MODEL);
    expect((await h.startEngine(spec)).url).toBe(info.url); // the actuator's second StartEngine (after awaitBlocks) finds it
    // The node's announcement lists the head, holding no GPU.
    expect(heads.announce(n1, announcement("n1", [], false)).engines).toMatchObject([{ instanceId: spec.instanceId, gpus: 0 }]);
    // A StartEngine without a pipeline goes to the agent.
    await h.startEngine({ instanceId: "us-east/n1/other", model: MODEL, gpu: GPU, gpus: 2 });
    expect(n1.started.map((s) => s.instanceId)).toEqual(["us-east/n1/other"]);
    // The actuator still runs the instance: kept; then it is gone (its node lost, say): closed.
    heads.prune(new Set([spec.instanceId]));
    expect(heads.head(spec.instanceId)).toBeDefined();
    heads.prune(new Set());
    expect(heads.head(spec.instanceId)).toBeUndefined();
    expect(heads.announce(n1, announcement("n1", [], false)).engines).toEqual([]);
    // StopEngine of an id that is no head goes to the agent.
    await h.stopEngine(spec.instanceId, 100);
    expect(n1.stopped).toEqual([spec.instanceId]);
    await heads.close();
  });
});
