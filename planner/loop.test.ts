import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import type { RegionLink, RegionTargets, TargetsAck } from "../core/ports.js";
import { useTestRedis } from "../test/helpers/redis-fixture.js";
import { MemoryLeaderLock, RedisLeaderLock, type LeaderLock } from "./leader.js";
import { PlannerLoop } from "./loop.js";
import type { PlanReport } from "./report.js";
import { MemoryPlanStore } from "./store.js";

const redis = useTestRedis();

describe("RedisLeaderLock", () => {
  it("one holder at a time, renewal, expiry, release, fenced monotonic decision ids", async () => {
    const p = redis.prefix("lock");
    const lock = new RedisLeaderLock(redis.client, p);
    expect(await lock.acquire("a", 300)).toBe("acquired");
    expect(await lock.acquire("b", 300)).toBe("held_by_other");
    expect(await lock.acquire("a", 300)).toBe("renewed");
    expect(await lock.nextDecisionId("a")).toBe(1);
    expect(await lock.nextDecisionId("b")).toBeUndefined();
    expect(await lock.nextDecisionId("a")).toBe(2);
    expect(await lock.release("b")).toBe(false);
    await new Promise((r) => setTimeout(r, 400)); // the lock's expiry is Redis's own clock
    expect(await lock.acquire("b", 5000)).toBe("acquired");
    expect(await lock.nextDecisionId("a")).toBeUndefined();
    expect(await lock.nextDecisionId("b")).toBe(3);
    expect(await lock.release("b")).toBe(true);
    expect(await lock.acquire("a", 5000)).toBe("acquired");
  });
});

describe("MemoryLeaderLock", () => {
  it("expires on the injected clock and fences decision ids", async () => {
    const clock = new VirtualClock(0);
    const lock = new MemoryLeaderLock(clock);
    expect(await lock.acquire("a", 1000)).toBe("acquired");
    expect(await lock.acquire("b", 1000)).toBe("held_by_other");
    expect(await lock.nextDecisionId("a")).toBe(1);
    clock.advanceToSync(999);
    expect(await lock.acquire("b", 1000)).toBe("held_by_other");
    clock.advanceToSync(1000);
    expect(await lock.nextDecisionId("a")).toBeUndefined();
    expect(await lock.acquire("b", 1000)).toBe("acquired");
    expect(await lock.nextDecisionId("b")).toBe(2);
    expect(await lock.release("a")).toBe(false);
    expect(await lock.release("b")).toBe(true);
  });
});

class FakeLink implements RegionLink {
  readonly received: RegionTargets[] = [];
  private latest = 0;
  constructor(readonly region: string) {}
  subscribe() {
    return () => {};
  }
  async *dispatch(): AsyncIterable<never> {
    throw new Error("not used");
  }
  submit(): void {
    throw new Error("not used");
  }
  async instances(): Promise<import("../core/ports.js").RegionInstances> {
    return { region: this.region, actuator: "static", instances: [], nodes: [], failures: [], actions: [] };
  }

  async sendTargets(t: RegionTargets): Promise<TargetsAck> {
    this.received.push(t);
    const accepted = t.decisionId > this.latest;
    if (accepted) this.latest = t.decisionId;
    return { region: this.region, decisionId: t.decisionId, accepted };
  }
  async close() {}
}

function fakeReport(decisionId: number, advisory: boolean): PlanReport {
  return {
    id: `plan-${decisionId}`, decisionId, madeAtMs: 0, intervalMs: 1000, advisory, alpha: 0.8, beta: 0.2, forecasts: [],
    solver: { path: "mip", status: "optimal", objective: 1, bound: 1, gap: 0, solveMs: 1, endpoints: 1 },
    actions: [{ model: "m", region: "east", gpu: "g", current: 1, target: 2, reclaimSameModel: 0, reclaimOtherModel: 0, newInstances: 1, donate: 0 }],
    spot: [], cost: { holdPerInterval: 1, starts: 0, total: 1 }, unmet: [], warnings: [], acks: [],
  };
}

