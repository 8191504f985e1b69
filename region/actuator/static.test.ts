import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { parseConfig } from "../../core/config.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { buildRegion } from "../runtime/build-region.js";
import { fixedEngines } from "../runtime/static-host.js";
import { instanceSlots, type EngineFactory } from "./static.js";

function config(engines: unknown) {
  return parseConfig({
    models: [{ name: "llama3.1-8b", gpusPerInstance: { "h100-80gb": 2, "a100-80gb": 4 } }],
    regions: [
      {
        name: "r1",
        gpus: [
          { type: "h100-80gb", count: 8 },
          { type: "a100-80gb", count: 8 },
        ],
        endpoints: [
          { model: "llama3.1-8b", gpu: "h100-80gb", instances: 2 },
          { model: "llama3.1-8b", gpu: "a100-80gb", instances: 1 },
        ],
      },
    ],
    engines,
  });
}

describe("region instance slots", () => {
  it("makes `instances` sim slots per endpoint with the model's tensor parallelism", () => {
    const slots = instanceSlots(config({ kind: "sim" }), "r1");
    expect(slots.map((s) => [s.instanceId, s.tp])).toEqual([
      ["r1/llama3.1-8b/h100-80gb/0", 2],
      ["r1/llama3.1-8b/h100-80gb/1", 2],
      ["r1/llama3.1-8b/a100-80gb/0", 4],
    ]);
  });

  it("deals region/model URLs over the model's endpoints, the rest to the last; region/model/gpu wins", () => {
    const shared = instanceSlots(config({ kind: "openai-http", urls: { "r1/llama3.1-8b": ["http://a", "http://b", "http://c", "http://d"] } }), "r1");
    expect(shared.map((s) => `${s.gpu}=${s.url}`)).toEqual(["h100-80gb=http://a", "h100-80gb=http://b", "a100-80gb=http://c", "a100-80gb=http://d"]);
    const specific = instanceSlots(config({ kind: "openai-http", urls: { "r1/llama3.1-8b/a100-80gb": ["http://x"], "r1/llama3.1-8b": ["http://y"] } }), "r1");
    expect(specific.map((s) => `${s.gpu}=${s.url}`)).toEqual(["h100-80gb=http://y", "a100-80gb=http://x"]);
  });

  it("names engines.urls when an endpoint has no URL, and rejects an unknown region", () => {
    expect(() => instanceSlots(config({ kind: "openai-http", urls: { "r1/llama3.1-8b": ["http://only-one"] } }), "r1")).toThrow(/engines\.urls: no URL for r1\/llama3\.1-8b\/a100-80gb/);
    expect(() => instanceSlots(config({ kind: "sim" }), "nowhere")).toThrow(/unknown region "nowhere"/);
  });

  it("builds a serving gateway from the factory and closes what it made when one engine fails", async () => {
    const made: FakeEngine[] = [];
    const clock = new VirtualClock();
    const region = (engines: EngineFactory) => buildRegion({ config: config({ kind: "sim" }), region: "r1", clock, host: fixedEngines(engines) });
    const ok = region(async (s) => {
      const e = new FakeEngine({ instanceId: s.instanceId, model: s.model });
      made.push(e);
      return e;
    });
    await ok.ready();
    const gw = ok.gateway;
    expect(gw.instances().map((i) => `${i.endpointId}:${i.state}`)).toEqual(["llama3.1-8b/h100-80gb:serving", "llama3.1-8b/h100-80gb:serving", "llama3.1-8b/a100-80gb:serving"]);
    expect(ok.actuator.engines()).toEqual(made);
    const closed: string[] = [];
    let n = 0;
    const failing = region(async (s) => {
      if (n++ === 1) throw new Error("engine 2 failed to start");
      const e = new FakeEngine({ instanceId: s.instanceId, model: s.model });
      e.close = async () => void closed.push(s.instanceId);
      return e;
    });
    await expect(failing.ready()).rejects.toThrow(/engine 2 failed/);
    expect(closed).toEqual(["r1/llama3.1-8b/h100-80gb/0", "r1/llama3.1-8b/a100-80gb/0"]);
    expect(failing.gateway.instances()).toEqual([]);
    await ok.close();
    await failing.close();
  });
});
