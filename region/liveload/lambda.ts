/**
 * λScale's execute-while-load over one loading episode (λScale §4.3–4.4), as pure policy: from a multicast plan and
 * the time a step takes, when each execution pipeline can serve, which node runs which blocks in it, and when its
 * nodes switch to local mode.
 *
 * - Arrivals: the plan's synchronous steps (§4.2: one block per node per step), step s landing at (s + 1)·stepMs.
 *   Sources hold every block from 0.
 * - Execution pipelines: Algorithm 2's node groups (`plan.pipelines`, nodes/multicast/lambdascale.ts). A pipeline
 *   serves once its members together hold every block: each block is run by the member that holds it first (ties:
 *   the earlier member), so with k-way transmission member g runs chunk g, the chunk its sub-group receives first
 *   (Algorithm 1). A run of consecutive blocks on one member is a stage; each change of member is one activation
 *   hop per request (the intermediate result, not the KV cache, crosses: §4.3).
 * - Mode switching (§4.4): once every member holds the whole model the pipeline dissolves; each member serves on its
 *   own from then (the pipeline's unfinished requests are spread over the members and their KV recomputed).
 * A pipeline serves as one model instance (2D pipelining keeps every stage busy); after the switch it is |P|.
 */
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";

/** One stage of an execution pipeline: `node` runs blocks [fromBlock, toBlock). */
export interface Stage {
  node: string;
  fromBlock: number;
  toBlock: number;
}

/** One execution pipeline over a loading episode. */
export interface PipelinePhase {
  nodes: string[];
  /** When its members together hold every block: it starts serving as one instance (Infinity: never). */
  formedMs: number;
  /** Who runs which blocks while it serves as a pipeline. */
  stages: Stage[];
  /** Activation hops per request (stages − 1). */
  hops: number;
  /** When every member holds the whole model: each serves locally from then (§4.4). */
  localMs: number;
}

/** When each block lands at each node: arrival[node][block] in ms (sources 0; Infinity: never). */
export function arrivalTimes(plan: MulticastPlan, stepMs: number): Map<string, number[]> {
  if (!(stepMs > 0)) throw new RangeError(`stepMs must be > 0, got ${stepMs}`);
  const at = new Map<string, number[]>();
  for (const n of [...plan.sources, ...plan.targets]) at.set(n, new Array<number>(plan.blockCount).fill(plan.sources.includes(n) ? 0 : Infinity));
  for (const t of plan.transfers) {
    const row = at.get(t.to);
    if (row === undefined) throw new RangeError(`transfer to ${t.to}, which is neither a source nor a target of the plan`);
    row[t.block] = Math.min(row[t.block]!, (t.step + 1) * stepMs);
  }
  return at;
}

/** The execution pipelines of a λScale plan over its loading episode (see the file comment). */
export function lambdaPipelines(plan: MulticastPlan, stepMs: number): PipelinePhase[] {
  const at = arrivalTimes(plan, stepMs);
  const groups = plan.pipelines ?? plan.targets.map((t) => [t]);
  return groups.map((nodes) => {
    const rows = nodes.map((n) => {
      const r = at.get(n);
      if (r === undefined) throw new RangeError(`pipeline member ${n} is not a target of the plan`);
      return r;
    });
    const owner: number[] = [];
    let formedMs = 0;
    for (let b = 0; b < plan.blockCount; b++) {
      let best = 0;
      for (let m = 1; m < rows.length; m++) if (rows[m]![b]! < rows[best]![b]!) best = m;
      owner.push(best);
      formedMs = Math.max(formedMs, rows[best]![b]!);
    }
    const stages: Stage[] = [];
    for (let b = 0; b < plan.blockCount; b++) {
      const last = stages[stages.length - 1];
      if (last !== undefined && last.node === nodes[owner[b]!]) last.toBlock = b + 1;
      else stages.push({ node: nodes[owner[b]!]!, fromBlock: b, toBlock: b + 1 });
    }
    const localMs = Math.max(...rows.map((r) => Math.max(...r)));
    return { nodes: [...nodes], formedMs, stages, hops: stages.length - 1, localMs };
  });
}

/** Model instances serving at time `t` (ms) during the episode: formed pipelines count 1, switched ones |P|. */
export function instancesAt(phases: readonly PipelinePhase[], t: number): number {
  let n = 0;
  for (const p of phases) {
    if (t >= p.localMs) n += p.nodes.length;
    else if (t >= p.formedMs) n += 1;
  }
  return n;
}

/** Prompt tokens one pass carries across each activation hop (the replay's and the live pipelines' figure). */
export const PASS_TOKENS = 256;

/**
 * A pipeline pass's added time (ms): each of its `hops` moves one pass's activations (PASS_TOKENS tokens at
 * `hopMsPerToken`, liveload/live-pairs.ts hopMsPerToken) plus 0.01 ms of per-hop set-up (λScale §4.3: the
 * intermediate result crosses, not the KV cache). The replay (runtime/sim-loading.ts) and the agents actuator
 * (liveload/live-lambda.ts) both add it to every pass of a pipeline's engine.
 */
export function pipelinePassMs(hops: number, hopMsPerToken: number): number {
  return hops * (hopMsPerToken * PASS_TOKENS + 0.01);
}