describe.each([
  ["memory", (clock: VirtualClock) => new MemoryLeaderLock(clock)],
  ["redis", () => {
    const p = redis.prefix("loop");
    return new RedisLeaderLock(redis.client, p);
  }],
] as [string, (c: VirtualClock) => LeaderLock][])("PlannerLoop (%s lock)", (_n, makeLock) => {
  it("one leader sends targets with increasing decision ids and records the acks; advisory sends nothing", async () => {
    const clock = new VirtualClock(0);
    const lock = makeLock(clock);
    const links = [new FakeLink("east"), new FakeLink("west")];
    const stores = [new MemoryPlanStore(), new MemoryPlanStore()];
    const loops = ["p1", "p2"].map((holder, i) => new PlannerLoop({ clock, intervalMs: 1000, lockTtlMs: 60_000, lock, holder, advisory: false, links, store: stores[i]!, plan: async (id) => fakeReport(id, false) }));
    for (let round = 0; round < 3; round++) for (const l of loops) await l.tick();
    expect(loops[0]!.led).toBe(3);
    expect(loops[1]!.followed).toBe(3);
    expect(links[0]!.received.map((t) => t.decisionId)).toEqual([1, 2, 3]);
    expect(links[0]!.received[0]!.endpoints).toEqual([{ model: "m", gpu: "g", instances: 2, floorInstances: 2, forecastTokensPerS: 0 }]);
    expect((await stores[0]!.list())[0]!.acks).toEqual([{ region: "east", decisionId: 3, accepted: true }, { region: "west", decisionId: 3, accepted: true }]);
    await loops[0]!.stop(); // releases: the follower takes over with the next id
    await loops[1]!.tick();
    expect(loops[1]!.led).toBe(1);
    expect(links[1]!.received.at(-1)!.decisionId).toBe(4);

    const advisory = new PlannerLoop({ clock, intervalMs: 1000, lock: makeLock(clock), holder: "adv", advisory: true, links: [new FakeLink("east")], store: new MemoryPlanStore(), plan: async (id) => fakeReport(id, true) });
    await advisory.tick();
    expect(advisory.led).toBe(1);
    await loops[1]!.stop();
    await advisory.stop();
  });

  it("runs on the injected clock", async () => {
    const clock = new VirtualClock(0);
    const link = new FakeLink("east");
    const loop = new PlannerLoop({ clock, intervalMs: 1000, lock: makeLock(clock), holder: "p", advisory: false, links: [link], store: new MemoryPlanStore(), plan: async (id) => fakeReport(id, false) });
    loop.start();
    for (let k = 1; k <= 3; k++) {
      await clock.advanceTo(k * 1000);
      for (let i = 0; i < 100 && link.received.length < k; i++) await new Promise((r) => setTimeout(r, 5));
      expect(link.received.length).toBe(k); // one round per interval, no earlier
    }
    expect(link.received.map((t) => t.decisionId)).toEqual([1, 2, 3]);
    await loop.stop();
  });
});

describe("PlannerLoop failover", () => {
  it("a follower takes a dead leader's lock within its expiry and a quarter, not at its next round", async () => {
    const clock = new VirtualClock(0);
    const lock = new MemoryLeaderLock(clock); // Redis expires keys on its own clock: the virtual clock cannot age them
    const links = [new FakeLink("east")];
    const mk = (holder: string) => new PlannerLoop({ clock, intervalMs: 10_000, lockTtlMs: 2000, lock, holder, advisory: false, links, store: new MemoryPlanStore(), plan: async (id) => fakeReport(id, false) });
    const [a, b] = [mk("a"), mk("b")];
    await a.tick(); // a leads from 0 (lock until 2000)
    await b.tick(); // b finds a leading: a follower
    expect(b.followed).toBe(1);
    b.start();
    a.start();
    // a "dies" at once: its timers stop, its lock is not released (no stop()), so it runs out at 2000
    (a as unknown as { timer: { cancel(): void } }).timer.cancel();
    (a as unknown as { watch?: { cancel(): void } }).watch?.cancel();
    let tookAt: number | undefined;
    for (let t = 100; t <= 4000 && tookAt === undefined; t += 100) {
      await clock.advanceTo(t);
      if (b.led > 0) tookAt = t;
    }
    // b's watch runs every 500 ms: the lock that expired at 2000 is taken by 2500, long before b's 10 s round
    expect(tookAt).toBeGreaterThanOrEqual(2000);
    expect(tookAt).toBeLessThanOrEqual(2500);
    expect(links[0]!.received.map((t) => t.decisionId)).toEqual([1, 2]);
    await b.stop();
  });
});

