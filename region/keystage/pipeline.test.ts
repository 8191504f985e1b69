import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { DEFAULT_CLUSTER } from "./keystage-config.js";
import { PipelineSim, type PipelineRequest } from "./pipeline.js";
import { runPipeline } from "../../test/bench/keystage-run.js";
import { Cluster, KeyStageScaler } from "./scaler.js";
import { Pipeline } from "./stages.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import type { KeyStageParams } from "../strategies/keystage.js";

const LLAMA = new Pipeline({ model: "llama2-70b", gpu: "h100-80gb", layersPerStage: [30, 50], profileTp: 4, hiddenSize: 8192 });
const LINK = 12.5e9;
const params = resolveStrategy("keystage").params as KeyStageParams;

describe("pipelined instance (stage-level queue model)", () => {
  it("stage time is the profiled time × TP × the stage's share of layers", () => {
    const full = LLAMA.fullMs(1000, 100);
    expect(LLAMA.stageMs(0, 1000, 100)).toBeCloseTo((full * 4 * 30) / 80, 9);
    expect(LLAMA.stageMs(1, 1000, 100)).toBeCloseTo((full * 4 * 50) / 80, 9);
    expect(LLAMA.stageBytes[0]! + LLAMA.stageBytes[1]!).toBe(140e9);
  });

  it("two requests through two one-replica stages finish at hand-computed times", () => {
    const clock = new VirtualClock(0);
    const done: [number, number][] = [];
    const sim = new PipelineSim({ clock, pipeline: LLAMA, linkBytesPerS: LINK, windowMs: 10_000, onDone: (r, t) => done.push([r.id, t]) });
    sim.addReplica(0, 0, 0);
    sim.addReplica(1, 0, 0);
    const a: PipelineRequest = { id: 1, arrivalMs: 0, promptTokens: 1000, outputTokens: 100 };
    const b: PipelineRequest = { id: 2, arrivalMs: 0, promptTokens: 1000, outputTokens: 100 };
    sim.submit(a);
    sim.submit(b);
    clock.runUntilIdleSync();
    const s0 = LLAMA.stageMs(0, 1000, 100);
    const s1 = LLAMA.stageMs(1, 1000, 100);
    const x = (LLAMA.activationBytes(1000, 100) / LINK) * 1000;
    // Stage 1 is the slower one: b waits there for a.
    expect(done[0]![1]).toBeCloseTo(s0 + x + s1, 6);
    expect(done[1]![1]).toBeCloseTo(Math.max(2 * s0 + x, s0 + x + s1) + s1, 6);
    expect(LLAMA.profiledMs(1000, 100, LINK)).toBeCloseTo(s0 + x + s1, 6);
    // b waited at stage 0 for s0 and at stage 1 for s1 − s0; the time averages over the run reflect that.
    const q = sim.averageQueues();
    expect(q[0]! * clock.now()).toBeCloseTo(s0, 3);
    expect(q[1]! * clock.now()).toBeCloseTo(s1 - s0, 3);
  });

  it("a drained replica finishes its request before its GPU is returned", () => {
    const clock = new VirtualClock(0);
    const stopped: number[] = [];
    const sim = new PipelineSim({ clock, pipeline: LLAMA, linkBytesPerS: LINK, windowMs: 10_000, onReplicaStopped: () => stopped.push(clock.now()) });
    sim.addReplica(0, 0, 0);
    sim.addReplica(1, 0, 0);
    sim.submit({ id: 1, arrivalMs: 0, promptTokens: 1000, outputTokens: 100 });
    expect(sim.removeReplica(0)).toBe("busy");
    expect(stopped).toEqual([]);
    clock.runUntilIdleSync();
    expect(stopped[0]).toBeCloseTo(LLAMA.stageMs(0, 1000, 100), 6);
  });
});

