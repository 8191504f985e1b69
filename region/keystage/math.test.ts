import { describe, expect, it } from "vitest";
import { StageCache, diskStartMs, startMs } from "./cache.js";
import { correctAndSmooth, waterfill, type ScalingMode } from "./corrector.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import type { KeyStageParams } from "../strategies/keystage.js";
import { interArrivalCv, propagateCv, smoothingBeta } from "./cv.js";
import { Pid } from "./pid.js";
import { disperse, klDivergence, placeReplica } from "./placement.js";
import { erlangC } from "../../core/perf/slo-capacity.js";
import { ggcWaitMs, mmcDelayMs, replicasForTarget } from "./queueing.js";

describe("M/M/c (QUART §5.1 Eq. 1)", () => {
  it("Erlang C matches the textbook call-centre value: 10 agents, 8 Erlangs → 40.9% wait", () => {
    expect(erlangC(10, 8)).toBeCloseTo(0.4092, 4);
    expect(erlangC(1, 0.5)).toBeCloseTo(0.5, 12); // M/M/1: P(wait) = ρ
    expect(erlangC(2, 1)).toBeCloseTo(1 / 3, 12);
    expect(erlangC(3, 3)).toBe(1); // overloaded
  });

  it("the stage delay is wait + service: M/M/1 at ρ = 0.5 is 1/(μ − λ); M/M/2 at λ = μ = 1 is 4/3 s", () => {
    expect(mmcDelayMs(0.5, 1, 1)).toBeCloseTo(2000, 9);
    expect(mmcDelayMs(1, 1, 2)).toBeCloseTo(4000 / 3, 9);
    expect(mmcDelayMs(2, 1, 2)).toBe(Number.POSITIVE_INFINITY);
    expect(mmcDelayMs(0, 2, 0)).toBe(500);
    // Allen–Cunneen: CV 1 arrivals and service give back the M/M/c wait; CV 3 arrivals five times it.
    expect(ggcWaitMs(1, 1, 2, 1, 1)).toBeCloseTo(1000 / 3, 9);
    expect(ggcWaitMs(1, 1, 2, 3, 1)).toBeCloseTo((5 * 1000) / 3, 9);
  });

  it("replicasForTarget picks the fewest replicas under the target", () => {
    // λ = 6, μ = 1: 7 replicas give ≈ 1.51 s, 8 give ≈ 1.15 s.
    expect(mmcDelayMs(6, 1, 7)).toBeGreaterThan(1500);
    expect(mmcDelayMs(6, 1, 8)).toBeLessThan(1500);
    expect(replicasForTarget(6, 1, 1500, 100)).toBe(8);
    expect(replicasForTarget(6, 1, 1500, 5)).toBe(5); // capped
    expect(replicasForTarget(6, 1, 1500, 100, { arrival: 4, service: 1 })).toBeGreaterThan(8); // bursty needs more
  });
});

/** A stage whose arrival rate steps from 2 to 6 req/s at tick 10 (μ = 1 req/s a replica, target 1.5 s), corrected
 * once a second by Eq. 2–3 as the scaler does (at least one replica per tick while key; no reclaim). */
function stepResponse(kp: number, ki: number, kd: number): number[] {
  const pid = new Pid({ kp, ki, kd });
  let r = 3;
  const trace: number[] = [];
  for (let t = 0; t < 60; t++) {
    const lambda = t < 10 ? 2 : 6;
    const delay = mmcDelayMs(lambda, 1, r);
    if (delay > 1500) r += Math.max(1, Math.round(pid.update(pid.error(delay, 1500), 1)));
    else pid.reset();
    trace.push(r);
  }
  return trace;
}

describe("PID replica corrector (Eq. 2–3)", () => {
  it("a step from 2 to 6 req/s settles within 5 s at no more than the optimum + 1 replica and never oscillates", () => {
    const best = replicasForTarget(6, 1, 1500, 100); // 8
    const r = stepResponse(1, 0.1, 0);
    expect(r.slice(0, 10).every((x) => x === 3)).toBe(true); // 3 replicas meet the target at 2 req/s
    expect(r[15]).toBeGreaterThanOrEqual(best);
    expect(Math.max(...r)).toBeLessThanOrEqual(best + 1); // stated overshoot bound
    const settled = r.slice(15);
    expect(new Set(settled).size).toBe(1); // flat after settling
  });

  it("the bound is a real check: a gain of 20 overshoots by more than one replica", () => {
    const best = replicasForTarget(6, 1, 1500, 100);
    expect(Math.max(...stepResponse(20, 0, 0))).toBeGreaterThan(best + 1);
  });

  it("clamps the error of an overloaded stage and resets its integral", () => {
    const pid = new Pid({ kp: 1, ki: 1, kd: 0 }, { errorCap: 4, integralCap: 10 });
    expect(pid.error(Number.POSITIVE_INFINITY, 1000)).toBe(4);
    expect(pid.error(0, 1000)).toBe(-1);
    expect(pid.update(4, 1)).toBe(8); // 1·4 + 1·4
    expect(pid.update(4, 1)).toBe(12); // integral 8
    pid.reset();
    expect(pid.update(1, 1)).toBe(2);
    expect(() => pid.update(1, 0)).toThrow(RangeError);
  });
});