describe("PlanActions (approve, reject, plan now)", () => {
  const make = (clock: VirtualClock, lock: LeaderLock, holder = "p") => {
    const link = new FakeLink("east");
    const store = new MemoryPlanStore();
    const loop = new PlannerLoop({ clock, intervalMs: 1000, lock, holder, advisory: true, links: [link], store, plan: async (id, _prev, trigger) => ({ ...fakeReport(id, true), ...(trigger ? { trigger } : {}) }) });
    return { link, store, loop };
  };

  it("approves only the newest advisory plan, once: sends its targets as not advisory and records who and when", async () => {
    const clock = new VirtualClock(5000);
    const { link, store, loop } = make(clock, new MemoryLeaderLock(clock));
    await loop.tick();
    await loop.tick();
    expect(link.received).toEqual([]);
    await expect(loop.approve("plan-1", "ana")).rejects.toMatchObject({ code: "conflict", message: expect.stringContaining("superseded by plan-2") });
    const r = await loop.approve("plan-2", "ana");
    expect(link.received).toHaveLength(1);
    expect(link.received[0]).toMatchObject({ decisionId: 2, advisory: false, endpoints: [{ model: "m", instances: 2 }] });
    expect(r.review).toEqual({ state: "approved", by: "ana", atMs: 5000 });
    expect(r.acks).toEqual([{ region: "east", decisionId: 2, accepted: true }]);
    expect((await store.get("plan-2"))!.review?.state).toBe("approved");
    expect((await store.list()).map((x) => x.id)).toEqual(["plan-2", "plan-1"]);
    await expect(loop.reject("plan-2", "bo")).rejects.toMatchObject({ code: "conflict" });
    await expect(loop.approve("nope", "ana")).rejects.toMatchObject({ code: "not_found" });
  });

  it("rejects without sending; plans now with a manual trigger, and refuses where another replica leads", async () => {
    const clock = new VirtualClock(0);
    const lock = new MemoryLeaderLock(clock);
    const { link, loop } = make(clock, lock);
    await loop.tick();
    expect((await loop.reject("plan-1", "bo")).review).toMatchObject({ state: "rejected", by: "bo" });
    expect(link.received).toEqual([]);
    const now = await loop.planNow("ana");
    expect(now).toMatchObject({ decisionId: 2, trigger: { kind: "manual", by: "ana" } });
    const other = make(clock, lock, "q").loop;
    await expect(other.planNow("ana")).rejects.toMatchObject({ code: "conflict", message: expect.stringContaining("leader") });
  });
});

describe("PlannerLoop over a store that outlives it (tidegate dev's data directory)", () => {
  it("a restarted loop continues the stored decision ids and hands each plan the stored reports", async () => {
    const clock = new VirtualClock(0);
    const store = new MemoryPlanStore(); // stands for the files a restart reopens (file-store.ts; store.test.ts)
    const seen: string[][] = [];
    const mk = () => new PlannerLoop({ clock, intervalMs: 1000, lock: new MemoryLeaderLock(clock), holder: "dev", advisory: false, links: [new FakeLink("east")], store, plan: async (id, prev, _t, recent) => (seen.push([prev?.id ?? "-", ...(recent ?? []).map((r) => r.id)]), fakeReport(id, false)) });
    const first = mk();
    await first.tick();
    await first.tick();
    await first.stop();
    const again = mk(); // a new process: a new in-memory lock whose counter starts at 0
    await again.tick();
    await again.tick();
    expect((await store.list()).map((r) => r.id)).toEqual(["plan-4", "plan-3", "plan-2", "plan-1"]);
    expect(seen).toEqual([["-"], ["plan-1", "plan-1"], ["plan-2", "plan-2", "plan-1"], ["plan-3", "plan-3", "plan-2", "plan-1"]]);
    await again.stop();
  });
});
