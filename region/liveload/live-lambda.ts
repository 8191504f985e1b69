/**
 * λScale's execute-while-load in a running region (issue 35 item 3; λScale §4.3 "Pipelined Inference Execution",
 * §4.4 "Mode Switching"): the `agents` actuator's side of the `lambdascale` loading key. Its scale-outs move the
 * model over the native data plane with λScale's binomial multicast from the k nodes holding complete copies (k-way
 * transmission, nodes/multicast/lambdascale.ts Algorithms 1–2), and the plan names the execution pipelines:
 * groups of target nodes that receive the model's chunks in different orders.
 *
 * This tracker follows the blocks the data plane reports arriving at each target. A pipeline forms once its members
 * together hold every block (the rule of lambda.ts, which replays a plan's synchronous steps; live the owner of a
 * block is the member it reached first): from then it serves as one model instance, each member running the blocks
 * it owns, every change of member one activation hop per pass (`pipelinePassMs`). `onFormed` hands the formed
 * pipeline to the actuator, which makes one member's already-started engine (the head: the member holding the most
 * blocks) serve with that per-pass overhead (region/actuator/engine-lifecycle.ts servePipelined); the head drops the
 * overhead when its own copy is complete (local mode, §4.4), and the other members serve when theirs are, as under
 * stop-the-world. Pipelines of one member (a single target, or Algorithm 2's leftovers) never form early: they load
 * whole; nor does a pipeline one of whose members already holds every block when it would form (that member serves on
 * its own).
 *
 * Differences from the replay (region/runtime/sim-loading.ts), which gives a pipeline its own engine with its
 * members' KV caches and switches every member to local mode together: live, the head's engine is the pipeline
 * (its own KV cache, its node's GPUs as the pipeline's throughput), and each member switches when its own copy is
 * complete.
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { ModelName } from "../../core/models.js";
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";
import type { Stage } from "./lambda.js";
import { hopMsPerToken } from "./live-pairs.js";
import { dataPlaneScheduler, type LoadingConfig } from "./liveload-config.js";
import { TABLE1_CLUSTER_A } from "./sources.js";

/** A pipeline that has just formed: its member nodes, who runs which blocks, and how many blocks each holds now. */
export interface FormedPipeline {
  model: ModelName;
  nodes: string[];
  stages: Stage[];
  hops: number;
  /** Blocks each member (same order as `nodes`) holds when it formed. */
  held: number[];
  /** ms from the plan to the formation. */
  afterMs: number;
}

interface Entry {
  model: ModelName;
  nodes: string[];
  blockCount: number;
  /** owner[b]: index in `nodes` of the member block b reached first; −1 = none yet. */
  owner: Int16Array;
  /** Blocks each member holds. */
  present: Uint8Array[];
  covered: number;
  plannedMs: number;
}

export interface LiveLambdaOptions {
  clock: Clock;
  onFormed(p: FormedPipeline): void;
}

/** Counters of what the live pipelines did (the region's listing and tests). */
export interface LiveLambdaCounters {
  /** Plans with at least one pipeline of two or more members. */
  plans: number;
  /** Pipelines that formed before their members finished loading. */
  formed: number;
}

export class LiveLambdaPipelines {
  readonly counters: LiveLambdaCounters = { plans: 0, formed: 0 };
  /** Pipelines not formed yet, by model. */
  private readonly waiting = new Map<ModelName, Entry[]>();

  constructor(private readonly o: LiveLambdaOptions) {}

  /** Pipelines waiting to form now (tests, the listing). */
  pending(): { model: ModelName; nodes: string[]; covered: number; blockCount: number }[] {
    return [...this.waiting.values()].flat().map((e) => ({ model: e.model, nodes: [...e.nodes], covered: e.covered, blockCount: e.blockCount }));
  }

