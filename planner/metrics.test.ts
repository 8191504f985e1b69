import { describe, expect, it } from "vitest";
import { createRegistry } from "../core/metrics.js";
import { ackSummary } from "./loop.js";
import { PlannerMetrics } from "./metrics.js";
import type { PlanReport } from "./report.js";

/** The parts of a report the metrics read. */
function report(over: Partial<PlanReport>): PlanReport {
  return { madeAtMs: 3_600_000, advisory: false, actions: [], forecasts: [], acks: [], solver: { status: "optimal" }, ...over } as unknown as PlanReport;
}

describe("planner metrics and logs", () => {
  it("exports targets summed over GPU types, the point forecast, plans and acks; every (model, region) starts at 0", async () => {
    const registry = createRegistry(false);
    const m = new PlannerMetrics(registry, ["m1"], ["r1", "r2"]);
    const before = await registry.metrics();
    expect(before).toContain('tidegate_planner_target_instances{model="m1",region="r2"} 0');
    expect(before).toContain('tidegate_planner_target_acks_total{region="r2",outcome="refused"} 0');
    m.observe(
      report({
        actions: [
          { model: "m1", region: "r1", gpu: "h100-80gb", target: 2 },
          { model: "m1", region: "r1", gpu: "a100-80gb", target: 1 },
        ] as never,
        forecasts: [{ model: "m1", region: "r1", pointDemandTokensPerS: 1234.5 }] as never,
        acks: [
          { region: "r1", decisionId: 7, accepted: true },
          { region: "r2", decisionId: 7, accepted: false, error: "stale decision" },
        ],
      }),
    );
    const text = await registry.metrics();
    expect(text).toContain('tidegate_planner_target_instances{model="m1",region="r1"} 3');
    expect(text).toContain('tidegate_planner_forecast_tokens_per_second{model="m1",region="r1"} 1234.5');
    expect(text).toContain('tidegate_planner_plans_total{status="optimal",advisory="false"} 1');
    expect(text).toContain('tidegate_planner_target_acks_total{region="r2",outcome="refused"} 1');
    expect(text).toContain("tidegate_planner_last_plan_timestamp_seconds 3600");
  });

  it("summarises acks as sent, accepted and the refusals with their reasons (not a bare count)", () => {
    const acks = [
      { region: "r1", decisionId: 3, accepted: false, error: "unreachable" },
      { region: "r2", decisionId: 3, accepted: false },
      { region: "r3", decisionId: 3, accepted: false, error: "older decision" },
    ];
    expect(ackSummary(acks)).toEqual({ sent: 3, accepted: 0, refused: ["r1: unreachable", "r2", "r3: older decision"] });
  });
});
