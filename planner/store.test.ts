import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { cleanupPrefix, startTestRedis, testPrefix, type TestRedis } from "../test/helpers/redis.js";
import type { PlanReport } from "./report.js";
import { MemoryPlanStore, RedisPlanStore, type PlanStore } from "./store.js";

let redis: TestRedis;
let client: Redis;
const prefixes: string[] = [];
beforeAll(async () => {
  redis = await startTestRedis();
  client = new Redis(redis.url);
});
afterAll(async () => {
  for (const p of prefixes) await cleanupPrefix(redis.url, p);
  client.disconnect();
  await redis.stop();
});

const report = (decisionId: number): PlanReport => ({
  id: `plan-${decisionId}`, decisionId, madeAtMs: decisionId * 1000, intervalMs: 1000, advisory: false, alpha: 0.8, beta: 0.2, forecasts: [],
  solver: { path: "mip", status: "optimal", objective: 1, bound: 1, gap: 0, solveMs: 1, endpoints: 1 },
  actions: [], spot: [], cost: { holdPerInterval: 1, starts: 0, total: 1 }, unmet: [], warnings: [], acks: [],
});

describe.each([
  ["memory", () => new MemoryPlanStore(3)],
  ["redis", () => {
    const p = testPrefix("plans");
    prefixes.push(p);
    return new RedisPlanStore(client, p, 3);
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
  const p = testPrefix("plans-keys");
  prefixes.push(p);
  const s = new RedisPlanStore(client, p, 2);
  for (let d = 1; d <= 4; d++) await s.put(report(d));
  expect((await client.keys(`${p}*`)).sort()).toEqual([`${p}plans`, `${p}plans:plan-3`, `${p}plans:plan-4`]);
});
