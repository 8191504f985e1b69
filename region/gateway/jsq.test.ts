import { describe, expect, it } from "vitest";
import { pickEndpoint } from "./jsq.js";
import { JSQ_POLICY, RoutingPolicy } from "./scoring/plugins.js";

describe("in-region routing", () => {
  it("picks the serving instance with the fewest remaining tokens", () => {
    const inst = [
      { instanceId: "a", remainingTokens: 900, serving: true },
      { instanceId: "b", remainingTokens: 100, serving: false },
      { instanceId: "c", remainingTokens: 300, serving: true },
      { instanceId: "d", remainingTokens: 300, serving: true },
    ];
    const jsq = new RoutingPolicy(JSQ_POLICY);
    const none = { blockHashes: [], prefixBlocks: () => 0 };
    expect(jsq.choose(none, inst)?.instanceId).toBe("c");
    expect(jsq.choose(none, [{ instanceId: "x", remainingTokens: 0, serving: false }])).toBeUndefined();
  });

  it("picks the least-utilized endpoint that has a serving instance", () => {
    const eps = [
      { endpointId: "h100", effectiveMemoryUtilization: 0.6, instances: [{ instanceId: "1", remainingTokens: 0, serving: true }] },
      { endpointId: "a100", effectiveMemoryUtilization: 0.1, instances: [{ instanceId: "2", remainingTokens: 0, serving: false }] },
      { endpointId: "h100b", effectiveMemoryUtilization: 0.4, instances: [{ instanceId: "3", remainingTokens: 0, serving: true }] },
    ];
    expect(pickEndpoint(eps)?.endpointId).toBe("h100b");
  });
});