describe("CV (§3.1, §5.2)", () => {
  it("inter-arrival CV, propagation and β", () => {
    expect(interArrivalCv([0, 10, 20, 30])).toBe(0);
    expect(interArrivalCv([0, 0, 10, 10, 20])).toBeCloseTo(1, 9); // gaps 0,10,0,10: mean 5, sd 5
    // An idle stage passes the burst on; a saturated one passes its service CV (with √c damping).
    expect(propagateCv(4, 0.5, 0, 4)).toBeCloseTo(4, 9);
    expect(propagateCv(4, 1, 1, 4)).toBeCloseTo(1, 9);
    expect(propagateCv(4, 0.5, 0.9, 1)).toBeLessThan(4);
    expect(smoothingBeta(0)).toBe(0);
    expect(smoothingBeta(1)).toBe(0.5);
  });
});

describe("water-filled split of a budget (Eq. 1)", () => {
  it("equal demands split evenly; a backlog draws replicas to its stage", () => {
    expect(waterfill([3, 3, 3, 3], [1, 1, 1, 1], 16, 1)).toEqual([4, 4, 4, 4]);
    const w = waterfill([6, 3, 3, 3], [1, 1, 1, 1], 18, 1);
    expect(w.reduce((a, b) => a + b, 0)).toBe(18);
    expect(w[0]).toBeGreaterThan(w[1]!);
  });
});

describe("scale-in (releaseAfterMs; QUART §5.2 reclaim, §8.1's serverless baselines)", () => {
  const params = resolveStrategy("keystage").params as KeyStageParams;
  const idle = { arrivals: 0, windowMs: 10_000, arrivalCv: 0, meanServiceMs: 1000, serviceCv: 0, queue: 0, serving: 0, starting: 0, draining: 0, busy: 0 };
  const pass = (mode: ScalingMode, replicas: number[], nowMs: number, releaseAfterMs: number) =>
    correctAndSmooth({
      stages: replicas.map((r) => ({ obs: { ...idle, serving: r }, replicas: r, lastGrowMs: 0, expectedServiceMs: 1000 })),
      pids: replicas.map(() => new Pid({ kp: 1, ki: 0.1, kd: 0 })),
      params: { ...params, releaseAfterMs },
      mode,
      budgetGpus: 8,
      nowMs,
      dtS: 1,
    }).map((pl) => pl.desired);

  it("an idle stage above its keep gives one replica back per pass once it has not grown for releaseAfterMs", () => {
    expect(pass("key-stage", [3, 2], 70_000, 60_000)).toEqual([2, 1]);
    expect(pass("key-stage", [3, 2], 30_000, 60_000)).toEqual([3, 2]); // grew 30 s ago: kept
    expect(pass("key-stage", [3, 2], 70_000, 0)).toEqual([3, 2]); // 0 holds the budget (the default)
    expect(pass("key-stage", [1, 1], 70_000, 60_000)).toEqual([1, 1]); // r_min stays
  });

  it("whole-pipeline releases one whole pipeline at a time", () => {
    expect(pass("whole-pipeline", [3, 3], 70_000, 60_000)).toEqual([2, 2]);
    expect(pass("whole-pipeline", [3, 3], 30_000, 60_000)).toEqual([3, 3]);
    expect(pass("whole-pipeline", [3, 3], 70_000, 0)).toEqual([3, 3]);
  });
});

describe("dispersed placement (§6.2, Eq. 8–10)", () => {
  it("KL divergence to uniform of a stated row", () => {
    expect(klDivergence([0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3])).toBeCloseTo(Math.log(1.5), 12);
    expect(klDivergence([0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25])).toBe(0);
  });

  it("gradient descent (Eq. 9–10) moves P to the uniform Q over open servers", () => {
    const q = [1 / 3, 1 / 3, 1 / 3, 0];
    const p = disperse([0.45, 0.25, 0.05, 0.25], q);
    expect(klDivergence(p, q)).toBeLessThan(1e-4);
    expect(p[3]).toBe(0);
  });

  it("under contention a key stage goes where key replicas are fewest among servers with free GPUs", () => {
    // Key replicas [2, 1, 0, 1]; free GPUs [1, 2, 3, 0]; no server has 4 free → contention. Uniform over servers
    // 0–2 is 1/3 each; shares now 2/5, 1/5, 0 → the largest deficit is server 2.
    const servers = [
      { freeGpus: 1, keyReplicas: 2, cached: true },
      { freeGpus: 2, keyReplicas: 1, cached: true },
      { freeGpus: 3, keyReplicas: 0, cached: false },
      { freeGpus: 0, keyReplicas: 1, cached: true },
    ];
    expect(placeReplica(servers, { key: true, plentifulFreeGpus: 4 })).toBe(2);
    // With servers 0–1 only open and equal shares, the cached one wins the tie.
    const tie = [
      { freeGpus: 1, keyReplicas: 1, cached: false },
      { freeGpus: 1, keyReplicas: 1, cached: true },
    ];
    expect(placeReplica(tie, { key: true, plentifulFreeGpus: 4 })).toBe(1);
  });

  it("with plentiful capacity key stages go to the most free GPUs and others pack densely", () => {
    const servers = [2, 6, 5, 8].map((f) => ({ freeGpus: f, keyReplicas: 0, cached: false }));
    expect(placeReplica(servers, { key: true, plentifulFreeGpus: 4 })).toBe(3);
    expect(placeReplica(servers, { key: false, plentifulFreeGpus: 4 })).toBe(0);
    expect(placeReplica(servers.map((s) => ({ ...s, freeGpus: 0 })), { key: true, plentifulFreeGpus: 4 })).toBe(-1);
    // Cache-aware (§4.3, §6.2): a key stage goes where host memory holds it, even with fewer free GPUs there.
    const withCache = servers.map((s, j) => ({ ...s, cached: j === 1 || j === 2 }));
    expect(placeReplica(withCache, { key: true, plentifulFreeGpus: 4 })).toBe(1); // 6 free beats 5; server 3 (8 free) caches nothing
    expect(placeReplica(withCache.map((s, j) => (j === 1 || j === 2 ? { ...s, freeGpus: 0 } : s)), { key: true, plentifulFreeGpus: 4 })).toBe(3); // full where cached: most free
  });
});

