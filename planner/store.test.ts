import { afterAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useTestRedis } from "../test/helpers/redis-fixture.js";
import { FilePlanStore } from "./file-store.js";
import type { PlanReport } from "./report.js";
import { MemoryPlanStore, RedisPlanStore, type PlanStore } from "./store.js";

const redis = useTestRedis();
const root = mkdtempSync(join(tmpdir(), "tidegate-plan-store-"));
let dirs = 0;
const freshDir = () => join(root, `store-${++dirs}`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const report = (decisionId: number): PlanReport => ({
  id: `plan-${decisionId}`, decisionId, madeAtMs: decisionId * 1000, intervalMs: 1000, advisory: false, alpha: 0.8, beta: 0.2, forecasts: [],
  solver: { path: "mip", status: "optimal", objective: 1, bound: 1, gap: 0, solveMs: 1, endpoints: 1 },
  actions: [], spot: [], cost: { holdPerInterval: 1, starts: 0, total: 1 }, unmet: [], warnings: [], acks: [],
});

describe.each([
  ["memory", async () => new MemoryPlanStore(3)],
  ["redis", async () => {
    const p = redis.prefix("plans");
    return new RedisPlanStore(redis.client, p, 3);
  }],
  ["file", () => FilePlanStore.open(freshDir(), 3)],
] as [string, () => Promise<PlanStore>][])("PlanStore (%s)", (_n, make) => {
  it("keeps the newest reports, newest first, and finds them by id", async () => {
    const s = await make();
    for (let d = 1; d <= 5; d++) await s.put(report(d));
    expect((await s.list()).map((r) => r.decisionId)).toEqual([5, 4, 3]);
    expect((await s.get("plan-4"))?.decisionId).toBe(4);
    expect(await s.get("plan-1")).toBeUndefined();
  });
  it("replaces a report with the same id in place", async () => {
    const s = await make();
    for (let d = 1; d <= 2; d++) await s.put(report(d));
    await s.put({ ...report(1), review: { state: "rejected", by: "Ana", atMs: 5 } });
    expect((await s.list()).map((r) => [r.id, r.review?.state])).toEqual([["plan-2", undefined], ["plan-1", "rejected"]]);
  });
});

it("Redis keeps no more report keys than it lists", async () => {
  const p = redis.prefix("plans-keys");
  const s = new RedisPlanStore(redis.client, p, 2);
  for (let d = 1; d <= 4; d++) await s.put(report(d));
  expect((await redis.client.keys(`${p}*`)).sort()).toEqual([`${p}plans`, `${p}plans:plan-3`, `${p}plans:plan-4`]);
});

describe("FilePlanStore", () => {
  it("serves the same plans after it is reopened on its directory, and keeps one file per plan it lists", async () => {
    const dir = freshDir();
    const first = await FilePlanStore.open(dir, 3);
    for (let d = 1; d <= 4; d++) await first.put(report(d));
    await first.put({ ...report(4), review: { state: "approved", by: "Ana", atMs: 9 } });
    expect(readdirSync(dir).sort()).toEqual(["plan-2.json", "plan-3.json", "plan-4.json"]);
    const again = await FilePlanStore.open(dir, 3);
    expect(await again.list()).toEqual(await first.list());
    expect((await again.get("plan-4"))?.review?.state).toBe("approved");
    expect(again.opened).toMatchObject({ plans: 3, setAside: [] });
  });

  it("sets a damaged file aside, keeps every other plan, and drops a temporary file a crash left", async () => {
    const dir = freshDir();
    const s = await FilePlanStore.open(dir);
    for (let d = 1; d <= 3; d++) await s.put(report(d));
    writeFileSync(join(dir, "plan-2.json"), '{"id":"plan-2","decisionId":2,"madeAt'); // cut short
    writeFileSync(join(dir, "plan-9.json"), JSON.stringify(report(8))); // a report under another report's name
    writeFileSync(join(dir, ".plan-4.json.tmp-123-1"), "{");
    const again = await FilePlanStore.open(dir);
    expect((await again.list()).map((r) => r.id)).toEqual(["plan-3", "plan-1"]);
    expect(again.opened.setAside.map((a) => [a.file, a.movedTo])).toEqual([["plan-2.json", "plan-2.json.damaged-1"], ["plan-9.json", "plan-9.json.damaged-1"]]);
    expect(again.opened.setAside[0]!.why).toMatch(/^not JSON/);
    expect(again.opened.setAside[1]!.why).toContain('its id "plan-8" is not its file name');
    expect(readFileSync(join(dir, "plan-2.json.damaged-1"), "utf8")).toContain('"madeAt'); // moved, not deleted
    expect(existsSync(join(dir, ".plan-4.json.tmp-123-1"))).toBe(false);
    expect((await FilePlanStore.open(dir)).opened.setAside).toEqual([]);
  });

  it("refuses an id that is not a plain file name", async () => {
    const s = await FilePlanStore.open(freshDir());
    await expect(s.put({ ...report(1), id: "../escape" })).rejects.toThrow(RangeError);
    expect(await s.list()).toEqual([]);
  });
});
