// NodeAgent's engine rules against a fake NodeEngineHost (no processes): what the agent decides, apart from how a host acts.
import { afterEach, describe, expect, it } from "vitest";
import { isTidegateError } from "../../core/errors.js";
import { silentLogger } from "../../core/log.js";
import type { NodeEngineHost, EngineInfo, EngineSpec } from "./handle.js";
import { NodeAgent } from "./node.js";

/** Lists an engine synchronously in start() (the NodeEngineHost contract) and resolves it on the next tick. */
class FakeHost implements NodeEngineHost {
  readonly engines: EngineInfo[] = [];
  start(spec: EngineSpec): Promise<EngineInfo> {
    const e: EngineInfo = { instanceId: spec.instanceId, model: spec.model, gpu: spec.gpu, gpus: spec.gpus, url: "http://fake", pid: 1, state: "starting", startedAtMs: 0, detail: "" };
    this.engines.push(e);
    return new Promise((r) => setImmediate(() => r({ ...e, state: "running" })));
  }
  async stop(id: string): Promise<EngineInfo | undefined> {
    const e = this.engines.find((x) => x.instanceId === id);
    if (e !== undefined) e.state = "exited";
    return e;
  }
  list(): EngineInfo[] {
    return this.engines.map((e) => ({ ...e }));
  }
  async close(): Promise<void> {}
}

let agent: NodeAgent | undefined;
afterEach(async () => {
  await agent?.close();
  agent = undefined;
});

function open(host: NodeEngineHost | undefined, gpuSlots = 3) {
  agent = NodeAgent.open({ nodeId: "n", dataHost: "127.0.0.1", transport: "tcp", log: silentLogger, gpuSlots, gpuType: "h100-80gb", region: "r", ...(host ? { engines: host } : {}) });
  void agent.load({ model: "m", totalBytes: 1024, blockCount: 2, fill: "pattern", seed: 1 });
  return agent;
}

const spec = (instanceId: string, gpus: number): EngineSpec => ({ instanceId, model: "m", gpu: "h100-80gb", gpus });

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a throw");
}

describe("NodeAgent engine rules", () => {
  it("two concurrent starts cannot both take the last slots", async () => {
    const host = new FakeHost();
    const a = open(host);
    const first = a.startEngine(spec("i1", 2));
    const err = thrown(() => a.startEngine(spec("i2", 2)));
    expect(isTidegateError(err, "resource_exhausted"), String(err)).toBe(true);
    expect(err.message).toBe("cannot start i2: it needs 2 GPU(s) and node n has 1 of 3 free (i1: 2)");
    expect((await first).state).toBe("running");
    expect(host.engines).toHaveLength(1);
  });

  it("the same id is idempotent while it runs, a conflict with another shape, and startable again once exited", async () => {
    const host = new FakeHost();
    const a = open(host);
    await a.startEngine(spec("i1", 1));
    expect(await a.startEngine(spec("i1", 1))).toMatchObject({ instanceId: "i1", pid: 1 });
    expect(host.engines).toHaveLength(1);
    expect(thrown(() => a.startEngine(spec("i1", 2))).message).toMatch(/instance i1 already runs on node n as m on 1 × h100-80gb; stop it first/);
    await a.stopEngine("i1", 0);
    await a.startEngine(spec("i1", 3));
    expect(host.engines.map((e) => e.gpus)).toEqual([1, 3]);
  });

  it("announces its node, stores and engines", async () => {
    const a = open(new FakeHost());
    a.setGrpcAddress("127.0.0.1:9");
    await a.startEngine(spec("i1", 1));
    expect(a.announcement()).toMatchObject({ nodeId: "n", grpcAddress: "127.0.0.1:9", region: "r", gpuType: "h100-80gb", gpuSlots: 3, stores: [{ model: "m", blockCount: 2, totalBytes: 1024, present: 2 }], engines: [{ instanceId: "i1" }] });
  });

  it("without an engine host: refused, and the agent still loads and announces", () => {
    const a = open(undefined);
    const err = thrown(() => a.startEngine(spec("i1", 1)));
    expect(isTidegateError(err, "conflict")).toBe(true);
    expect(err.message).toBe("node n runs no engines (no engine host)");
    expect(a.announcement().engines).toEqual([]);
  });

  for (const [bad, message] of [
    [{ ...spec("i 1", 1) }, /instance_id must be 1-128 of/],
    [{ ...spec("i1", 0) }, /gpus must be an integer ≥ 1, got 0/],
    [{ ...spec("i1", 1), timeScale: 0 }, /time_scale must be in \(0, 1000\], got 0/],
    [{ ...spec("i1", 1), commandTemplate: "x {nope}" }, /unknown placeholder \{nope\}/],
  ] as const)
    it(`rejects ${JSON.stringify(bad)}`, () => {
      const err = thrown(() => open(new FakeHost()).startEngine(bad));
      expect(isTidegateError(err, "invalid_request"), String(err)).toBe(true);
      expect(err.message).toMatch(message);
    });
});