describe("stage cache (§6.1)", () => {
  it("evicts least recently used, unheld stages once host memory passes 85%, and not before", () => {
    const c = new StageCache({ hostMemoryBytes: 100, evictAbove: 0.85 });
    expect(c.acquire("m/0", 30, 0)).toBe(false);
    expect(c.acquire("m/1", 30, 0)).toBe(false);
    c.release("m/0", 1);
    c.release("m/1", 2);
    expect(c.acquire("m/2", 25, 3)).toBe(false); // 85 bytes = 85%: not past the threshold
    expect(c.evicted).toEqual([]);
    expect(c.acquire("m/3", 10, 4)).toBe(false); // 95% → evict the LRU unheld entry (m/0), back to 65%
    expect(c.evicted).toEqual(["m/0"]);
    expect(c.has("m/0")).toBe(false);
    expect(c.usedFraction).toBeCloseTo(0.65, 12);
    expect(c.acquire("m/1", 30, 5)).toBe(true); // still cached: a hit, shared by a second fork
  });

  it("never evicts a stage a running replica holds, and counts other tenants' memory", () => {
    const c = new StageCache({ hostMemoryBytes: 100, evictAbove: 0.85, otherBytes: 50 });
    c.acquire("m/0", 30, 0);
    c.acquire("m/1", 30, 1); // 110% in use, everything held
    expect(c.evicted).toEqual([]);
    c.release("m/0", 2);
    c.evict();
    expect(c.evicted).toEqual(["m/0"]);
    expect(() => c.release("m/0", 3)).toThrow(RangeError);
  });

  it("a hit starts at PCIe speed; a miss adds the data-plane fetch (nodes/multicast/ideal)", () => {
    const cost = { pcieBytesPerS: 25e9, networkBytesPerS: 12.5e9, blockCount: 16, forkMs: 200 };
    expect(startMs(50e9, true, cost)).toBeCloseTo(200 + 2000, 9);
    expect(startMs(50e9, false, cost)).toBeCloseTo(200 + 4000 + 2000, 9);
  });

  it("QUART's figures: 43 GB from disk in 45 s; one of 8 stages from host memory in 0.8 s; a miss reads the disk", () => {
    const quart = { pcieBytesPerS: 43e9 / 8 / 0.8, networkBytesPerS: 12.5e9, blockCount: 16, forkMs: 0, diskBytesPerS: 43e9 / 45 };
    expect(diskStartMs(43e9, quart)).toBeCloseTo(45_000, 6);
    expect(startMs(43e9 / 8, true, quart)).toBeCloseTo(800, 6);
    expect(startMs(43e9 / 8, false, quart)).toBeCloseTo(45_000 / 8, 6); // disk, not the data plane
    expect(diskStartMs(10e9, { ...quart, diskBytesPerS: 100e9, pcieBytesPerS: 10e9, forkMs: 200 })).toBeCloseTo(1200, 6); // PCIe bounds a fast disk
    expect(() => diskStartMs(1, { pcieBytesPerS: 1, networkBytesPerS: 1, blockCount: 1, forkMs: 0 })).toThrow(RangeError);
  });

  it("a preloaded stage is a hit for the first replica; preloads past the threshold evict the oldest", () => {
    const c = new StageCache({ hostMemoryBytes: 100, evictAbove: 0.85 });
    c.preload("m/0", 40, 0);
    c.preload("m/1", 40, 1);
    expect(c.evicted).toEqual([]);
    c.preload("m/2", 40, 2); // 120% → m/0 goes, back to 80%
    expect(c.evicted).toEqual(["m/0"]);
    expect(c.acquire("m/1", 40, 3)).toBe(true);
    expect(c.acquire("m/0", 40, 4)).toBe(false); // 120% again: m/2, unheld and oldest, goes
    expect(c.keys().sort()).toEqual(["m/0", "m/1"]);
  });
});