  /**
   * A transfer of `model` starts with `plan` (a re-plan after a failure too): its pipelines of two or more members
   * wait to form. A pipeline of an earlier plan that shares a node with this one is dropped (the node's store is
   * emptied for the new attempt).
   */
  plan(model: ModelName, plan: MulticastPlan): void {
    const groups = (plan.pipelines ?? []).filter((g) => g.length >= 2);
    const nodes = new Set(plan.targets);
    const kept = (this.waiting.get(model) ?? []).filter((e) => !e.nodes.some((n) => nodes.has(n)));
    const now = this.o.clock.now();
    for (const g of groups) kept.push({ model, nodes: [...g], blockCount: plan.blockCount, owner: new Int16Array(plan.blockCount).fill(-1), present: g.map(() => new Uint8Array(plan.blockCount)), covered: 0, plannedMs: now });
    if (groups.length > 0) this.counters.plans++;
    if (kept.length > 0) this.waiting.set(model, kept);
    else this.waiting.delete(model);
  }

  /** Block `block` of `model` arrived at `node` (the data plane's report). */
  block(model: ModelName, node: string, block: number): void {
    const entries = this.waiting.get(model);
    if (entries === undefined) return;
    for (const e of [...entries]) {
      const m = e.nodes.indexOf(node);
      if (m < 0 || block < 0 || block >= e.blockCount) continue;
      e.present[m]![block] = 1;
      if (e.owner[block] !== -1) continue;
      e.owner[block] = m;
      if (++e.covered < e.blockCount) continue;
      entries.splice(entries.indexOf(e), 1);
      if (entries.length === 0) this.waiting.delete(model);
      this.formed(e);
    }
  }

  /** `node` stopped loading `model` (it failed, was cancelled or its node was lost): its pipelines will not form. */
  drop(model: ModelName, node: string): void {
    const entries = this.waiting.get(model);
    if (entries === undefined) return;
    const kept = entries.filter((e) => !e.nodes.includes(node));
    if (kept.length > 0) this.waiting.set(model, kept);
    else this.waiting.delete(model);
  }

  private formed(e: Entry): void {
    const stages: Stage[] = [];
    for (let b = 0; b < e.blockCount; b++) {
      const node = e.nodes[e.owner[b]!]!;
      const last = stages[stages.length - 1];
      if (last !== undefined && last.node === node) last.toBlock = b + 1;
      else stages.push({ node, fromBlock: b, toBlock: b + 1 });
    }
    const held = e.present.map((p) => p.reduce((a, x) => a + x, 0));
    // A member that already holds the whole model serves on its own (local mode, §4.4): the pipeline adds nothing.
    if (held.some((h) => h === e.blockCount)) return;
    this.counters.formed++;
    this.o.onFormed({ model: e.model, nodes: [...e.nodes], stages, hops: stages.length - 1, held, afterMs: this.o.clock.now() - e.plannedMs });
  }
}

/**
 * The agents actuator's `lambda` option for a region's loading key: undefined unless it runs λScale's pipelines
 * (`lambdascale` with its `lambda-pipelines` scheduler), else the activation hop per prompt token over the key's
 * RDMA bandwidth (live-pairs.ts hopMsPerToken). Throws for real engines (`engines.commandTemplate`: a vLLM cannot
 * be told to serve before its blocks are here).
 */
export function agentsLambda(region: string, loading: LoadingConfig | undefined, commandTemplate?: string): { hopMsPerToken(model: ModelName): number } | undefined {
  if (dataPlaneScheduler(region, loading) !== "lambda-pipelines") return undefined;
  if (commandTemplate !== undefined)
    throw new TidegateError("invalid_config", `region ${region}: loading lambdascale/lambda-pipelines serves loading engine-sim engines as execution pipelines; engines.commandTemplate runs real engines, which cannot serve before their blocks are here (use scheduler "stop-the-world", or drop engines.commandTemplate)`);
  const bw = loading?.bandwidths ?? TABLE1_CLUSTER_A;
  return { hopMsPerToken: (m) => hopMsPerToken(m, bw) };
}
