import { describe, expect, it } from "vitest";
import { routingUtilization } from "./utilization.js";

describe("routingUtilization", () => {
  it("subtracts the preemptible part, never below 0; absent, non-finite or non-positive parts subtract nothing", () => {
    expect(routingUtilization({ effectiveMemoryUtilization: 0.85, preemptibleMemoryUtilization: 0.6 })).toBeCloseTo(0.25, 12);
    expect(routingUtilization({ effectiveMemoryUtilization: 0.5, preemptibleMemoryUtilization: 0.7 })).toBe(0);
    expect(routingUtilization({ effectiveMemoryUtilization: 0.5 })).toBe(0.5);
    expect(routingUtilization({ effectiveMemoryUtilization: 0.5, preemptibleMemoryUtilization: Number.NaN })).toBe(0.5);
    expect(routingUtilization({ effectiveMemoryUtilization: Number.NaN, preemptibleMemoryUtilization: 0.2 })).toBeNaN();
  });
});