describe("key-stage scaler", () => {
  const burst = (n: number): PipelineRequest[] => Array.from({ length: n }, (_, id) => ({ id, arrivalMs: id * 10, promptTokens: 1000, outputTokens: 50 }));

  it("a burst makes the first stage key; it grows from host memory within the budget", () => {
    const clock = new VirtualClock(0);
    let scaler!: KeyStageScaler;
    const sim = new PipelineSim({ clock, pipeline: LLAMA, linkBytesPerS: LINK, windowMs: params.windowMs, onReplicaStopped: (r) => scaler.onReplicaStopped(r) });
    const cluster = new Cluster(DEFAULT_CLUSTER, [0, 0]);
    scaler = new KeyStageScaler({ clock, sim, pipeline: LLAMA, cluster, params, mode: "key-stage", budgetGpus: 10, expectedServiceMs: [0, 1].map((s) => LLAMA.stageMs(s, 1000, 50)), cacheKey: "llama2-70b" });
    scaler.deployInitial();
    scaler.start();
    for (const r of burst(40)) clock.at(r.arrivalMs, () => sim.submit(r));
    clock.advanceToSync(1000);
    expect(scaler.lastPlans[0]!.key).toBe(true);
    expect(sim.replicas(0).length).toBeGreaterThan(1);
    clock.advanceToSync(120_000);
    scaler.stop();
    expect(sim.completed).toBe(40);
    expect(scaler.stats.peakGpus).toBeLessThanOrEqual(10);
    expect(scaler.stats.cacheHits).toBeGreaterThan(0); // the initial replicas left their stages in host memory
    expect(cluster.free.reduce((a, b) => a + b, 0) + scaler.heldGpus).toBe(16);
  });

  it("loadFrom disk (QUART §8's baselines): every new replica reads its stage from disk, none from host memory", () => {
    const cluster = { ...DEFAULT_CLUSTER, diskBytesPerS: 1e9 };
    const disk = runPipeline({ pipeline: LLAMA, requests: burst(60), mode: "whole-pipeline", budgetGpus: 8, params, cluster, occupied: [0, 0], sloFactor: 2, loadFrom: "disk" });
    expect(disk.completed).toBe(60);
    expect(disk.scaler.added).toBeGreaterThan(0);
    expect(disk.scaler.diskLoads).toBe(disk.scaler.added);
    expect(disk.scaler.cacheHits + disk.scaler.cacheMisses).toBe(0);
    // The same run from the stage cache starts its replicas in 2.4 s (60 GB at 25 GB/s) instead of 60 s: faster.
    const cached = runPipeline({ pipeline: LLAMA, requests: burst(60), mode: "whole-pipeline", budgetGpus: 8, params, cluster, occupied: [0, 0], sloFactor: 2 });
    expect(cached.scaler.diskLoads).toBe(0);
    expect(cached.meanMs).toBeLessThan(disk.meanMs);
  });

  it("a stage preloaded on one server is in that server's host memory only", () => {
    const cluster = new Cluster({ ...DEFAULT_CLUSTER, hostMemoryBytes: 120e9 }, [0, 0]);
    cluster.preload(1, "llama2-70b", 0, LLAMA.stageBytes[0]!, 0);
    expect(cluster.caches[1]!.has("llama2-70b/0")).toBe(true);
    expect(cluster.caches[0]!.has("llama2-70b/0")).toBe(false);
    cluster.preload(1, "llama2-70b", 1, LLAMA.stageBytes[1]!, 1); // 52.5 + 87.5 GB past 102 GB (85%): the older stage goes
    expect(cluster.caches[1]!.keys()).toEqual(["llama2-70b/1"]);
  });

  it("whole-pipeline mode keeps every stage at the same count, within ⌊budget / S⌋", () => {
    const r = runPipeline({ pipeline: LLAMA, requests: burst(60), mode: "whole-pipeline", budgetGpus: 9, params, cluster: DEFAULT_CLUSTER, occupied: [0, 0], sloFactor: 2 });
    expect(r.completed).toBe(60);
    expect(r.scaler.peakGpus).toBeLessThanOrEqual(8);
    expect(r.scaler.peakGpus % 2).toBe(0);
    const k = runPipeline({ pipeline: LLAMA, requests: burst(60), mode: "key-stage", budgetGpus: 9, params, cluster: DEFAULT_CLUSTER, occupied: [0, 0], sloFactor: 2 });
    expect(k.completed).toBe(60);
    expect(k.scaler.peakGpus).toBeLessThanOrEqual(9);
  });

  it("a run stopped before every request is done counts the rest: +Infinity latency and SLO misses (issue 36)", () => {
    const whole = runPipeline({ pipeline: LLAMA, requests: burst(60), mode: "key-stage", budgetGpus: 9, params, cluster: DEFAULT_CLUSTER, occupied: [0, 0], sloFactor: 2 });
    const cut = runPipeline({ pipeline: LLAMA, requests: burst(60), mode: "key-stage", budgetGpus: 9, params, cluster: DEFAULT_CLUSTER, occupied: [0, 0], sloFactor: 2, drainLimitMs: 0 });
    expect(cut.completed).toBeLessThan(60);
    expect(cut.meanMs).toBe(Number.POSITIVE_INFINITY);
    expect(cut.p99Ms).toBe(Number.POSITIVE_INFINITY);
    expect(cut.sloAttainment).toBeLessThanOrEqual(cut.completed / 60);
    expect(Number.isFinite(whole.meanMs)).toBe(true);
  });
});
