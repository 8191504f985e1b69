import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { isTidegateError } from "../../core/errors.js";
import { planBinomial } from "../../nodes/multicast/lambdascale.js";
import { lambdaPipelines, pipelinePassMs } from "./lambda.js";
import { LiveLambdaPipelines, agentsLambda, type FormedPipeline } from "./live-lambda.js";
import { hopMsPerToken } from "./live-pairs.js";
import { parseLoadingConfig } from "./liveload-config.js";
import { TABLE1_CLUSTER_A } from "./sources.js";

const MODEL = "llama3.1-8b";

/** A 2 → 2 λScale plan: two sub-groups fed in shifted orders, one pipeline [t0, t1] (Algorithms 1–2). */
function plan(blockCount = 8) {
  return planBinomial({ model: { totalBytes: blockCount * 1024, blockCount }, sources: ["s0", "s1"], targets: ["t0", "t1"] });
}

function tracker(clock = new VirtualClock(0)) {
  const formed: FormedPipeline[] = [];
  const t = new LiveLambdaPipelines({ clock, onFormed: (p) => formed.push(p) });
  return { t, formed, clock };
}

describe("LiveLambdaPipelines (λScale §4.3 live)", () => {
  it("a pipeline forms once its members together hold every block, the first arrival owning a block; stages and hops as the replay's", () => {
    const p = plan();
    expect(p.pipelines).toEqual([["t0", "t1"]]);
    const { t, formed, clock } = tracker();
    t.plan(MODEL, p);
    expect(t.pending()).toEqual([{ model: MODEL, nodes: ["t0", "t1"], covered: 0, blockCount: 8 }]);
    // The plan's transfers in step order, as the data plane reports them (10 ms a step).
    const byStep = [...p.transfers].sort((a, b) => a.step - b.step);
    let formedAtStep = -1;
    for (const tr of byStep) {
      clock.advanceToSync((tr.step + 1) * 10);
      t.block(MODEL, tr.to, tr.block);
      if (formed.length === 1 && formedAtStep < 0) formedAtStep = tr.step;
    }
    expect(formed).toHaveLength(1);
    const f = formed[0]!;
    // The replay's pipeline over the same plan: the same stages, formed at the same step.
    const replay = lambdaPipelines(p, 10)[0]!;
    expect(f.stages).toEqual(replay.stages);
    expect(f.hops).toBe(replay.hops);
    expect((formedAtStep + 1) * 10).toBe(replay.formedMs);
    expect(f.afterMs).toBe(replay.formedMs);
    // k-way transmission: t0 runs chunk 0, t1 chunk 1; each held half the model when it formed.
    expect(f.stages).toEqual([
      { node: "t0", fromBlock: 0, toBlock: 4 },
      { node: "t1", fromBlock: 4, toBlock: 8 },
    ]);
    expect(f.held).toEqual([4, 4]);
    expect(f.afterMs).toBeLessThan(replay.localMs);
    expect(t.counters).toEqual({ plans: 1, formed: 1 });
    expect(t.pending()).toEqual([]);
  });

  it("a member that stops loading, or a re-plan over its nodes, drops the pipeline; one-member pipelines never wait", () => {
    const { t, formed } = tracker();
    t.plan(MODEL, plan());
    t.drop(MODEL, "t1");
    expect(t.pending()).toEqual([]);
    t.plan(MODEL, plan());
    t.block(MODEL, "t0", 0);
    t.plan(MODEL, plan()); // a re-plan: its stores start empty again
    expect(t.pending()).toEqual([{ model: MODEL, nodes: ["t0", "t1"], covered: 0, blockCount: 8 }]);
    t.plan(MODEL, planBinomial({ model: { totalBytes: 8192, blockCount: 8 }, sources: ["s0"], targets: ["t0"] }));
    expect(t.pending()).toEqual([]);
    for (let b = 0; b < 8; b++) t.block(MODEL, "t0", b);
    expect(formed).toEqual([]);
    // A member that holds the whole model by the time the pipeline covers every block serves on its own.
    t.plan(MODEL, plan());
    for (let b = 0; b < 8; b++) t.block(MODEL, "t0", b);
    expect(t.pending()).toEqual([]);
    expect(formed).toEqual([]);
  });

  it("unequal streams: a member whose second chunk arrives before the other member's first serves alone (no pipeline)", () => {
    // t0 receives 0..7 from s0, t1 receives 4..7 then 0..3 from s1 (Algorithm 1). Here t1's stream runs twice as fast
    // as t0's (as an unpaced in-process data plane on a busy host can): t1 holds 4..7 and 0..3 while t0 holds 0, 1.
    const { t, formed } = tracker();
    t.plan(MODEL, plan());
    const reports: [string, number][] = [["t1", 4], ["t1", 5], ["t0", 0], ["t1", 6], ["t1", 7], ["t0", 1], ["t1", 0], ["t1", 1], ["t1", 2]];
    for (const [n, b] of reports) t.block(MODEL, n, b);
    // Owners: t1 for 4..7 and 2, t0 for 0 and 1 (first arrival); block 3 is still missing.
    expect(t.pending()).toEqual([{ model: MODEL, nodes: ["t0", "t1"], covered: 7, blockCount: 8 }]);
    t.block(MODEL, "t1", 3); // covers every block, and t1 holds all 8 at that moment
    expect(formed).toEqual([]);
    expect(t.pending()).toEqual([]);
    expect(t.counters).toEqual({ plans: 1, formed: 0 });
    // The same plan with t0's stream one block behind: it forms as soon as t0 has its chunk 0..3.
    t.plan(MODEL, plan());
    for (const [n, b] of [["t1", 4], ["t1", 5], ["t0", 0], ["t1", 6], ["t1", 7], ["t0", 1], ["t1", 0], ["t0", 2], ["t1", 1], ["t0", 3]] as [string, number][]) t.block(MODEL, n, b);
    expect(formed).toHaveLength(1);
    expect(formed[0]!.held).toEqual([4, 6]);
    expect(formed[0]!.stages).toEqual([
      { node: "t0", fromBlock: 0, toBlock: 4 },
      { node: "t1", fromBlock: 4, toBlock: 8 },
    ]);
  });

  it("the pass overhead is the replay's: hops × (256 tokens of activations over RDMA + 0.01 ms)", () => {
    const hop = hopMsPerToken(MODEL, TABLE1_CLUSTER_A);
    expect(pipelinePassMs(1, hop)).toBeCloseTo(hop * 256 + 0.01, 9);
    expect(pipelinePassMs(0, hop)).toBe(0);
  });

  it("agentsLambda: the RDMA hop for lambdascale, none for other keys or its stop-the-world, an error for real engines", () => {
    expect(agentsLambda("r", undefined)).toBeUndefined();
    expect(agentsLambda("r", parseLoadingConfig({ source: "blitzscale" }, "x"))).toBeUndefined();
    expect(agentsLambda("r", parseLoadingConfig({ source: "lambdascale", scheduler: "stop-the-world" }, "x"))).toBeUndefined();
    const l = agentsLambda("r", parseLoadingConfig({ source: "lambdascale", bandwidthsGbps: { rdma: 200 } }, "x"))!;
    expect(l.hopMsPerToken(MODEL)).toBeCloseTo(hopMsPerToken(MODEL, { ...TABLE1_CLUSTER_A, rdmaBitsPerS: 200e9 }), 12);
    let err: unknown;
    try {
      agentsLambda("r", parseLoadingConfig({ source: "lambdascale" }, "x"), "vllm serve {model} --port {port}");
    } catch (e) {
      err = e;
    }
    expect(isTidegateError(err, "invalid_config")).toBe(true);
    expect((err as Error).message).toMatch(/^region r: loading lambdascale\/lambda-pipelines serves loading engine-sim engines/);
  });
});
