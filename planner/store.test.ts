import { describe, expect, it } from "vitest";
import { useTestRedis } from "../test/helpers/redis-fixture.js";
import type { PlanReport } from "./report.js";
import { MemoryPlanStore, RedisPlanStore, type PlanStore } from "./store.js";

const redis = useTestRedis();

const report = (decisionId: number): PlanReport => ({
  id: `plan-${decisionId}`, decisionId, madeAtMs: decisionId * 1000, intervalMs: 1000, advisory: false, alpha: 0.8, beta: 0.2, forecasts: [],
  solver: { path: "mip", status: "optimal", objective: 1, bound: 1, gap: 0, solveMs: 1, endpoints: 1 },
  actions: [], spot: [], cost: { holdPerInterval: 1, starts: 0, total: 1 }, unmet: [], warnings: [], acks: [],
});

describe.each([
  ["memory", () => new MemoryPlanStore(3)],
  ["redis", () => {
    const p = redis.prefix("plans");
    return new RedisPlanStore(redis.client, p, 3);
  }],
] as [string, () => PlanStore][])("PlanStore (%s)", (_n, make) => {
  it("keeps the newest reports, newest first, and finds them by id", async () => {
    const s = make();
    for (let d = 1; d <= 5; d++) await s.put(report(d));
    expect((await s.list()).map((r) => r.decisionId)).toEqual([5, 4, 3]);
    expect((await s.get("plan-4"))?.decisionId).toBe(4);
    expect(await s.get("plan-1")).toBeUndefined();
  });
});

it("Redis keeps no more report keys than it lists", async () => {
  const p = redis.prefix("plans-keys");
  const s = new RedisPlanStore(redis.client, p, 2);
  for (let d = 1; d <= 4; d++) await s.put(report(d));
  expect((await redis.client.keys(`${p}*`)).sort()).toEqual([`${p}plans`, `${p}plans:plan-3`, `${p}plans:plan-4`]);
});
