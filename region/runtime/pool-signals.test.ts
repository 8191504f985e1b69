import { describe, expect, it } from "vitest";
import { parseConfig } from "../../core/config.js";
import { poolCapacity } from "../../core/perf/pd-capacity.js";
import type { InstanceRecord } from "../actuator/port.js";
import { PoolSignals } from "./pool-signals.js";

const ep = { model: "llama2-70b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 4 };
const config = parseConfig({
  models: [{ name: "llama2-70b", gpusPerInstance: { "h100-80gb": 4 } }],
  regions: [{ name: "r", gpus: [{ type: "h100-80gb", count: 32 }], endpoints: [{ ...ep, role: "prefill" }, { ...ep, role: "decode" }] }],
  controller: { actuator: "sim" },
  slo: { ttftMs: 1000, tpotMs: 50 },
});
const inst = (id: string, role: "prefill" | "decode", state: InstanceRecord["state"] = "serving"): InstanceRecord => ({ id, region: "r", gpu: "h100-80gb", gpus: 4, model: "llama2-70b", state, enteredAtMs: 0, role });

describe("PoolSignals (Dynamo's per-role load)", () => {
  it("a pool's utilization is its role's tokens/s over its serving engines' capacity at the SLO, for the window's request sizes", () => {
    let demand = { requestsPerS: 2, promptTokensPerS: 4000, outputTokensPerS: 400 };
    const world = [inst("p1", "prefill"), inst("p2", "prefill"), inst("p3", "prefill", "loading"), inst("d1", "decode")];
    const s = new PoolSignals(config, { demandRates: () => demand }, { instances: () => world });
    // ISL 2,000 and OSL 200 rounded to 1/8 of their power of two: 2,048 and 208.
    const cap = poolCapacity("llama2-70b", "h100-80gb", 4, { ttftMs: 1000, tpotMs: 50 }, { promptTokens: 2048, outputTokens: 208 });
    const p = s.signals("llama2-70b", "h100-80gb", "prefill");
    expect(p.utilization).toBeCloseTo(4000 / (2 * cap.prefillTokensPerS), 9); // the loading one does not count
    expect(p.observedTokensPerS).toBe(4400); // the model's demand, the forecast's unit
    const d = s.signals("llama2-70b", "h100-80gb", "decode");
    expect(d.utilization).toBeCloseTo(400 / cap.decodeTokensPerS, 9);
    // No serving decode engine: full.
    world.splice(3, 1);
    expect(s.signals("llama2-70b", "h100-80gb", "decode").utilization).toBe(1);
    // No demand: the last sizes' capacity stands, utilization 0.
    demand = { requestsPerS: 0, promptTokensPerS: 0, outputTokensPerS: 0 };
    expect(s.signals("llama2-70b", "h100-80gb", "prefill").utilization).toBe(0);
  });
});
